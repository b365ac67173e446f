import t from 'tap'
import type OpenAI from 'openai'
import { Ajv } from 'ajv'
import { chatServer } from './helpers/openai.js'

// Structural tags end to end on the tiny model (random weights): whatever it would say, the reply has the
// shape the tag describes. Expected shapes come from the request (its begin/end strings, ajv on its schema).
const chat = chatServer()

const ARGS = {
  type: 'object',
  properties: { city: { type: 'string', maxLength: 6 }, days: { type: 'integer', minimum: 1, maximum: 9 } },
  required: ['city', 'days'],
  additionalProperties: false,
}
const validArgs = new Ajv({ strict: false }).compile(ARGS)
type Extra = Record<string, unknown>
type Tap = Pick<typeof t, 'ok'>

async function reply(body: Extra): Promise<{ text: string; finish: string | null }> {
  const r = (await chat.client.chat.completions.create({
    model: 'weft-tiny',
    messages: [{ role: 'user', content: 'What is the weather?' }],
    max_tokens: 300,
    ...body,
  } as never)) as unknown as OpenAI.ChatCompletion
  return { text: r.choices[0]!.message.content ?? '', finish: r.choices[0]!.finish_reason }
}

async function streamed(body: Extra): Promise<string> {
  const stream = (await chat.client.chat.completions.create({
    model: 'weft-tiny',
    messages: [{ role: 'user', content: 'What is the weather?' }],
    max_tokens: 300,
    ...body,
    stream: true,
  } as never)) as unknown as AsyncIterable<OpenAI.ChatCompletionChunk>
  let text = ''
  for await (const c of stream) text += c.choices[0]?.delta.content ?? ''
  return text
}

/** The JSON between `begin` and `end` in `text`, which must be exactly begin + JSON + end. */
function between(t: Tap, text: string, begin: string, end: string): unknown {
  t.ok(text.startsWith(begin), `starts with ${begin}: ${JSON.stringify(text)}`)
  t.ok(text.endsWith(end), `ends with ${end}: ${JSON.stringify(text)}`)
  return JSON.parse(text.slice(begin.length, text.length - end.length))
}

t.test('a tag as the whole reply: begin, JSON by the schema, end', async (t) => {
  const format = { type: 'tag', begin: '<get_weather>', content: { type: 'json_schema', json_schema: ARGS }, end: '</get_weather>' }
  for (const seed of [1, 2, 3]) {
    const body = { seed, response_format: { type: 'structural_tag', format } }
    const { text, finish } = await reply(body)
    t.equal(finish, 'stop', `seed ${seed}: the grammar ended the reply`)
    const args = between(t, text, '<get_weather>', '</get_weather>')
    t.ok(validArgs(args), `seed ${seed}: arguments validate: ${JSON.stringify(validArgs.errors)}`)
    t.equal(await streamed(body), text, `seed ${seed}: the stream says the same`)
  }
})

t.test('triggered tags: free text, then at least one tag whose body follows its schema', async (t) => {
  const format = {
    type: 'triggered_tags',
    triggers: ['<tool='],
    tags: [
      { type: 'tag', begin: '<tool=weather>', content: { type: 'json_schema', json_schema: ARGS }, end: '</tool>' },
      {
        type: 'tag',
        begin: '<tool=time>',
        content: { type: 'json_schema', json_schema: { type: 'object', properties: {} } },
        end: '</tool>',
      },
    ],
    at_least_one: true,
    stop_after_first: true,
  }
  for (const seed of [4, 5, 6]) {
    const { text, finish } = await reply({
      seed,
      structured_outputs: { structural_tag: JSON.stringify({ type: 'structural_tag', format }) },
    })
    t.equal(finish, 'stop', `seed ${seed}: stopped after the first tag`)
    const m = /^<tool=(weather|time)>([\s\S]*)<\/tool>$/.exec(text)
    t.ok(m, `seed ${seed}: one tag and nothing after it: ${JSON.stringify(text)}`)
    if (!m) continue
    const value = JSON.parse(m[2]!)
    if (m[1] === 'weather') t.ok(validArgs(value), `seed ${seed}: weather arguments validate`)
    else t.same(typeof value, 'object', `seed ${seed}: time arguments are an object`)
  }
})

t.test('the older form (structures + triggers): every triggered part follows its schema', async (t) => {
  const tag = {
    type: 'structural_tag',
    structures: [{ begin: '<f>', schema: ARGS, end: '</f>' }],
    triggers: ['<f>'],
  }
  // The model's free text is pushed towards the trigger's tokens (found through /tokenize), so tags open.
  const { s } = chat
  const tok = await fetch(s.url + '/tokenize', {
    method: 'POST',
    headers: { ...s.bearer(), 'content-type': 'application/json' },
    body: JSON.stringify({ model: 'weft-tiny', prompt: '<f>', add_special_tokens: false }),
  }).then((r) => r.json() as Promise<{ tokens: number[] }>)
  const logit_bias = Object.fromEntries(tok.tokens.map((id) => [String(id), 100]))
  let parts = 0
  for (const seed of [7, 8, 9]) {
    const { text } = await reply({ seed, max_tokens: 160, response_format: tag, logit_bias })
    // Wherever a tag opens, a complete one follows (or the length ran out inside it).
    for (const m of text.matchAll(/<f>([\s\S]*?)(<\/f>|$)/g)) {
      if (m[2] !== '</f>') continue
      parts++
      t.ok(validArgs(JSON.parse(m[1]!)), `seed ${seed}: a triggered part validates: ${m[1]}`)
    }
  }
  t.ok(parts >= 2, `${parts} triggered parts were checked`)
})

t.test('a bad structural tag is a 400 in the OpenAI shape', async (t) => {
  const bad = [
    { response_format: { type: 'structural_tag', format: { type: 'tag', begin: '<a>' } } },
    { structured_outputs: { structural_tag: '{not json' } },
  ]
  for (const body of bad) {
    const err = await reply(body).then(
      () => null,
      (e: unknown) => e as { status?: number; message?: string },
    )
    t.equal(err?.status, 400, `400 for ${JSON.stringify(body)}: ${err?.message}`)
    t.match(err?.message, /^400 Invalid structural tag specification\.(\s+\D.*)?$/, "the library's words, no pointer")
  }
})
