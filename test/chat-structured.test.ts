import t from 'tap'
import OpenAI from 'openai'
import { Ajv } from 'ajv'
import { chatServer } from './helpers/openai.js'

// Structured outputs on the built-in tiny model, whose weights are random: whatever it would say,
// the grammar mask must make the reply match. Expected values come from the request itself (ajv on
// the request's schema, the request's regex, the request's choices), never from our code.
const chat = chatServer()

const messages = [{ role: 'user' as const, content: 'Describe a pet as JSON.' }]
type Extra = Record<string, unknown>
const create = (body: Extra) =>
  chat.client.chat.completions.create({ model: 'weft-tiny', messages, max_tokens: 400, ...body } as never) as unknown as Promise<
    OpenAI.ChatCompletion & Extra
  >

/** The streamed text of a request, and its finish reason. */
async function streamed(body: Extra): Promise<{ text: string; finish: string | null }> {
  const stream = (await chat.client.chat.completions.create({
    model: 'weft-tiny',
    messages,
    max_tokens: 400,
    ...body,
    stream: true,
  } as never)) as unknown as AsyncIterable<OpenAI.ChatCompletionChunk>
  let text = ''
  let finish: string | null = null
  for await (const c of stream) {
    text += c.choices[0]?.delta.content ?? ''
    finish = c.choices[0]?.finish_reason ?? finish
  }
  return { text, finish }
}

const PET = {
  type: 'object',
  properties: {
    name: { type: 'string', maxLength: 8 },
    kind: { enum: ['cat', 'dog', 'bird'] },
    age: { type: 'integer', minimum: 0, maximum: 30 },
    owner: {
      type: 'object',
      properties: { city: { type: 'string', maxLength: 6 }, verified: { type: 'boolean' } },
      required: ['city', 'verified'],
      additionalProperties: false,
    },
    tags: { type: 'array', items: { type: 'string', maxLength: 4 }, minItems: 1, maxItems: 3 },
  },
  required: ['name', 'kind', 'age', 'owner', 'tags'],
  additionalProperties: false,
}
const validPet = new Ajv({ strict: false }).compile(PET)

t.test('JSON schema: parses and validates for several seeds, streamed text equal', async (t) => {
  for (const seed of [1, 2, 3, 4, 5]) {
    const body = { seed, structured_outputs: { json: PET, disable_any_whitespace: seed % 2 === 0 } }
    const r = await create(body)
    const text = r.choices[0]!.message.content!
    t.equal(r.choices[0]!.finish_reason, 'stop', `seed ${seed}: the grammar ended the reply`)
    let value: unknown
    t.doesNotThrow(() => (value = JSON.parse(text)), `seed ${seed}: parses: ${text}`)
    t.ok(validPet(value), `seed ${seed}: validates: ${JSON.stringify(validPet.errors)}`)
    const st = await streamed(body)
    t.equal(st.text, text, `seed ${seed}: the stream says the same`)
    t.equal(st.finish, 'stop')
  }
  // The same schema as JSON text, and a random (unseeded) request.
  const r = await create({ structured_outputs: { json: JSON.stringify(PET) } })
  t.ok(validPet(JSON.parse(r.choices[0]!.message.content!)), 'schema as text')
})

t.test('json_object, response_format json_object and json_schema', async (t) => {
  for (const body of [{ structured_outputs: { json_object: true } }, { response_format: { type: 'json_object' } }]) {
    const r = await create({ ...body, seed: 7 })
    const v = JSON.parse(r.choices[0]!.message.content!)
    t.ok(v !== null && typeof v === 'object' && !Array.isArray(v), `a JSON object: ${JSON.stringify(body)}`)
    t.equal(r.choices[0]!.finish_reason, 'stop')
  }
  const schema = {
    type: 'object',
    properties: { ok: { type: 'boolean' }, n: { type: 'integer', minimum: 3, maximum: 5 } },
    required: ['ok', 'n'],
  }
  const r = await create({ seed: 8, response_format: { type: 'json_schema', json_schema: { name: 'x', schema } } })
  t.ok(new Ajv().compile(schema)(JSON.parse(r.choices[0]!.message.content!)), 'response_format json_schema')
  // response_format overrides structured_outputs' json member.
  const o = await create({
    seed: 8,
    structured_outputs: { json: PET },
    response_format: { type: 'json_schema', json_schema: { name: 'x', schema } },
  })
  t.equal(o.choices[0]!.message.content, r.choices[0]!.message.content, 'response_format wins over structured_outputs.json')
})

t.test('regex matched in full, choice, grammar', async (t) => {
  const pattern = '[a-z]{2,5}-[0-9]{3}( ok)?'
  for (const seed of [1, 2, 3]) {
    const r = await create({ seed, structured_outputs: { regex: pattern } })
    t.match(r.choices[0]!.message.content!, new RegExp(`^(?:${pattern})$`), `seed ${seed}: full match`)
    t.equal(r.choices[0]!.finish_reason, 'stop')
  }
  const choices = ['yes', 'no', 'not sure', '{"quoted": "a\\"b"}']
  const seen = new Set<string>()
  for (const seed of [1, 2, 3, 4, 5, 6]) {
    const r = await create({ seed, structured_outputs: { choice: choices } })
    t.ok(choices.includes(r.choices[0]!.message.content!), `seed ${seed}: one of the choices: ${r.choices[0]!.message.content}`)
    seen.add(r.choices[0]!.message.content!)
  }
  t.comment(`choices seen: ${[...seen].join(' | ')}`)
  const grammar = 'root ::= "(" num ("," num)* ")"\nnum ::= [1-9] [0-9]?'
  for (const seed of [1, 2]) {
    const r = await create({ seed, structured_outputs: { grammar } })
    t.match(r.choices[0]!.message.content!, /^\([1-9][0-9]?(,[1-9][0-9]?)*\)$/, `seed ${seed}: the grammar's language`)
  }
  const st = await streamed({ seed: 3, structured_outputs: { regex: pattern } })
  t.equal(st.text, (await create({ seed: 3, structured_outputs: { regex: pattern } })).choices[0]!.message.content, 'regex streamed')
})

t.test('max_tokens cuts a constrained reply: finish_reason length', async (t) => {
  const r = await create({ seed: 1, max_tokens: 3, structured_outputs: { json: PET } })
  t.equal(r.choices[0]!.finish_reason, 'length')
  t.equal(r.usage!.completion_tokens, 3)
  t.ok(r.choices[0]!.message.content!.startsWith('{'), 'a prefix of the language')
})

t.test('legacy guided_* aliases', async (t) => {
  const j = await create({ seed: 2, guided_json: PET })
  t.ok(validPet(JSON.parse(j.choices[0]!.message.content!)), 'guided_json')
  const re = await create({ seed: 2, guided_regex: '[0-9]{4}' })
  t.match(re.choices[0]!.message.content!, /^[0-9]{4}$/, 'guided_regex')
  const c = await create({ seed: 2, guided_choice: ['left', 'right'] })
  t.ok(['left', 'right'].includes(c.choices[0]!.message.content!), 'guided_choice')
  const g = await create({ seed: 2, guided_grammar: 'root ::= "x" [0-9] [0-9]' })
  t.match(g.choices[0]!.message.content!, /^x[0-9]{2}$/, 'guided_grammar')
  const w = await create({ seed: 2, guided_regex: '[0-9]{4}', guided_whitespace_pattern: ' *' })
  t.equal(w.choices[0]!.message.content, re.choices[0]!.message.content, 'guided_whitespace_pattern accepted')
})

t.test('n > 1: every choice matches', async (t) => {
  const r = await create({ seed: 3, n: 3, structured_outputs: { json: PET } })
  t.equal(r.choices.length, 3)
  for (const c of r.choices) t.ok(validPet(JSON.parse(c.message.content!)), `choice ${c.index}`)
})

t.test('400s before anything is generated, with vLLM messages', async (t) => {
  const cases: [Extra, RegExp][] = [
    [
      { structured_outputs: { json: PET, regex: 'a' } },
      /You can only use one kind of constraints for structured outputs \('json', 'regex' or 'choice'\)\./,
    ],
    [
      { structured_outputs: { grammar: 'root ::= "a"', regex: 'a' } },
      /You can only use one kind of structured outputs constraint but multiple are specified/,
    ],
    [{ structured_outputs: { regex: 'a' }, response_format: { type: 'json_object' } }, /multiple are specified/],
    [{ structured_outputs: {} }, /You must use one kind of structured outputs constraint but none are specified/],
    [{ structured_outputs: { grammar: '  ' } }, /structured_outputs\.grammar cannot be an empty string/],
    [{ structured_outputs: { json: '' } }, /structured_outputs\.json cannot be an empty string/],
    [{ structured_outputs: { json: '{not json' } }, /Invalid JSON grammar specification\./],
    [{ structured_outputs: { json: { type: 5 } } }, /Invalid JSON grammar specification\./],
    [{ structured_outputs: { regex: 'a(b' } }, /Failed to transform regex into a grammar: .*parenthesis/],
    [{ structured_outputs: { grammar: 'root ::= undefined_rule' } }, /Invalid grammar specification\..*undefined_rule/],
    [{ guided_json: PET, guided_choice: ['a'] }, /You can only use one kind of constraints/],
    [{ guided_regex: 'a', guided_decoding_backend: 'outlines' }, /backend selection is not supported/],
    [{ response_format: { type: 'json_schema' } }, /the 'json_schema' field must be provided/],
    [
      {
        structured_outputs: { regex: 'a' },
        tools: [{ type: 'function', function: { name: 'f', parameters: { type: 'object' } } }],
        tool_choice: { type: 'function', function: { name: 'f' } },
      },
      /You can only either use constraints for structured outputs or tools, not both\./,
    ],
  ]
  for (const [body, msg] of cases) {
    for (const stream of [false, true]) {
      const e = await create({ ...body, stream }).catch((x: unknown) => x)
      t.type(e, OpenAI.BadRequestError, `${JSON.stringify(body)} stream=${stream}`)
      t.match((e as Error).message, msg)
    }
  }
  // Failed compiles do not wear the engine out: many in a row, then a good request still works.
  for (let i = 0; i < 12; i++) await create({ structured_outputs: { regex: `(x${i}` } }).catch(() => null)
  const r = await create({ seed: 1, structured_outputs: { regex: '[0-9]{3}' } })
  t.match(r.choices[0]!.message.content!, /^[0-9]{3}$/, 'still constrained after failed compiles')
})

t.test('a cached grammar is faster than the first compile', async (t) => {
  // A schema no other test uses, large enough that compiling it takes measurable time.
  const props: Record<string, unknown> = {}
  for (let i = 0; i < 40; i++)
    props[`field_${i}`] = { type: i % 2 ? 'integer' : 'string', ...(i % 2 ? { minimum: 0, maximum: i * 7 } : { maxLength: 12 }) }
  const schema = { type: 'object', properties: props, required: Object.keys(props).slice(0, 5) }
  const time = async () => {
    const t0 = performance.now()
    await create({ seed: 1, max_tokens: 1, structured_outputs: { json: schema } })
    return performance.now() - t0
  }
  const cold = await time()
  const warm = Math.min(await time(), await time())
  t.comment(`cold ${cold.toFixed(1)} ms, cached ${warm.toFixed(1)} ms`)
  t.ok(warm < cold, 'cache hit faster than the compile')
})

t.test('recorded as a call, the text as output', async (t) => {
  const project = 'acme/structured-' + Math.random().toString(36).slice(2, 8)
  const scoped = new OpenAI({
    apiKey: chat.s.key,
    baseURL: chat.s.url + '/v1',
    maxRetries: 0,
    defaultHeaders: { 'OpenAI-Project': project },
  })
  const body = { model: 'weft-tiny', messages, max_tokens: 50, seed: 4, structured_outputs: { choice: ['alpha', 'beta'] } }
  const r = await scoped.chat.completions.create(body as never)
  let calls: { inputs: Extra; output: { choices: { message: { content: string } }[] } }[] = []
  for (let i = 0; i < 50 && !calls.length; i++) {
    const q = await fetch(chat.s.url + '/calls/stream_query', {
      method: 'POST',
      headers: { ...chat.s.bearer(), 'content-type': 'application/json' },
      body: JSON.stringify({ project_id: project }),
    })
    const text = (await q.text()).trim()
    calls = text ? text.split('\n').map((l) => JSON.parse(l)) : []
    if (!calls.length) await new Promise((res) => setTimeout(res, 100))
  }
  t.equal(calls.length, 1, 'the call is there')
  t.equal(calls[0]?.output.choices[0]?.message.content, r.choices[0]!.message.content, 'the constrained text as output')
  t.same(calls[0]?.inputs.structured_outputs, body.structured_outputs, 'the constraint among the inputs')
})

t.test('unit: the constraint a request maps to', async (t) => {
  const { constraintOf, checkStructuredOutputs } = await import('../src/api/chat/structured.js')
  const base = { messages }
  const of = (b: Extra) => constraintOf({ ...base, ...b } as never)
  t.equal(of({}), null, 'none')
  t.equal(of({ response_format: { type: 'text' } }), null, 'text: none')
  t.same(of({ structured_outputs: { regex: 'a+' } }), { kind: 'regex', spec: 'a+', anyWhitespace: true })
  t.same(of({ structured_outputs: { choice: ['a', 'b'] } }), { kind: 'choice', spec: '["a","b"]', anyWhitespace: true })
  t.same(of({ structured_outputs: { json: '{"type":"string"}', disable_any_whitespace: true } }), {
    kind: 'json',
    spec: '{"type":"string"}',
    anyWhitespace: false,
  })
  t.same(of({ response_format: { type: 'json_object' } }), { kind: 'json_object', spec: '', anyWhitespace: true })
  t.same(of({ response_format: { type: 'json_schema', json_schema: { name: 'n', schema: { type: 'integer' } } } }), {
    kind: 'json',
    spec: '{"type":"integer"}',
    anyWhitespace: true,
  })
  const tag = { type: 'structural_tag', structures: [{ begin: '<f>', schema: {}, end: '</f>' }], triggers: ['<f>'] }
  t.same(of({ response_format: tag }), { kind: 'structural_tag', spec: JSON.stringify(tag), anyWhitespace: true })
  t.same(of({ guided_grammar: 'root ::= "x"' }), { kind: 'grammar', spec: 'root ::= "x"', anyWhitespace: true }, 'guided_grammar')
  t.same(of({ guided_choice: ['x'] }), { kind: 'choice', spec: '["x"]', anyWhitespace: true }, 'guided_choice')
  const closed = of({
    structured_outputs: {
      json: { type: 'object', properties: { a: { type: 'object', properties: { b: {} } } } },
      disable_additional_properties: true,
    },
  })
  t.same(
    JSON.parse(closed!.spec),
    {
      type: 'object',
      properties: { a: { type: 'object', properties: { b: {} }, additionalProperties: false } },
      additionalProperties: false,
    },
    'disable_additional_properties closes every object with properties',
  )
  // A constraint put into structured_outputs by tool_choice normalisation passes through unchanged.
  t.same(of({ structured_outputs: { json: { type: 'array' } }, tool_choice: 'required' }), {
    kind: 'json',
    spec: '{"type":"array"}',
    anyWhitespace: true,
  })
  t.doesNotThrow(() => checkStructuredOutputs({ ...base, structured_outputs: { regex: 'x' } } as never))
  t.throws(
    () => checkStructuredOutputs({ ...base, structured_outputs: { regex: 'x' }, guided_choice: ['a'] } as never),
    /one kind of constraints/,
  )
})
