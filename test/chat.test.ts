import t from 'tap'
import OpenAI from 'openai'
import { chatServer } from './helpers/openai.js'
import { startServer } from './helpers/server.js'

// The built-in tiny model, served by the real server, through the real openai SDK. Its replies are
// noise from fixed weights: the tests check the API's semantics, not the words.
const chat = chatServer()

const messages = [
  { role: 'system' as const, content: 'Be brief.' },
  { role: 'user' as const, content: 'What is the weather in Paris today?' },
]
type Extra = Record<string, unknown>
/** vLLM's extra fields on a choice (`return_token_ids`, `stop_reason`). */
type Choice = OpenAI.ChatCompletion.Choice & { token_ids?: number[]; stop_reason?: string | number | null }
type Reply = Omit<OpenAI.ChatCompletion, 'choices'> & Extra & { choices: Choice[] }
const create = (body: Extra) =>
  chat.client.chat.completions.create({ model: 'weft-tiny', messages, ...body } as never) as unknown as Promise<Reply>

t.test('a completion: shape, usage, length limit, the model listed', async (t) => {
  const r = await create({ max_tokens: 8, seed: 1 })
  t.match(r.id, /^chatcmpl-/)
  t.equal(r.object, 'chat.completion')
  t.equal(r.model, 'weft-tiny')
  t.equal(r.choices.length, 1)
  t.equal(r.choices[0]!.message.role, 'assistant')
  t.type(r.choices[0]!.message.content, 'string')
  t.equal(r.usage!.completion_tokens, 8, 'no end-of-sequence in 8 tokens: max_tokens reached')
  t.equal(r.choices[0]!.finish_reason, 'length')
  t.equal(r.usage!.total_tokens, r.usage!.prompt_tokens + 8)
  const tokenized = await fetch(chat.s.url + '/tokenize', {
    method: 'POST',
    headers: { ...chat.s.bearer(), 'content-type': 'application/json' },
    body: JSON.stringify({ messages }),
  }).then((x) => x.json() as Promise<any>)
  t.equal(r.usage!.prompt_tokens, tokenized.count, 'prompt tokens: the rendered chat template')
  const models = await chat.client.models.list()
  t.same(
    models.data.map((m) => m.id),
    ['weft-tiny'],
  )
  t.equal((models.data[0] as unknown as Extra).max_model_len, 4096)
  const viaPrefix = new OpenAI({ apiKey: chat.s.key, baseURL: chat.s.url + '/inference/v1', maxRetries: 0 })
  const p = await viaPrefix.chat.completions.create({ model: 'weft-tiny', messages, max_tokens: 2, seed: 1 })
  t.equal(
    p.choices[0]!.message.content,
    (await create({ max_tokens: 2, seed: 1 })).choices[0]!.message.content,
    '/inference/v1 is the same API',
  )
  t.same(
    (await viaPrefix.models.list()).data.map((m) => m.id),
    ['weft-tiny'],
    'GET /inference/v1/models',
  )
  const slash = await fetch(chat.s.url + '/v1/chat/completions/', {
    method: 'POST',
    headers: { ...chat.s.bearer(), 'content-type': 'application/json' },
    body: JSON.stringify({ messages, max_tokens: 2, seed: 1 }),
  })
  t.equal(slash.status, 200, 'the trailing slash of the spec path')
  t.equal(
    ((await slash.json()) as { choices: { message: { content: string } }[] }).choices[0]!.message.content,
    p.choices[0]!.message.content,
  )
})

t.test('the same seed gives the same reply; choice i of n uses seed + i', async (t) => {
  const a = await create({ max_tokens: 16, seed: 42, temperature: 1 })
  const b = await create({ max_tokens: 16, seed: 42, temperature: 1 })
  t.equal(a.choices[0]!.message.content, b.choices[0]!.message.content)
  const c = await create({ max_tokens: 16, seed: 43, temperature: 1 })
  t.not(a.choices[0]!.message.content, c.choices[0]!.message.content, 'another seed, another reply')
  const n = await create({ max_tokens: 16, seed: 42, temperature: 1, n: 3 })
  t.same(
    n.choices.map((x) => x.index),
    [0, 1, 2],
  )
  t.equal(n.choices[0]!.message.content, a.choices[0]!.message.content, 'choice 0: seed')
  t.equal(n.choices[1]!.message.content, c.choices[0]!.message.content, 'choice 1: seed + 1')
  t.equal(n.usage!.completion_tokens, 48, 'completion tokens summed over the choices')
  const g1 = await create({ max_tokens: 12, temperature: 0 })
  const g2 = await create({ max_tokens: 12, temperature: 0 })
  t.equal(g1.choices[0]!.message.content, g2.choices[0]!.message.content, 'greedy is deterministic')
})

t.test('streaming through the SDK helpers: role first, deltas, finish, usage, [DONE]', async (t) => {
  const whole = await create({ max_tokens: 10, seed: 5 })
  const stream = chat.client.chat.completions.stream({
    model: 'weft-tiny',
    messages,
    max_tokens: 10,
    seed: 5,
    stream_options: { include_usage: true },
  })
  const chunks: OpenAI.ChatCompletionChunk[] = []
  stream.on('chunk', (c) => chunks.push(c))
  const final = await stream.finalChatCompletion()
  t.equal(final.choices[0]!.message.content, whole.choices[0]!.message.content, 'the streamed text is the whole reply')
  t.same(chunks[0]!.choices[0]!.delta, { role: 'assistant', content: '' })
  const last = chunks[chunks.length - 1]!
  t.same(last.choices, [], 'the usage chunk has no choices')
  // The same prompt ran before (whole), so its full 16-token blocks but the last token come from the prefix cache.
  const P = whole.usage!.prompt_tokens
  t.same(last.usage, {
    prompt_tokens: P,
    completion_tokens: 10,
    total_tokens: whole.usage!.total_tokens,
    prompt_tokens_details: { cached_tokens: Math.floor((P - 1) / 16) * 16 },
  })
  t.equal(chunks.filter((c) => c.choices[0]?.finish_reason).length, 1, 'one finish chunk')
  t.equal(chunks.filter((c) => c.choices[0] && !c.choices[0].delta.role).length, 10, 'one chunk per token')

  const raw = await fetch(chat.s.url + '/v1/chat/completions', {
    method: 'POST',
    headers: { ...chat.s.bearer(), 'content-type': 'application/json' },
    body: JSON.stringify({ messages, max_tokens: 3, seed: 5, stream: true, n: 2 }),
  })
  t.match(raw.headers.get('content-type'), /^text\/event-stream/)
  const text = await raw.text()
  t.ok(text.endsWith('data: [DONE]\n\n'))
  const events = text
    .split('\n\n')
    .filter(Boolean)
    .slice(0, -1)
    .map((e) => JSON.parse(e.slice(6)))
  t.same(
    events.slice(0, 2).map((e) => e.choices[0].index),
    [0, 1],
    'n = 2: a role chunk per choice first',
  )
  t.same(
    events
      .filter((e) => e.choices[0]?.finish_reason)
      .map((e) => e.choices[0].index)
      .sort(),
    [0, 1],
  )
  t.notOk(
    events.some((e) => 'usage' in e),
    'no usage without include_usage',
  )
})

t.test('logprobs: the sampled token and top alternatives, clamped, bounded at 20', async (t) => {
  const r = await create({ max_tokens: 6, seed: 9, logprobs: true, top_logprobs: 3, ignore_eos: true })
  const content = r.choices[0]!.logprobs!.content!
  t.equal(content.length, 6, 'one entry per token')
  for (const e of content) {
    t.ok(e.logprob <= 0 && e.logprob >= -9999)
    t.equal(e.top_logprobs.length, 3)
    t.ok(e.top_logprobs[0]!.logprob >= e.top_logprobs[1]!.logprob)
    t.ok(e.top_logprobs[0]!.logprob >= e.logprob, 'the best alternative is at least as likely as the sampled token')
  }
  t.equal(r.usage!.completion_tokens, content.length)
  const ids = await create({ max_tokens: 3, seed: 9, logprobs: true, return_tokens_as_token_ids: true })
  t.match(ids.choices[0]!.logprobs!.content![0]!.token, /^token_id:\d+$/)
  const tooMany = await create({ max_tokens: 3, logprobs: true, top_logprobs: 21 }).catch((e: unknown) => e)
  t.type(tooMany, OpenAI.BadRequestError)
  t.match((tooMany as Error).message, /greater than max allowed: 20/)
})

t.test('stop strings, stop token ids and their stop_reason', async (t) => {
  const base = await create({ max_tokens: 24, seed: 11, return_token_ids: true })
  const text = base.choices[0]!.message.content!
  const ids = base.choices[0]!.token_ids as number[]
  // A stop string from the middle of the reply (two characters, so it cannot be an earlier prefix's own match by chance).
  let at = 6
  while (at < text.length - 2 && (text.indexOf(text.slice(at, at + 2)) !== at || text.slice(at, at + 2).includes('\uFFFD'))) at++
  t.ok(at < text.length - 2, 'a stop string was found in the reply')
  const stop = text.slice(at, at + 2)
  const r = await create({ max_tokens: 24, seed: 11, stop: [stop] })
  t.equal(r.choices[0]!.message.content, text.slice(0, at), 'cut before the stop string')
  t.equal(r.choices[0]!.finish_reason, 'stop')
  t.equal(r.choices[0]!.stop_reason, stop)
  const kept = await create({ max_tokens: 24, seed: 11, stop: [stop], include_stop_str_in_output: true })
  t.equal(kept.choices[0]!.message.content, text.slice(0, at + 2), 'kept with include_stop_str_in_output')
  // Streaming holds back a possible stop-string prefix and never shows the stop string.
  const stream = chat.client.chat.completions.stream({ model: 'weft-tiny', messages, max_tokens: 24, seed: 11, stop: [stop] } as never)
  const final = await stream.finalChatCompletion()
  t.equal(final.choices[0]!.message.content, text.slice(0, at))
  const stopId = ids[4]!
  const byId = await create({ max_tokens: 24, seed: 11, stop_token_ids: [stopId], return_token_ids: true })
  t.equal(byId.choices[0]!.finish_reason, 'stop')
  t.equal(byId.choices[0]!.stop_reason, stopId)
  t.same(byId.choices[0]!.token_ids, ids.slice(0, ids.indexOf(stopId) + 1), 'the stop token is the last token id')
})

t.test('errors come out as the SDK typed errors', async (t) => {
  const e401 = await new OpenAI({ apiKey: 'nope', baseURL: chat.s.url + '/v1', maxRetries: 0 }).chat.completions
    .create({ model: 'weft-tiny', messages })
    .catch((e: unknown) => e)
  t.type(e401, OpenAI.AuthenticationError)
  const e404 = await create({ model: 'gpt-9' }).catch((e: unknown) => e)
  t.type(e404, OpenAI.NotFoundError)
  t.match((e404 as Error).message, /The model `gpt-9` does not exist/)
  const cases: [Extra, RegExp][] = [
    [{ max_tokens: 5000 }, /maximum context length is 4096 tokens/],
    [{ priority: 1 }, /Priority scheduling is not enabled/],
    [{ temperature: 0, n: 2 }, /n must be 1 when using greedy sampling/],
    [{ top_logprobs: 2 }, /`logprobs` must be set to true/],
    [{ add_generation_prompt: true, continue_final_message: true }, /Cannot set both/],
    [{ stream_options: { include_usage: true } }, /Stream options can only be defined when `stream=True`/],
    [{ logit_bias: { '99999': 5 } }, /out-of-vocab token ids. Vocabulary size/],
    [{ tool_choice: 'required' }, /When using `tool_choice`, `tools` must be set./],
    [{ structured_outputs: { regex: 'a', choice: ['a'] } }, /You can only use one kind of constraints for structured outputs/],
    [{ chat_template: '{% for %}' }, /chat template/i],
    [{ min_tokens: 20, max_tokens: 10 }, /min_tokens must be less than or equal to max_tokens/],
    [{ stream: true, prompt_logprobs: 1 }, /not available when `stream=True`/],
    [{ prompt_logprobs: 21 }, /greater than max allowed: 20/],
  ]
  for (const [body, msg] of cases) {
    const e = await create(body).catch((x: unknown) => x)
    t.type(e, OpenAI.BadRequestError, JSON.stringify(body))
    t.match((e as Error).message, msg)
  }
  // Streaming requests fail before the stream starts: an HTTP error, not an event.
  const es = await create({ stream: true, max_tokens: 5000 }).catch((x: unknown) => x)
  t.type(es, OpenAI.BadRequestError)
})

t.test('sampling controls change the draw as vLLM defines them', async (t) => {
  const allowed = [101, 102, 103]
  const r = await create({ max_tokens: 12, seed: 3, allowed_token_ids: allowed, return_token_ids: true })
  t.ok(
    (r.choices[0]!.token_ids as number[]).every((i) => allowed.includes(i)),
    'only allowed tokens',
  )
  const biased = await create({ max_tokens: 6, seed: 3, logit_bias: { '120': 100 }, return_token_ids: true })
  t.same(biased.choices[0]!.token_ids, [120, 120, 120, 120, 120, 120], 'a +100 bias wins every draw')
  const k1 = await create({ max_tokens: 8, seed: 3, top_k: 1, temperature: 1.5 })
  const greedy = await create({ max_tokens: 8, temperature: 0 })
  t.equal(k1.choices[0]!.message.content, greedy.choices[0]!.message.content, 'top_k 1 is greedy')
  const minTok = await create({ max_tokens: 10, min_tokens: 10, seed: 3, logit_bias: { '368': 100 }, return_token_ids: true })
  t.equal(minTok.usage!.completion_tokens, 10, 'end-of-sequence masked until min_tokens, then max_tokens ends it')
  const eos = await create({ max_tokens: 10, seed: 3, logit_bias: { '368': 100 } })
  t.equal(eos.choices[0]!.finish_reason, 'stop', 'the end-of-sequence token ends the reply')
  t.equal(eos.choices[0]!.message.content, '', 'and is not shown')
  t.equal(eos.usage!.completion_tokens, 1, 'but is counted')
  const ignored = await create({ max_tokens: 4, seed: 3, logit_bias: { '368': 100 }, ignore_eos: true })
  t.equal(ignored.usage!.completion_tokens, 4, 'ignore_eos')
})

t.test('/tokenize and /detokenize round-trip', async (t) => {
  const post = (p: string, body: unknown) =>
    fetch(chat.s.url + p, {
      method: 'POST',
      headers: { ...chat.s.bearer(), 'content-type': 'application/json' },
      body: JSON.stringify(body),
    }).then(async (r) => ({ status: r.status, json: (await r.json()) as any }))
  const tok = await post('/tokenize', { prompt: 'Hello, weft! 日本', return_token_strs: true })
  t.equal(tok.status, 200)
  t.equal(tok.json.count, tok.json.tokens.length)
  t.equal(tok.json.token_strs.length, tok.json.count)
  const back = await post('/detokenize', { tokens: tok.json.tokens })
  t.same(back.json, { prompt: 'Hello, weft! 日本' })
  t.same((await post('/detokenize', { tokens: [] })).json, { prompt: '' }, 'no tokens: no text')
  const bad = await post('/detokenize', { tokens: [999999] })
  t.equal(bad.status, 400)
  t.equal(bad.json.error.code, 400)
  const neither = await post('/tokenize', {})
  t.equal(neither.status, 400)
})

t.test('a client that goes away mid-stream cancels its sequence; the server keeps serving', async (t) => {
  const ac = new AbortController()
  const res = await fetch(chat.s.url + '/v1/chat/completions', {
    method: 'POST',
    headers: { ...chat.s.bearer(), 'content-type': 'application/json' },
    body: JSON.stringify({ messages, max_tokens: 3000, stream: true, ignore_eos: true }),
    signal: ac.signal,
  })
  const reader = res.body!.getReader()
  await reader.read()
  ac.abort()
  const r = await create({ max_tokens: 4, seed: 1, ignore_eos: true })
  t.equal(r.usage!.completion_tokens, 4)
  let state: any
  for (let i = 0; i < 50; i++) {
    state = (await fetch(chat.s.url + '/admin/stats', { headers: chat.s.bearer() }).then((x) => x.json() as Promise<any>)).inference[
      'weft-tiny'
    ]
    if (state.running_requests === 0) break
    await new Promise((r) => setTimeout(r, 100))
  }
  t.match(
    state,
    { running_requests: 0, waiting_requests: 0, kv_positions_used: 0 },
    'the abandoned sequence was dropped and its cache freed',
  )
})

t.test('a non-streamed completion whose client goes away is recorded as failed, not as a reply with missing choices', async (t) => {
  const project = 'acme/chat-gone-' + Math.random().toString(36).slice(2, 8)
  const ac = new AbortController()
  const gone = fetch(chat.s.url + '/v1/chat/completions', {
    method: 'POST',
    headers: { ...chat.s.bearer(), 'content-type': 'application/json', 'openai-project': project },
    body: JSON.stringify({ messages, max_tokens: 3000, n: 2, stream: false, ignore_eos: true }),
    signal: ac.signal,
  }).catch((e: Error) => e)
  await new Promise((r) => setTimeout(r, 300))
  ac.abort()
  t.type(await gone, Error, 'the client gave up before the reply')
  let calls: any[] = []
  for (let i = 0; i < 100 && calls.length === 0; i++) {
    await new Promise((r) => setTimeout(r, 100))
    const q = await fetch(chat.s.url + '/calls/stream_query', {
      method: 'POST',
      headers: { ...chat.s.bearer(), 'content-type': 'application/json' },
      body: JSON.stringify({ project_id: project }),
    })
    const text = (await q.text()).trim()
    calls = text ? text.split('\n').map((l) => JSON.parse(l)) : []
  }
  t.equal(calls.length, 1, 'the abandoned completion was recorded')
  t.match(calls[0].exception, /disconnected/i, 'as failed')
})

t.test('each completion is recorded as a call in the caller project, and statistics see it', async (t) => {
  const headers = { ...chat.s.bearer(), 'content-type': 'application/json' }
  const project = 'acme/chat-' + Math.random().toString(36).slice(2, 8)
  const scoped = new OpenAI({
    apiKey: chat.s.key,
    baseURL: chat.s.url + '/v1',
    maxRetries: 0,
    defaultHeaders: { 'OpenAI-Project': project },
  })
  const r = await scoped.chat.completions.create({ model: 'weft-tiny', messages, max_tokens: 7, seed: 4, ignore_eos: true } as never)
  const stream = scoped.chat.completions.stream({ model: 'weft-tiny', messages, max_tokens: 5, seed: 4, ignore_eos: true } as never)
  await stream.finalChatCompletion()
  const q = await fetch(chat.s.url + '/calls/stream_query', {
    method: 'POST',
    headers,
    body: JSON.stringify({ project_id: project, sort_by: [{ field: 'started_at', direction: 'asc' }] }),
  })
  const calls = (await q.text())
    .trim()
    .split('\n')
    .map((l) => JSON.parse(l))
  t.equal(calls.length, 2, 'both completions recorded')
  const [first, second] = calls
  t.equal(first.op_name, 'openai.chat.completions.create')
  t.same(first.inputs.messages, messages, 'the request as inputs')
  t.equal(first.output.choices[0].message.content, r.choices[0]!.message.content, 'the choices as output')
  t.same(first.summary.usage['weft-tiny'], {
    requests: 1,
    prompt_tokens: r.usage!.prompt_tokens,
    completion_tokens: 7,
    total_tokens: r.usage!.total_tokens,
  })
  for (const k of ['queued_ms', 'prefill_ms', 'time_to_first_token_ms', 'inter_token_ms', 'total_ms'])
    t.type(first.attributes.weft.timings[k], 'number', k)
  t.equal(second.summary.usage['weft-tiny'].completion_tokens, 5, 'a streamed completion too')
  t.equal(second.exception ?? null, null)
  const stats = await fetch(chat.s.url + '/calls/stats', {
    method: 'POST',
    headers,
    body: JSON.stringify({
      project_id: project,
      start: new Date(Date.now() - 3_600_000).toISOString(),
      usage_metrics: [{ metric: 'output_tokens', aggregations: ['sum'] }],
      call_metrics: [{ metric: 'call_count', aggregations: ['sum'] }],
    }),
  }).then((x) => x.json() as Promise<any>)
  t.equal(
    stats.usage_buckets.reduce((a: number, b: any) => a + b.sum_output_tokens, 0),
    12,
    'statistics over the service own traffic',
  )
  const forbidden = await fetch(chat.s.url + '/v1/chat/completions', {
    method: 'POST',
    headers: { ...headers, 'openai-project': 'not a project' },
    body: JSON.stringify({ messages, max_tokens: 1 }),
  })
  t.equal(forbidden.status, 400)
})

t.test('echo, continuous usage stats, truncation, documents and continue_final_message', async (t) => {
  const convo = [
    { role: 'user' as const, content: 'Finish this:' },
    { role: 'assistant' as const, content: 'Once upon' },
  ]
  const echoed = await create({
    messages: convo,
    max_tokens: 4,
    seed: 2,
    echo: true,
    add_generation_prompt: false,
    continue_final_message: true,
  })
  t.ok(echoed.choices[0]!.message.content!.startsWith('Once upon'), 'the open final message is echoed before the continuation')
  t.equal(echoed.choices[0]!.message.role, 'assistant')
  const tok = (body: unknown) =>
    fetch(chat.s.url + '/tokenize', {
      method: 'POST',
      headers: { ...chat.s.bearer(), 'content-type': 'application/json' },
      body: JSON.stringify(body),
    }).then((x) => x.json() as Promise<any>)
  const open = await tok({ messages: convo, add_generation_prompt: false, continue_final_message: true })
  const closed = await tok({ messages: convo, add_generation_prompt: false })
  t.ok(open.count < closed.count, 'continue_final_message leaves the end-of-turn out')
  t.equal(echoed.usage!.prompt_tokens, open.count)

  const raw = await fetch(chat.s.url + '/v1/chat/completions', {
    method: 'POST',
    headers: { ...chat.s.bearer(), 'content-type': 'application/json' },
    body: JSON.stringify({
      messages,
      max_tokens: 4,
      seed: 2,
      ignore_eos: true,
      stream: true,
      stream_options: { include_usage: true, continuous_usage_stats: true },
    }),
  })
  const events = (await raw.text())
    .split('\n\n')
    .filter((e) => e.startsWith('data: {'))
    .map((e) => JSON.parse(e.slice(6)))
  t.ok(
    events.every((e) => e.usage),
    'usage in every chunk',
  )
  t.same(
    events.map((e) => e.usage.completion_tokens),
    [0, 1, 2, 3, 4, 4],
    'running completion tokens, then the final usage',
  )

  const truncated = await create({ max_tokens: 2, seed: 2, truncate_prompt_tokens: 5 })
  t.equal(truncated.usage!.prompt_tokens, 5, 'only the last 5 prompt tokens kept')
  const withDocs = await tok({ messages, chat_template_kwargs: {} })
  const docs = await create({ max_tokens: 1, documents: [{ title: 'Looms', text: 'A loom weaves cloth.' }] })
  t.ok(docs.usage!.prompt_tokens > withDocs.count, 'documents reach the template')
})

// That waiting requests start in priority order is checked in chat-scheduling.test.ts; here, that the
// bound holds with the priority policy on.
t.test('bounded queue: past --max-waiting-requests a request is 429, also under priority scheduling', async (t) => {
  const small = await startServer({ args: ['--max-num-seqs', '1', '--max-waiting-requests', '1', '--scheduling-policy', 'priority'] })
  t.teardown(() => small.stop())
  const c = new OpenAI({ apiKey: small.key, baseURL: small.url + '/v1', maxRetries: 0 })
  const long = { model: 'weft-tiny', messages, max_tokens: 400, ignore_eos: true, seed: 1 }
  const results = await Promise.allSettled(
    Array.from({ length: 5 }, (_, i) => c.chat.completions.create({ ...long, priority: i } as never)),
  )
  const ok = results.filter((r) => r.status === 'fulfilled').length
  const limited = results.filter((r) => r.status === 'rejected' && (r.reason as InstanceType<typeof OpenAI.APIError>).status === 429)
  // One runs and one may wait (whether the first has started when the rest arrive is a matter of timing).
  t.ok(ok >= 1 && ok <= 2, `${ok} completed`)
  t.ok(limited.length >= 1, `${limited.length} refused with 429`)
  t.equal(ok + limited.length, 5, 'every request answered: completed or 429, never a hang')
  t.match((limited[0] as PromiseRejectedResult).reason.message, /at capacity/)
})

t.test('request ids, bad words, special tokens spacing, /version and engine state', async (t) => {
  const named = await create({ max_tokens: 2, seed: 1, request_id: 'my-req-1' })
  t.equal(named.id, 'chatcmpl-my-req-1')
  const greedy = await create({ max_tokens: 12, temperature: 0, ignore_eos: true, return_token_ids: true })
  const post = (p: string, body: unknown) =>
    fetch(chat.s.url + p, {
      method: 'POST',
      headers: { ...chat.s.bearer(), 'content-type': 'application/json' },
      body: JSON.stringify(body),
    }).then((x) => x.json() as Promise<any>)
  // A generated token whose text tokenizes back to itself (a lone byte of a longer character would not).
  let banned = -1
  let word = { prompt: '' }
  for (const id of greedy.choices[0]!.token_ids as number[]) {
    word = await post('/detokenize', { tokens: [id] })
    if ((await post('/tokenize', { prompt: word.prompt.trimStart(), add_special_tokens: false })).tokens.join() === String(id)) {
      banned = id
      break
    }
  }
  t.ok(banned >= 0, 'a word to ban')
  const clean = await create({ max_tokens: 12, temperature: 0, ignore_eos: true, return_token_ids: true, bad_words: [word.prompt] })
  t.notOk((clean.choices[0]!.token_ids as number[]).includes(banned), `token ${banned} (${JSON.stringify(word.prompt)}) never generated`)
  const special = { max_tokens: 6, seed: 8, min_tokens: 2, logit_bias: { '368': 100 }, skip_special_tokens: false, return_token_ids: true }
  const spaced = await create(special)
  const tight = await create({ ...special, spaces_between_special_tokens: false })
  t.ok(tight.choices[0]!.message.content!.endsWith('<|im_end|>'), 'the end-of-sequence token shown')
  t.equal(
    spaced.choices[0]!.message.content,
    tight.choices[0]!.message.content!.replace('<|im_end|>', ' <|im_end|>'),
    'a space before the special token by default',
  )
  const version = await fetch(chat.s.url + '/version').then((x) => x.json() as Promise<any>)
  t.match(version.inference, [{ model: 'weft-tiny', architecture: 'LlamaForCausalLM', backend: /^(tensorflow|wasm-simd|wasm|cpu)$/ }])
})

t.test('replicas: requests spread over workers, each reply as one worker gives it', async (t) => {
  const two = await startServer({ args: ['--model-replicas', '2'] })
  t.teardown(() => two.stop())
  const c = new OpenAI({ apiKey: two.key, baseURL: two.url + '/v1', maxRetries: 0 })
  const seeds = [21, 22, 23, 24]
  const replies = await Promise.all(
    seeds.map((seed) => c.chat.completions.create({ model: 'weft-tiny', messages, max_tokens: 12, seed, ignore_eos: true } as never)),
  )
  const alone = await Promise.all(seeds.map((seed) => create({ max_tokens: 12, seed, ignore_eos: true })))
  t.same(
    replies.map((r) => r.choices[0]!.message.content),
    alone.map((r) => r.choices[0]!.message.content),
    'the same replies as one worker gives',
  )
  const state = (await fetch(two.url + '/admin/stats', { headers: two.bearer() }).then((x) => x.json() as Promise<any>)).inference[
    'weft-tiny'
  ]
  t.equal(state.replicas, 2)
})
