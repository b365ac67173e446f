import t from 'tap'
import OpenAI from 'openai'
import { rm } from 'node:fs/promises'
import path from 'node:path'
import { postJson, startServer, tempDir, type TestServer } from './helpers/server.js'
import { makeTinyModel } from '../src/fixtures/tiny-model.js'

// Tools on the built-in model (its ChatML template renders tools and calls hermes-style, so the
// server picks the hermes parser by itself); reasoning on the `thinking` variant with deepseek_r1.
let s: TestServer
let r: TestServer
const modelDir = path.join(tempDir('weft-thinking-'), 'weft-thinking')
t.before(async () => {
  await makeTinyModel(modelDir, { variant: 'thinking' })
  // One after the other: two starting at once on a loaded 2-core machine can outlast the start timeout.
  s = await startServer()
  r = await startServer({ args: ['--model', modelDir, '--reasoning-parser', 'deepseek_r1', '--tool-call-parser', 'hermes'] })
})
t.teardown(async () => {
  await Promise.all([s?.stop(), r?.stop()])
  await rm(path.dirname(modelDir), { recursive: true, force: true })
})

const client = (x: TestServer) => new OpenAI({ apiKey: x.key, baseURL: x.url + '/v1', maxRetries: 0 })
const messages = [{ role: 'user' as const, content: 'What is the weather in Paris?' }]
const weather = {
  type: 'function' as const,
  function: {
    name: 'get_weather',
    description: 'Current weather of a city',
    parameters: {
      type: 'object',
      properties: { city: { type: 'string', maxLength: 12 }, unit: { type: 'string', enum: ['celsius', 'fahrenheit'] } },
      required: ['city', 'unit'],
      additionalProperties: false,
    },
  },
}
const clock = {
  type: 'function' as const,
  function: { name: 'get_time', parameters: { type: 'object', properties: {}, additionalProperties: false } },
}
const tools = [weather, clock]

t.test('tools are rendered into the prompt; tool_choice "none" answers as text', async (t) => {
  const c = client(s)
  const plain = await c.chat.completions.create({ model: 'weft-tiny', messages, max_tokens: 4, seed: 1 })
  const none = await c.chat.completions.create({ model: 'weft-tiny', messages, tools, tool_choice: 'none', max_tokens: 4, seed: 1 })
  // The same prompt tokenized with the tools says how much longer the rendered prompt is.
  const tok = await postJson(s, '/tokenize', { messages, tools }, s.bearer())
  t.equal(tok.status, 200)
  t.equal(none.usage!.prompt_tokens, tok.json.count, 'the prompt with tools is what /tokenize renders with them')
  t.ok(none.usage!.prompt_tokens > plain.usage!.prompt_tokens + 40, 'the tool definitions are in the prompt')
  const strs = await postJson(s, '/tokenize', { messages, tools, return_token_strs: true }, s.bearer())
  t.match(strs.json.token_strs.join(''), /get_weather/, 'the function name is rendered')
  t.equal(none.choices[0]!.finish_reason === 'tool_calls', false)
  t.same(none.choices[0]!.message.tool_calls ?? [], [])
  t.type(none.choices[0]!.message.content, 'string')
})

t.test("earlier turns' tool calls and tool results go back through the template", async (t) => {
  const history = [
    ...messages,
    {
      role: 'assistant',
      content: null,
      tool_calls: [
        { id: 'chatcmpl-tool-1', type: 'function', function: { name: 'get_weather', arguments: '{"city": "Paris", "unit": "celsius"}' } },
      ],
    },
    { role: 'tool', tool_call_id: 'chatcmpl-tool-1', content: '18 degrees and cloudy' },
  ]
  const tok = await postJson(s, '/tokenize', { messages: history, tools, return_token_strs: true }, s.bearer())
  t.equal(tok.status, 200)
  const text = tok.json.token_strs.join('').replaceAll('Ġ', ' ').replaceAll('Ċ', '\n')
  t.match(text, '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris", "unit": "celsius"}}\n</tool_call>')
  t.match(text, '<tool_response>\n18 degrees and cloudy\n</tool_response>')
  const res = await client(s).chat.completions.create({
    model: 'weft-tiny',
    messages: history as never,
    tools,
    tool_choice: 'none',
    max_tokens: 3,
  })
  t.equal(res.usage!.prompt_tokens, tok.json.count)
  const badArgs = await postJson(s, '/v1/chat/completions', {
    messages: [
      { role: 'assistant', content: null, tool_calls: [{ id: 'x', type: 'function', function: { name: 'f', arguments: '{oops' } }] },
    ],
    max_tokens: 1,
  })
  t.equal(badArgs.status, 400)
  t.match(badArgs.json.error.message, /arguments of f are not JSON/)
})

t.test("tool_choice errors are vLLM's 400s", async (t) => {
  const cases: [Record<string, unknown>, RegExp][] = [
    [{ tool_choice: 'required' }, /When using `tool_choice`, `tools` must be set./],
    [{ tools: [], tool_choice: 'none' }, /`tools` must not be an empty array/],
    [{ tools, tool_choice: { type: 'function', function: { name: 'nope' } } }, /does not match any of the specified `tools`/],
    [{ tools, tool_choice: { type: 'function', function: { name: '' } } }, /Expected field `name` in `function` in `tool_choice`/],
    [{ tools, tool_choice: {} }, /.+/],
    [{ tools, tool_choice: 'sometimes' }, /.+/],
    [
      { tools, tool_choice: { type: 'function', function: { name: 'get_weather' } }, response_format: { type: 'json_object' } },
      /You can only either use constraints for structured outputs or tools, not both./,
    ],
  ]
  for (const [body, msg] of cases) {
    const e = await client(s)
      .chat.completions.create({ model: 'weft-tiny', messages, max_tokens: 2, ...body } as never)
      .catch((x: unknown) => x)
    t.type(e, OpenAI.BadRequestError, JSON.stringify(body))
    t.match((e as Error).message, msg, JSON.stringify(body))
  }
  // A model whose template says nothing of tool calls, on a server without --tool-call-parser: "auto" is refused.
  const e = await postJson(s, '/v1/chat/completions', {
    messages,
    tools,
    chat_template: '{% for m in messages %}{{ m.content }}{% endfor %}',
    max_tokens: 1,
  })
  t.equal(e.status, 200, "the parser follows the model, not the request's template")
})

t.test('tool_choice "auto" on text that is not a call leaves it as content', async (t) => {
  const res = await client(s).chat.completions.create({ model: 'weft-tiny', messages, tools, max_tokens: 12, seed: 3 })
  const ch = res.choices[0]!
  t.same(ch.message.tool_calls ?? [], [])
  t.not(ch.finish_reason, 'tool_calls')
  const raw = await client(s).chat.completions.create({ model: 'weft-tiny', messages, tools, tool_choice: 'none', max_tokens: 12, seed: 3 })
  t.equal(ch.message.content, raw.choices[0]!.message.content, 'the same text as without parsing')
})

// The random model never writes a call of its own accord; a regex constraint (which "auto" allows,
// unlike a named tool) makes it write hermes-style text, and the parser must turn that text into calls.
const CALLS_RE =
  'On it\\. <tool_call>\\n\\{"name": "get_weather", "arguments": \\{"city": "[a-z]{1,8}", "unit": "(celsius|fahrenheit)"\\}\\}\\n</tool_call>' +
  '\\n<tool_call>\\n\\{"name": "get_time", "arguments": \\{\\}\\}\\n</tool_call>'

t.test('tool_choice "auto" end to end: generated hermes calls become tool_calls, whole and streamed', async (t) => {
  for (const seed of [1, 2]) {
    const body = { model: 'weft-tiny', messages, tools, max_tokens: 400, seed, structured_outputs: { regex: CALLS_RE } }
    // The same generation without parsing: the text the parser is given, read here with the test's own regex.
    const raw = await client(s).chat.completions.create({ ...body, tool_choice: 'none' } as never)
    const text = (raw as OpenAI.ChatCompletion).choices[0]!.message.content!
    const m = /^(On it\. )<tool_call>\n(\{.*\})\n<\/tool_call>\n<tool_call>\n(\{.*\})\n<\/tool_call>$/.exec(text)
    t.ok(m, `seed ${seed}: the constraint made hermes-style text: ${JSON.stringify(text)}`)
    if (!m) continue
    const expected = [JSON.parse(m[2]!), JSON.parse(m[3]!)].map((c) => [c.name, c.arguments])
    t.equal(expected[0]![0], 'get_weather')

    const whole = (await client(s).chat.completions.create({ ...body, tool_choice: 'auto' } as never)) as OpenAI.ChatCompletion
    const ch = whole.choices[0]!
    const calls = ch.message.tool_calls as OpenAI.Chat.Completions.ChatCompletionMessageFunctionToolCall[]
    t.same(
      calls.map((c) => [c.function.name, JSON.parse(c.function.arguments)]),
      expected,
      `seed ${seed}: the calls`,
    )
    for (const c of calls) t.match(c.id, /^chatcmpl-tool-[0-9a-f]{32}$/)
    t.equal(ch.finish_reason, 'tool_calls')
    t.equal(ch.message.content, m[1], 'the text before the first call stays content')

    const stream = client(s).chat.completions.stream({ ...body, tool_choice: 'auto' } as never)
    let pieces = 0
    stream.on('chunk', (c) => (pieces += c.choices[0]?.delta.tool_calls?.length ?? 0))
    const final = await stream.finalChatCompletion()
    const fc = final.choices[0]!
    t.same(
      (fc.message.tool_calls as OpenAI.Chat.Completions.ChatCompletionMessageFunctionToolCall[]).map((c) => [
        c.function.name,
        JSON.parse(c.function.arguments),
      ]),
      expected,
      `seed ${seed}: the streamed calls, assembled by the SDK`,
    )
    t.ok(pieces > 2, 'tool-call deltas came in pieces')
    t.equal(fc.finish_reason, 'tool_calls')
    t.equal(fc.message.content, m[1], 'streamed content before the calls')
  }
})

// eslint-disable-next-line @typescript-eslint/no-explicit-any
function checkWeatherArgs(t: any, args: string) {
  const a = JSON.parse(args)
  t.same(Object.keys(a).sort(), ['city', 'unit'])
  t.type(a.city, 'string')
  t.ok([...a.city].length <= 12, 'maxLength counts code points')
  t.ok(['celsius', 'fahrenheit'].includes(a.unit))
}

t.test('a named function: its arguments are generated to its schema', async (t) => {
  for (const seed of [1, 2]) {
    const res = await client(s).chat.completions.create({
      model: 'weft-tiny',
      messages,
      tools,
      tool_choice: { type: 'function', function: { name: 'get_weather' } },
      max_tokens: 120,
      seed,
    })
    const ch = res.choices[0]!
    t.equal(ch.message.content, '')
    t.equal(ch.message.tool_calls!.length, 1)
    const call = ch.message.tool_calls![0]! as OpenAI.Chat.Completions.ChatCompletionMessageFunctionToolCall
    t.match(call.id, /^chatcmpl-tool-[0-9a-f]{32}$/)
    t.equal(call.type, 'function')
    t.equal(call.function.name, 'get_weather')
    t.equal(ch.finish_reason, 'stop')
    checkWeatherArgs(t, call.function.arguments)
  }
})

t.test('tool_choice "required": a JSON array of calls to the given tools', async (t) => {
  const res = await client(s).chat.completions.create({
    model: 'weft-tiny',
    messages,
    tools,
    tool_choice: 'required',
    max_tokens: 300,
    seed: 5,
  })
  const ch = res.choices[0]!
  t.equal(ch.message.content, '')
  t.equal(ch.finish_reason, 'tool_calls')
  t.ok(ch.message.tool_calls!.length >= 1)
  for (const call of ch.message.tool_calls! as OpenAI.Chat.Completions.ChatCompletionMessageFunctionToolCall[]) {
    t.match(call.id, /^chatcmpl-tool-[0-9a-f]{32}$/)
    t.ok(['get_weather', 'get_time'].includes(call.function.name))
    if (call.function.name === 'get_weather') checkWeatherArgs(t, call.function.arguments)
    else t.same(JSON.parse(call.function.arguments), {})
  }
  const one = await client(s).chat.completions.create({
    model: 'weft-tiny',
    messages,
    tools,
    tool_choice: 'required',
    parallel_tool_calls: false,
    max_tokens: 300,
    seed: 5,
  })
  t.same(
    one.choices[0]!.message.tool_calls!.map((c) => (c as { function: { name: string } }).function.name),
    ch.message.tool_calls!.slice(0, 1).map((c) => (c as { function: { name: string } }).function.name),
    'parallel_tool_calls: false keeps the first call only',
  )
  const cut = await client(s).chat.completions.create({ model: 'weft-tiny', messages, tools, tool_choice: 'required', max_tokens: 1 })
  t.equal(cut.choices[0]!.finish_reason, 'length')
  t.same(cut.choices[0]!.message.tool_calls, [])
})

t.test('streamed tool calls assemble in the openai SDK', async (t) => {
  for (const tool_choice of [{ type: 'function' as const, function: { name: 'get_weather' } }, 'required' as const]) {
    const body = { model: 'weft-tiny', messages, tools, tool_choice, max_tokens: 300, seed: 7 }
    const whole = await client(s).chat.completions.create(body)
    const stream = client(s).chat.completions.stream(body)
    let pieces = 0
    stream.on('chunk', (c) => (pieces += c.choices[0]?.delta.tool_calls?.length ?? 0))
    const final = await stream.finalChatCompletion()
    const calls = final.choices[0]!.message.tool_calls! as OpenAI.Chat.Completions.ChatCompletionMessageFunctionToolCall[]
    const expected = whole.choices[0]!.message.tool_calls! as OpenAI.Chat.Completions.ChatCompletionMessageFunctionToolCall[]
    t.same(
      calls.map((c) => [c.function.name, JSON.parse(c.function.arguments)]),
      expected.map((c) => [c.function.name, JSON.parse(c.function.arguments)]),
      `${JSON.stringify(tool_choice)}: the stream assembles the completion's calls`,
    )
    t.ok(pieces > calls.length, 'arguments came in pieces')
    for (const c of calls) t.match(c.id, /^chatcmpl-tool-[0-9a-f]{32}$/)
    t.equal(final.choices[0]!.finish_reason, whole.choices[0]!.finish_reason)
  }
})

t.test('completions with tool calls are recorded with the calls in the output', async (t) => {
  const project = 'acme/tools-' + Math.random().toString(36).slice(2, 8)
  const scoped = new OpenAI({ apiKey: s.key, baseURL: s.url + '/v1', maxRetries: 0, defaultHeaders: { 'OpenAI-Project': project } })
  const body = {
    model: 'weft-tiny',
    messages,
    tools,
    tool_choice: { type: 'function' as const, function: { name: 'get_weather' } },
    max_tokens: 120,
    seed: 11,
  }
  const res = await scoped.chat.completions.create(body)
  const streamed = await scoped.chat.completions.stream(body).finalChatCompletion()
  const q = await fetch(s.url + '/calls/stream_query', {
    method: 'POST',
    headers: { ...s.bearer(), 'content-type': 'application/json' },
    body: JSON.stringify({ project_id: project, sort_by: [{ field: 'started_at', direction: 'asc' }] }),
  })
  const calls = (await q.text())
    .trim()
    .split('\n')
    .map((l) => JSON.parse(l))
  t.equal(calls.length, 2)
  t.same(calls[0].output.choices[0].message.tool_calls, res.choices[0]!.message.tool_calls, 'the calls the model asked for')
  t.same(calls[1].output.choices[0].message.tool_calls, streamed.choices[0]!.message.tool_calls, 'and those it streamed')
})

// ---- reasoning (the `thinking` model, --reasoning-parser deepseek_r1) ----

async function markerId(x: TestServer, text: string): Promise<number> {
  const tok = await postJson(x, '/tokenize', { prompt: text, add_special_tokens: false }, x.bearer())
  t.equal(tok.json.tokens.length, 1, `${text} is one token`)
  return tok.json.tokens[0]
}

t.test('reasoning is split off, counted and streamed', async (t) => {
  const end = await markerId(r, '</think>')
  const c = client(r)
  let split = 0
  for (const seed of [1, 2, 3, 4, 5, 6]) {
    // A handful of tokens, </think> among them: the random model's reply puts it somewhere, or nowhere.
    const body = {
      model: 'weft-thinking',
      messages,
      max_tokens: 24,
      seed,
      allowed_token_ids: [72, 101, 108, 111, 32, end],
      return_token_ids: true,
    }
    const res = await c.chat.completions.create(body as never)
    const ch = res.choices[0]! as unknown as { message: Record<string, unknown>; token_ids: number[] }
    const raw = (await postJson(r, '/detokenize', { tokens: ch.token_ids }, r.bearer())).json.prompt as string
    const at = raw.indexOf('</think>')
    const expected = at < 0 ? { reasoning: raw, content: null } : { reasoning: raw.slice(0, at), content: raw.slice(at + 8) || null }
    if (at >= 0) split++
    t.equal(ch.message.reasoning, expected.reasoning, `seed ${seed}: reasoning`)
    t.equal(ch.message.reasoning_content, expected.reasoning, 'the older name too')
    t.equal(ch.message.content, expected.content, `seed ${seed}: content`)
    const endAt = ch.token_ids.indexOf(end)
    const details = (res.usage as unknown as { completion_tokens_details: { reasoning_tokens: number } }).completion_tokens_details
    t.equal(details.reasoning_tokens, endAt < 0 ? ch.token_ids.length : endAt, 'reasoning tokens: the ids before </think>')
    // Streamed: the same split, in delta.reasoning and delta.content.
    const chunks = await c.chat.completions.create({ ...body, stream: true, stream_options: { include_usage: true } } as never)
    let reasoning = ''
    let content = ''
    let usage: unknown = null
    for await (const k of chunks as unknown as AsyncIterable<OpenAI.Chat.Completions.ChatCompletionChunk>) {
      const d = k.choices[0]?.delta as { reasoning?: string; reasoning_content?: string; content?: string } | undefined
      if (d?.reasoning !== undefined) t.equal(d.reasoning_content, d.reasoning)
      reasoning += d?.reasoning ?? ''
      content += d?.content ?? ''
      if (k.usage) usage = k.usage
    }
    t.equal(reasoning, expected.reasoning, `seed ${seed}: streamed reasoning`)
    t.equal(content, expected.content ?? '', `seed ${seed}: streamed content`)
    t.same((usage as { completion_tokens_details: unknown }).completion_tokens_details, details)
    // include_reasoning: false drops it.
    const hidden = await c.chat.completions.create({ ...body, include_reasoning: false } as never)
    t.equal(hidden.choices[0]!.message.content, expected.content)
    t.equal((hidden.choices[0]!.message as unknown as { reasoning: unknown }).reasoning, null)
  }
  t.ok(split > 0, 'some replies had a </think> to split at')
})

t.test('reasoning_effort and enable_thinking reach the template', async (t) => {
  const c = client(r)
  const count = async (kwargs: Record<string, unknown>) =>
    (await postJson(r, '/tokenize', { messages, chat_template_kwargs: kwargs }, r.bearer())).json.count as number
  for (const effort of ['low', 'high', 'none'] as const) {
    const res = await c.chat.completions.create({ model: 'weft-thinking', messages, max_tokens: 1, reasoning_effort: effort } as never)
    t.equal(res.usage!.prompt_tokens, await count({ reasoning_effort: effort, enable_thinking: effort !== 'none' }), effort)
  }
  const base = await count({})
  t.ok((await count({ enable_thinking: false })) > base, 'enable_thinking: false closes an empty <think> block in the prompt')
  const kw = await c.chat.completions.create({
    model: 'weft-thinking',
    messages,
    max_tokens: 1,
    reasoning_effort: 'none',
    chat_template_kwargs: { enable_thinking: true },
  } as never)
  t.equal(kw.usage!.prompt_tokens, await count({ reasoning_effort: 'none' }), 'chat_template_kwargs win over what reasoning_effort implies')
})
