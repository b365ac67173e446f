import t from 'tap'
import OpenAI from 'openai'
import { chatServer } from './helpers/openai.js'

// Details where clients notice a difference from vLLM: stream_options truthiness, the reasoning keys,
// prompt_tokens_details, and integer bounds checked on the number the client wrote.
const chat = chatServer()

const messages = [{ role: 'user', content: 'Tell me about the weather.' }]

/** POSTs raw JSON text (so numbers go out exactly as written) with the admin key. */
const send = async (path: string, text: string) => {
  const r = await fetch(chat.s.url + path, {
    method: 'POST',
    headers: { ...chat.s.bearer(), 'content-type': 'application/json' },
    body: text,
  })
  const body = await r.text()
  return { status: r.status, text: body, json: body.startsWith('{') ? JSON.parse(body) : null }
}
const chatBody = (extra: string) => `{"messages": ${JSON.stringify(messages)}, "max_tokens": 2, ${extra}}`

t.test('stream_options: {} counts as absent; a non-empty one needs stream', async (t) => {
  const empty = await send('/v1/chat/completions', chatBody('"stream_options": {}'))
  t.equal(empty.status, 200, 'an empty object is falsy, as in vLLM')
  const emptyFalse = await send('/v1/completions', '{"prompt": "hi", "max_tokens": 2, "stream": false, "stream_options": {}}')
  t.equal(emptyFalse.status, 200, 'on /v1/completions too')
  const set = await send('/v1/chat/completions', chatBody('"stream_options": {"include_usage": true}'))
  t.equal(set.status, 400)
  t.equal(set.json.error.message, 'Stream options can only be defined when `stream=True`.')
  const nullMember = await send('/v1/chat/completions', chatBody('"stream_options": {"include_usage": null}'))
  t.equal(nullMember.status, 400, 'a key with a null value still makes the object truthy')
  // Streamed with {}: include_usage defaults to false (current vLLM), so no usage chunk.
  const streamed = await send('/v1/chat/completions', chatBody('"stream": true, "stream_options": {}'))
  t.equal(streamed.status, 200)
  const events = streamed.text.split('\n\n').filter((l) => l.startsWith('data: {'))
  t.ok(events.length > 0)
  t.notOk(
    events.some((e) => 'usage' in JSON.parse(e.slice(6))),
    'no usage anywhere',
  )
})

t.test('every non-streamed choice has reasoning and reasoning_content, null without a reasoning parser', async (t) => {
  const r = await send('/v1/chat/completions', chatBody('"n": 3, "temperature": 1, "seed": 5'))
  t.equal(r.json.choices.length, 3)
  for (const c of r.json.choices) {
    t.ok('reasoning' in c.message, `choice ${c.index}: reasoning key present`)
    t.equal(c.message.reasoning, null)
    t.ok('reasoning_content' in c.message)
    t.equal(c.message.reasoning_content, null)
  }
})

t.test('usage.prompt_tokens_details is always there: cached tokens, 0 without a hit', async (t) => {
  const unique = `${Math.random().toString(36).slice(2)} ` + 'the quick brown fox jumps over the lazy dog '.repeat(6)
  const body = { model: 'weft-tiny', messages: [{ role: 'user' as const, content: unique }], max_tokens: 2, temperature: 0 }
  const first = (await chat.client.chat.completions.create(body)) as OpenAI.ChatCompletion
  t.same(first.usage!.prompt_tokens_details, { cached_tokens: 0 }, 'a prompt never seen: nothing cached')
  const again = (await chat.client.chat.completions.create(body)) as OpenAI.ChatCompletion
  const cached = again.usage!.prompt_tokens_details!.cached_tokens!
  t.ok(Number.isInteger(cached) && cached <= again.usage!.prompt_tokens, 'an integer, at most the prompt')
  // The engine keeps a prefix cache: the same long prompt again is served from it, and the count says so.
  t.ok(cached > 0, `the repeated prompt's hits are reported (${cached} of ${again.usage!.prompt_tokens})`)
  const stream = await chat.client.chat.completions.create({ ...body, stream: true, stream_options: { include_usage: true } })
  let usage: OpenAI.CompletionUsage | undefined
  for await (const c of stream) if (c.usage) usage = c.usage
  t.type(usage?.prompt_tokens_details?.cached_tokens, 'number', 'in the streamed usage chunk too')
  const legacy = (await chat.client.completions.create({ model: 'weft-tiny', prompt: unique + 'x', max_tokens: 2 })) as OpenAI.Completion
  t.type(legacy.usage!.prompt_tokens_details?.cached_tokens, 'number', 'and in legacy completions')
})

t.test('seed is checked on its exact value: int64 bounds, not their doubles', async (t) => {
  for (const path of ['/v1/chat/completions', '/v1/completions']) {
    const body = (seed: string) =>
      path === '/v1/completions' ? `{"prompt": "hi", "max_tokens": 2, "seed": ${seed}}` : chatBody(`"seed": ${seed}`)
    const over = await send(path, body('9223372036854775808'))
    t.equal(over.status, 400, `${path}: 2^63 is refused`)
    t.equal(over.json.error.param, 'seed')
    t.match(over.json.error.message, /less than or equal to 9223372036854775807/)
    const under = await send(path, body('-9223372036854775809'))
    t.equal(under.status, 400, `${path}: -2^63-1 is refused`)
    t.match(under.json.error.message, /greater than or equal to -9223372036854775808/)
    t.equal((await send(path, body('9223372036854775807'))).status, 200, `${path}: 2^63-1 is accepted`)
    t.equal((await send(path, body('-9223372036854775808'))).status, 200, `${path}: -2^63 is accepted`)
    t.equal((await send(path, body('123456789012345678'))).status, 200, `${path}: a long seed within range`)
    t.equal((await send(path, body('1e30'))).status, 400, `${path}: far out as a double too`)
  }
  // Only the top-level field counts: long digits in text or in nested objects are no seed.
  const nested = await send(
    '/v1/chat/completions',
    `{"messages": [{"role": "user", "content": "99999999999999999999"}], "max_tokens": 2, "chat_template_kwargs": {"seed": 99999999999999999999}, "seed": 3}`,
  )
  t.equal(nested.status, 200)
  const lastWins = await send('/v1/chat/completions', chatBody('"seed": 1, "seed": 9223372036854775808'))
  t.equal(lastWins.status, 400, 'a repeated key: the last one counts, as JSON.parse takes it')
  // The SDK path: a seed past int64 from a client is a BadRequestError.
  const err = await chat.client.chat.completions
    .create({ model: 'weft-tiny', messages: [{ role: 'user', content: 'x' }], seed: 2 ** 63 })
    .catch((e: unknown) => e)
  t.type(err, OpenAI.BadRequestError)
})
