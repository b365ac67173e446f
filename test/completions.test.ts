import t from 'tap'
import OpenAI from 'openai'
import { chatServer } from './helpers/openai.js'
import { postJson, requestJson } from './helpers/server.js'

// POST /v1/completions on the built-in tiny model, through the real openai SDK where a client would
// use it. Expected values come from other routes (/tokenize, chat completions) or from the
// request's own parts, never from the code under test.
const chat = chatServer()

type Extra = Record<string, unknown>
/** vLLM's extra fields on a choice (`return_token_ids`). */
type Choice = OpenAI.CompletionChoice & { token_ids?: number[]; prompt_token_ids?: number[] }
type Completion = Omit<OpenAI.Completion, 'choices'> & Extra & { choices: Choice[] }
const complete = (body: Extra) => chat.client.completions.create({ model: 'weft-tiny', ...body } as never) as unknown as Promise<Completion>
const raw = (path: string, body: unknown) => postJson(chat.s, path, body, chat.s.bearer())
const greedy = { temperature: 0, ignore_eos: true }
const PROMPT = 'The weather in Paris today is'
const OTHER = 'Once upon a time'

const tokenize = async (prompt: string, add_special_tokens = true): Promise<number[]> => {
  const r = await raw('/tokenize', { prompt, add_special_tokens })
  return r.json.tokens
}

/** The chat path's greedy continuation of exactly these prompt tokens: a template that renders the text as it is. */
const chatContinuation = async (prompt: string, max_tokens: number) => {
  const r = await raw('/v1/chat/completions', {
    messages: [{ role: 'user', content: prompt }],
    chat_template: '{{ messages[0].content }}',
    add_generation_prompt: false,
    add_special_tokens: true,
    max_tokens,
    return_token_ids: true,
    ...greedy,
  })
  t.equal(r.status, 200, 'the chat path answers')
  return {
    text: r.json.choices[0].message.content as string,
    ids: r.json.choices[0].token_ids as number[],
    prompt: r.json.prompt_token_ids,
  }
}

t.test('a text prompt: shape, greedy text equal to the chat path on the same tokens, default max_tokens', async (t) => {
  const r = await complete({ prompt: PROMPT, max_tokens: 6, ...greedy, return_token_ids: true })
  t.match(r.id, /^cmpl-/)
  t.equal(r.object, 'text_completion')
  t.equal(r.model, 'weft-tiny')
  t.equal(r.choices.length, 1)
  t.equal(r.choices[0]!.index, 0)
  t.equal(r.choices[0]!.finish_reason, 'length')
  t.equal(r.choices[0]!.logprobs, null, 'no logprobs unless asked')
  const expected = await chatContinuation(PROMPT, 6)
  t.equal(r.choices[0]!.text, expected.text, 'same text as the chat path')
  t.same(r.choices[0]!.token_ids, expected.ids, 'same tokens')
  t.same(r.choices[0]!.prompt_token_ids, await tokenize(PROMPT), 'the prompt is the tokenizer encoding of the text')
  t.same(r.usage, {
    prompt_tokens: expected.prompt.length,
    completion_tokens: 6,
    total_tokens: expected.prompt.length + 6,
    prompt_tokens_details: { cached_tokens: 0 },
  })
  const d = await complete({ prompt: PROMPT, ignore_eos: true, seed: 3 })
  t.equal(d.usage!.completion_tokens, 16, 'max_tokens defaults to 16')
})

t.test('token-id prompts give the same completion as their text; lists of either', async (t) => {
  const ids = await tokenize(PROMPT)
  const byText = await complete({ prompt: PROMPT, max_tokens: 5, ...greedy })
  const byIds = await complete({ prompt: ids, max_tokens: 5, ...greedy })
  t.equal(byIds.choices[0]!.text, byText.choices[0]!.text)
  t.equal(byIds.usage!.prompt_tokens, ids.length)
  const other = await tokenize(OTHER)
  const lists = await complete({ prompt: [ids, other], max_tokens: 5, ...greedy })
  const texts = await complete({ prompt: [PROMPT, OTHER], max_tokens: 5, ...greedy })
  const alone = await complete({ prompt: OTHER, max_tokens: 5, ...greedy })
  t.same(
    lists.choices.map((c) => c.index),
    [0, 1],
  )
  t.same(
    lists.choices.map((c) => c.text),
    [byText.choices[0]!.text, alone.choices[0]!.text],
    'each prompt continued as when alone',
  )
  t.same(
    texts.choices.map((c) => c.text),
    lists.choices.map((c) => c.text),
  )
  t.equal(lists.usage!.prompt_tokens, ids.length + other.length, 'usage adds up the prompts')
  t.equal(lists.usage!.completion_tokens, 10)
  const wrong = await raw('/v1/completions', { prompt: [ids[0], 99999], max_tokens: 2 })
  t.equal(wrong.status, 400, 'an id past the vocabulary is 400')
  const truncated = await complete({ prompt: ids, truncate_prompt_tokens: 3, max_tokens: 2 })
  t.equal(truncated.usage!.prompt_tokens, 3, 'a token prompt truncated to its tail runs')
  // One token per character: the same text, but not the tokenizer's own (merged) encoding of it.
  const chars = (await Promise.all([...'Hello'].map((ch) => tokenize(ch, false)))).flat()
  t.not(chars.join(), (await tokenize('Hello', false)).join(), 'the tokenizer merges these characters')
  // vLLM runs a token prompt as the ids given, whatever the tokenizer would make of their text (harnesses such as
  // lm-eval send their own encodings, and benchmarks send random ids).
  const unmerged = await raw('/v1/completions', { prompt: chars, max_tokens: 2, return_token_ids: true })
  t.equal(unmerged.status, 200, 'ids that re-encode differently run as given')
  t.equal(unmerged.json.usage.prompt_tokens, chars.length, 'one prompt token per id sent')
  t.same(unmerged.json.choices[0].prompt_token_ids, chars, 'the engine took the ids sent, not a re-encoding')
  t.match(wrong.json.error, { param: 'prompt', message: 'Token id 99999 is out of vocabulary' }, "vLLM's message")
})

t.test('2 prompts × n=2: choice prompt·n+j is choice j of that prompt alone', async (t) => {
  const body = { max_tokens: 6, n: 2, seed: 11, temperature: 1, ignore_eos: true }
  const both = await complete({ prompt: [PROMPT, OTHER], ...body })
  t.same(
    both.choices.map((c) => c.index),
    [0, 1, 2, 3],
  )
  const first = await complete({ prompt: PROMPT, ...body })
  const second = await complete({ prompt: OTHER, ...body })
  const byIndex = new Map(both.choices.map((c) => [c.index, c.text]))
  for (let j = 0; j < 2; j++) {
    t.equal(byIndex.get(j), first.choices[j]!.text, `choice ${j} is prompt 0, j=${j}`)
    t.equal(byIndex.get(2 + j), second.choices[j]!.text, `choice ${2 + j} is prompt 1, j=${j}`)
  }
  t.not(first.choices[0]!.text, first.choices[1]!.text, 'the n choices differ (seed + j)')
  const streamed = new Map<number, string>()
  const stream = await chat.client.completions.create({ model: 'weft-tiny', prompt: [PROMPT, OTHER], stream: true, ...body } as never)
  for await (const chunk of stream as unknown as AsyncIterable<OpenAI.Completion>)
    for (const c of chunk.choices) streamed.set(c.index, (streamed.get(c.index) ?? '') + c.text)
  t.same(Object.fromEntries(streamed), Object.fromEntries(byIndex), 'streamed choices carry the same indices')
})

t.test('logprobs in the legacy shape; echo adds the prompt and its logprobs', async (t) => {
  const k = 3
  const plain = await complete({ prompt: PROMPT, max_tokens: 5, logprobs: k, ...greedy })
  const lp = plain.choices[0]!.logprobs!
  t.equal(lp.tokens!.length, 5)
  t.equal(lp.tokens!.join(''), plain.choices[0]!.text, 'the tokens spell the text')
  t.equal(lp.text_offset![0], 0)
  for (let i = 1; i < 5; i++) t.equal(lp.text_offset![i], lp.text_offset![i - 1]! + [...lp.tokens![i - 1]!].length, `offset ${i}`)
  for (const [i, top] of lp.top_logprobs!.entries()) {
    t.ok(Object.keys(top).length <= k + 1, 'at most the token and k alternatives')
    t.equal(top[lp.tokens![i]!], lp.token_logprobs![i], 'the token is among its alternatives with its logprob')
    t.ok(Math.max(...Object.values(top)) <= 0)
  }
  const echo = await complete({ prompt: PROMPT, max_tokens: 5, logprobs: k, echo: true, ...greedy })
  const e = echo.choices[0]!
  t.equal(e.text, PROMPT + plain.choices[0]!.text, 'the prompt text, then the same continuation')
  const promptLen = await tokenize(PROMPT)
  const P = promptLen.length
  const el = e.logprobs!
  t.equal(el.tokens!.length, P + 5, 'one entry per prompt and generated token')
  t.equal(el.tokens!.slice(0, P).join(''), PROMPT, 'the prompt tokens spell the prompt')
  t.equal(el.token_logprobs![0], null, 'nothing before the first prompt token')
  t.equal(el.top_logprobs![0], null)
  t.same(el.token_logprobs!.slice(P), lp.token_logprobs, 'generated logprobs as without echo')
  t.same(el.tokens!.slice(P), lp.tokens)
  // The chat path's prompt logprobs of the same tokens, keyed by id: the echoed values must be those.
  const ids = await tokenize(PROMPT)
  const viaChat = await raw('/v1/chat/completions', {
    messages: [{ role: 'user', content: PROMPT }],
    chat_template: '{{ messages[0].content }}',
    add_generation_prompt: false,
    add_special_tokens: true,
    max_tokens: 1,
    prompt_logprobs: 0,
    ...greedy,
  })
  const plp = viaChat.json.prompt_logprobs as (Record<string, { logprob: number }> | null)[]
  for (let i = 1; i < P; i++) t.equal(el.token_logprobs![i], plp[i]![String(ids[i])]!.logprob, `prompt token ${i}`)
  const streamed = await chat.client.completions.create({
    model: 'weft-tiny',
    prompt: PROMPT,
    max_tokens: 5,
    logprobs: k,
    echo: true,
    stream: true,
    ...greedy,
  } as never)
  const tokens: string[] = []
  const values: (number | null)[] = []
  let text = ''
  for await (const chunk of streamed as unknown as AsyncIterable<OpenAI.Completion>) {
    text += chunk.choices[0]!.text
    tokens.push(...chunk.choices[0]!.logprobs!.tokens!)
    values.push(...(chunk.choices[0]!.logprobs!.token_logprobs as (number | null)[]))
  }
  t.equal(text, e.text, 'streamed echo: same text')
  t.same(tokens, el.tokens, 'streamed echo: same tokens')
  t.same(values, el.token_logprobs, 'streamed echo: same logprobs, the prompt included')
})

t.test('streaming: text_completion chunks, the usage chunk with include_usage', async (t) => {
  const whole = await complete({ prompt: PROMPT, max_tokens: 7, ...greedy })
  const stream = await chat.client.completions.create({
    model: 'weft-tiny',
    prompt: PROMPT,
    max_tokens: 7,
    stream: true,
    stream_options: { include_usage: true },
    ...greedy,
  } as never)
  const chunks: OpenAI.Completion[] = []
  for await (const c of stream as unknown as AsyncIterable<OpenAI.Completion>) chunks.push(c)
  t.ok(chunks.every((c) => c.object === 'text_completion' && c.id === chunks[0]!.id))
  const last = chunks[chunks.length - 1]!
  t.same(last.choices, [], 'the usage chunk has no choices')
  t.same(last.usage, { ...whole.usage })
  const body = chunks.slice(0, -1)
  t.equal(body.map((c) => c.choices[0]!.text).join(''), whole.choices[0]!.text)
  t.equal(body[body.length - 1]!.choices[0]!.finish_reason, 'length')
  t.ok(
    body.slice(0, -1).every((c) => c.usage === undefined && c.choices[0]!.finish_reason === null),
    'no usage and no finish before the end',
  )
  const noUsage = await chat.client.completions.create({ model: 'weft-tiny', prompt: PROMPT, max_tokens: 3, stream: true } as never)
  for await (const c of noUsage as unknown as AsyncIterable<OpenAI.Completion>)
    t.equal(c.usage, undefined, 'no usage without include_usage')
})

t.test('refusals in the OpenAI shape: suffix, best_of, bad prompts, unknown model', async (t) => {
  const err = (body: Extra) => complete(body).catch((e: unknown) => e as InstanceType<typeof OpenAI.APIError>)
  const suffix = await err({ prompt: 'a', suffix: 'b' })
  t.type(suffix, OpenAI.BadRequestError)
  t.equal(suffix.message, '400 suffix is not currently supported')
  const bestOf = await err({ prompt: 'a', n: 2, best_of: 2, temperature: 1 })
  t.match(bestOf.message, /does not yet support best_of/)
  const fewer = await err({ prompt: 'a', n: 2, best_of: 1, temperature: 1 })
  t.match(fewer.message, /best_of must be greater than or equal to n, got n=2 and best_of=1/)
  const one = await complete({ prompt: 'a', best_of: 1, max_tokens: 2 })
  t.equal(one.choices.length, 1, 'best_of 1 is accepted')
  const unknown = await err({ prompt: 'a', model: 'nope' })
  t.type(unknown, OpenAI.NotFoundError)
  for (const prompt of [[], [[]], '', 7, [1, 'a']]) {
    const r = await raw('/v1/completions', { prompt, max_tokens: 2 })
    t.equal(r.status, 400, `prompt ${JSON.stringify(prompt)}`)
    t.type(r.json.error.message, 'string')
  }
  const malformed = await fetch(chat.s.url + '/v1/completions', {
    method: 'POST',
    headers: { ...chat.s.bearer(), 'content-type': 'application/json' },
    body: '{"prompt": ',
  })
  t.equal(malformed.status, 400)
  t.type(((await malformed.json()) as { error: { message: string } }).error.message, 'string')
})

t.test('the /inference/v1 prefix: completions, tokenize, detokenize, a model', async (t) => {
  const viaPrefix = new OpenAI({ apiKey: chat.s.key, baseURL: chat.s.url + '/inference/v1', maxRetries: 0 })
  const r = (await viaPrefix.completions.create({
    model: 'weft-tiny',
    prompt: PROMPT,
    max_tokens: 4,
    ...greedy,
  } as never)) as OpenAI.Completion
  const direct = await complete({ prompt: PROMPT, max_tokens: 4, ...greedy })
  t.equal(r.choices[0]!.text, direct.choices[0]!.text)
  const tok = await raw('/inference/v1/tokenize', { prompt: PROMPT })
  t.equal(tok.status, 200)
  t.same(tok.json, (await raw('/tokenize', { prompt: PROMPT })).json)
  const detok = await raw('/inference/v1/detokenize', { tokens: tok.json.tokens })
  t.same(detok.json, { prompt: PROMPT })
  const model = await viaPrefix.models.retrieve('weft-tiny')
  t.equal(model.id, 'weft-tiny')
  const listed = await chat.client.models.list()
  t.same({ ...model, created: 0, permission: null }, { ...listed.data[0], created: 0, permission: null }, 'the card /v1/models lists')
  const missing = await chat.client.models.retrieve('no-such-model').catch((e: unknown) => e)
  t.type(missing, OpenAI.NotFoundError)
  const missingBody = await requestJson(chat.s, 'GET', '/v1/models/no-such-model', undefined, chat.s.bearer())
  t.same(missingBody.json, {
    error: { message: 'The model `no-such-model` does not exist.', type: 'NotFoundError', param: 'model', code: 404 },
  })
})

t.test('each completion is recorded as an openai.completions.create call', async (t) => {
  const project = 'acme/cmpl-' + Math.random().toString(36).slice(2, 8)
  const scoped = new OpenAI({
    apiKey: chat.s.key,
    baseURL: chat.s.url + '/v1',
    maxRetries: 0,
    defaultHeaders: { 'OpenAI-Project': project },
  })
  const r = (await scoped.completions.create({
    model: 'weft-tiny',
    prompt: [PROMPT, OTHER],
    max_tokens: 3,
    ...greedy,
  } as never)) as OpenAI.Completion
  const q = await raw('/calls/stream_query', { project_id: project })
  const calls = q.text
    .trim()
    .split('\n')
    .map((l: string) => JSON.parse(l))
  t.equal(calls.length, 1)
  t.equal(calls[0].op_name, 'openai.completions.create')
  t.same(calls[0].inputs.prompt, [PROMPT, OTHER], 'the request as inputs')
  t.same(
    calls[0].output.choices.map((c: { text: string }) => c.text),
    r.choices.map((c) => c.text),
  )
  t.equal(calls[0].output.object, 'text_completion')
  t.equal(calls[0].summary.usage['weft-tiny'].completion_tokens, 6)
})
