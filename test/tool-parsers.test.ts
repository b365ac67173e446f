import t from 'tap'
import { requiredCalls, toolParser, toolParserForTemplate, type StreamOut } from '../src/inference/parsers/tool-parsers.js'
import { pythonDumps } from '../src/inference/parsers/json-text.js'
import { requiredSchema, toolMode } from '../src/api/chat/tools.js'
import { checkStructuredOutputs } from '../src/api/chat/structured.js'
import { CHAT_TEMPLATE } from '../src/fixtures/tiny-tokenizer.js'
import { rng } from './helpers/rng.js'

/** Streams `text` in random pieces and assembles what comes out as a client would. */
function assemble(parser: { stream(): { push(s: string): StreamOut; end(): StreamOut } }, text: string, seed: number) {
  const r = rng(seed)
  const s = parser.stream()
  const outs: StreamOut[] = []
  for (let i = 0; i < text.length;) {
    const n = 1 + Math.floor(r() * 6)
    outs.push(s.push(text.slice(i, i + n)))
    i += n
  }
  outs.push(s.end())
  let content = ''
  const calls: { name: string; arguments: string }[] = []
  for (const o of outs) {
    content += o.content
    for (const p of o.calls) {
      if (p.name !== undefined) {
        t.notOk(calls[p.index], `call ${p.index} is named once`)
        calls[p.index] = { name: p.name, arguments: '' }
      }
      if (p.arguments !== undefined) calls[p.index]!.arguments += p.arguments
    }
  }
  return { content, calls }
}

t.test('pythonDumps writes JSON as json.dumps(ensure_ascii=False) does', async (t) => {
  t.equal(pythonDumps({ a: 1, b: [1, 'x', null], c: { d: true } }), '{"a": 1, "b": [1, "x", null], "c": {"d": true}}')
  t.equal(pythonDumps({ city: 'Zürich "q"' }), '{"city": "Zürich \\"q\\""}')
  t.equal(pythonDumps({}), '{}')
})

const hermes = toolParser('hermes')

t.test('hermes recognises <tool_call> blocks', async (t) => {
  const one = 'Let me look.\n<tool_call>\n{"name": "get_weather", "arguments": {"city":"Paris","days":3}}\n</tool_call>'
  t.same(hermes.extract(one), {
    calls: [{ name: 'get_weather', arguments: '{"city": "Paris", "days": 3}' }],
    content: 'Let me look.\n',
  })
  const two =
    '<tool_call>{"name": "a", "arguments": {}}</tool_call>\n<tool_call>{"name": "b", "arguments": {"x": [1, {"y": "}"}]}}</tool_call>'
  const r = hermes.extract(two)
  t.same(
    r.calls.map((c) => c.name),
    ['a', 'b'],
  )
  t.equal(r.calls[1]!.arguments, '{"x": [1, {"y": "}"}]}')
  t.equal(r.content, null, 'nothing before the first call: content null')
  // An unterminated last call (the reply ended at max_tokens right after it) still counts.
  t.same(hermes.extract('<tool_call>{"name": "f", "arguments": {"q": 1}}').calls, [{ name: 'f', arguments: '{"q": 1}' }])
})

t.test('hermes leaves other text alone', async (t) => {
  for (const text of [
    'The weather in Paris is 18 degrees.',
    'I would use {"name": "f", "arguments": {}} but not as a call.',
    '<tool_call>{"name": "f", "arguments": {"a": </tool_call>',
    '<tool_call>{"arguments": {}}</tool_call>',
    '<tool_call>not json</tool_call>',
    '',
  ])
    t.same(hermes.extract(text), { calls: [], content: text }, JSON.stringify(text))
})

t.test('hermes streams the same calls and content as the whole text gives', async (t) => {
  const texts = [
    'Sure.\n<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris", "unit": "celsius"}}\n</tool_call>',
    '<tool_call>{"name":"a","arguments":{"s":"<tool_call> inside, and \\"quotes\\""}}</tool_call><tool_call>{"name":"b","arguments":{"n":[1,2,3]}}</tool_call>',
    'plain text with a < sign and <tool_ but no call',
    '<tool_call>{"name": "f", "arguments": {"deep": {"x": {"y": [true, false, null]}}}}',
  ]
  for (const [i, text] of texts.entries())
    for (const seed of [1, 2, 3]) {
      const whole = hermes.extract(text)
      const streamed = assemble(hermes, text, seed * 10 + i)
      t.same(streamed.calls, whole.calls, `calls of text ${i}, seed ${seed}`)
      t.equal(streamed.content, whole.content ?? '', `content of text ${i}, seed ${seed}`)
    }
})

t.test('hermes streaming sends the name before any arguments, and arguments in pieces', async (t) => {
  const s = hermes.stream()
  const text = '<tool_call>{"name": "get_weather", "arguments": {"city": "Paris"}}</tool_call>'
  const pieces = [...text].map((ch) => s.push(ch)).concat([s.end()])
  const calls = pieces.flatMap((p) => p.calls)
  t.same(calls[0], { index: 0, name: 'get_weather' })
  t.ok(calls.filter((c) => c.arguments).length > 3, 'arguments arrive in several pieces')
  t.equal(pieces.map((p) => p.content).join(''), '', 'tags never leak into content')
})

const llama = toolParser('llama3_json')

t.test('llama3_json recognises JSON calls the reply starts with', async (t) => {
  t.same(llama.extract('{"name": "get_weather", "parameters": {"city": "Paris"}}'), {
    calls: [{ name: 'get_weather', arguments: '{"city": "Paris"}' }],
    content: null,
  })
  t.same(llama.extract('<|python_tag|>{"name": "a", "parameters": {}}; {"name": "b", "arguments": {"k": "v"}}').calls, [
    { name: 'a', arguments: '{}' },
    { name: 'b', arguments: '{"k": "v"}' },
  ])
  t.same(llama.extract('\n {"name": "a", "parameters": {"x": 1}}').calls, [{ name: 'a', arguments: '{"x": 1}' }])
})

t.test('llama3_json leaves other text alone', async (t) => {
  for (const text of ['Here is {"name": "a", "parameters": {}}', '{"name": "a", "parameters": ', '{"not": "a call"}', 'no calls at all'])
    t.same(llama.extract(text), { calls: [], content: text }, JSON.stringify(text))
})

t.test('llama3_json streams what the whole text gives', async (t) => {
  const texts = [
    '{"name": "get_weather", "parameters": {"city": "Paris"}}',
    '<|python_tag|>{"name":"a","parameters":{"s":"x;y"}}; {"name":"b","parameters":{"n":[1, 2]}}',
    'Hello there, no tools.',
  ]
  for (const [i, text] of texts.entries())
    for (const seed of [4, 5]) {
      const whole = llama.extract(text)
      const streamed = assemble(llama, text, seed * 10 + i)
      t.same(streamed.calls, whole.calls, `calls of text ${i}`)
      t.equal(streamed.content, whole.content ?? '', `content of text ${i}`)
    }
})

t.test('the array tool_choice "required" generates, whole and streamed', async (t) => {
  const text = '[{"name": "a", "parameters": {"x": 1}}, {"name": "b", "parameters": {"y": [2, {"z": "]"}]}}]'
  const whole = requiredCalls.extract(text)
  t.same(whole.calls, [
    { name: 'a', arguments: '{"x": 1}' },
    { name: 'b', arguments: '{"y": [2, {"z": "]"}]}' },
  ])
  t.same(assemble(requiredCalls, text, 9).calls, whole.calls)
  t.same(requiredCalls.extract('[{"name": "a", "param').calls, [], 'a cut-off array makes no calls')
})

t.test('the parser is chosen from the template when its conventions are clear', async (t) => {
  t.equal(toolParserForTemplate(CHAT_TEMPLATE), 'hermes')
  t.equal(toolParserForTemplate('{{ "<|python_tag|>" }}'), 'llama3_json')
  t.equal(toolParserForTemplate('{% for m in messages %}{{ m.content }}{% endfor %}'), null)
  t.equal(toolParserForTemplate(null), null)
})

const tool = (name: string, parameters?: Record<string, unknown>) => ({ type: 'function' as const, function: { name, parameters } })

t.test('tool_choice "required" is constrained by vLLM\'s schema, $defs hoisted', async (t) => {
  const schema = requiredSchema([
    tool('a', { type: 'object', properties: { p: { $ref: '#/$defs/P' } }, $defs: { P: { type: 'string' } } }),
    tool('b'),
  ])
  t.same(schema, {
    type: 'array',
    minItems: 1,
    items: {
      type: 'object',
      anyOf: [
        {
          properties: { name: { type: 'string', enum: ['a'] }, parameters: { type: 'object', properties: { p: { $ref: '#/$defs/P' } } } },
          required: ['name', 'parameters'],
        },
        {
          properties: { name: { type: 'string', enum: ['b'] }, parameters: { type: 'object', properties: {} } },
          required: ['name', 'parameters'],
        },
      ],
    },
    $defs: { P: { type: 'string' } },
  })
  t.throws(
    () =>
      requiredSchema([
        tool('a', { type: 'object', $defs: { P: { type: 'string' } } }),
        tool('b', { type: 'object', $defs: { P: { type: 'integer' } } }),
      ]),
    /Tool definition 'P' has multiple schemas/,
  )
})

t.test('tool_choice rules', async (t) => {
  const messages = [{ role: 'user', content: 'hi' }]
  const tools = [tool('f', { type: 'object' })]
  t.same(toolMode({ messages }, 'hermes'), { kind: 'none' })
  t.same(toolMode({ messages, tools }, 'hermes'), { kind: 'auto', parser: 'hermes' })
  t.throws(() => toolMode({ messages, tools }, null), /"auto" tool choice requires --enable-auto-tool-choice and --tool-call-parser/)
  t.same(toolMode({ messages, tools, tool_choice: 'none' }, null), { kind: 'none' })
  t.throws(() => toolMode({ messages, tool_choice: 'required' }, null), /When using `tool_choice`, `tools` must be set./)
  t.throws(() => toolMode({ messages, tools: [], tool_choice: 'none' }, null), /`tools` must not be an empty array/)
  t.throws(
    () => toolMode({ messages, tools, tool_choice: { type: 'function', function: { name: 'g' } } }, null),
    /does not match any of the specified `tools`/,
  )
  // A named tool with a constraint of the client's own is refused where every constraint is checked (structured.ts).
  t.throws(
    () =>
      checkStructuredOutputs({
        tool_choice: { type: 'function', function: { name: 'f' } },
        response_format: { type: 'json_object' },
      }),
    /either use constraints for structured outputs or tools, not both/,
  )
})
