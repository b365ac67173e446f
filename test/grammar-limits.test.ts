import t, { type Test } from 'tap'
import { chatServer } from './helpers/openai.js'
import { chatOnce } from './helpers/chat-load.js'

// Grammar compiles are bounded: a schema past the size and depth bounds is refused before xgrammar sees it, and a
// compile running past the time limit has its lane stopped; each is a 400 in the OpenAI family's shape, quickly,
// and the next request is served.
const LIMIT_MS = 4000
const chat = chatServer({ env: { WEFT_GRAMMAR_COMPILE_TIMEOUT_MS: String(LIMIT_MS) } })
const messages = [{ role: 'user', content: 'Answer.' }]

async function timed<T>(f: () => Promise<T>): Promise<[T, number]> {
  const t0 = performance.now()
  const r = await f()
  return [r, performance.now() - t0]
}

function nested(depth: number): Record<string, unknown> {
  let schema: Record<string, unknown> = { type: 'string' }
  for (let i = 0; i < depth; i++) schema = { type: 'object', properties: { a: schema }, required: ['a'] }
  return schema
}

function wide(n: number): Record<string, unknown> {
  const properties: Record<string, unknown> = {}
  for (let i = 0; i < n; i++) properties[`p${i}`] = { type: 'string', pattern: '[a-z]{1,20}' }
  return { type: 'object', properties, required: Object.keys(properties) }
}

const ask = (so: Record<string, unknown>) => timed(() => chatOnce(chat.s, { messages, max_tokens: 8, structured_outputs: so }, {}, 120_000))

async function served(t: Test, so: Record<string, unknown>, what: string): Promise<void> {
  const [r, ms] = await ask(so)
  t.equal(r.status, 200, `${what}: served (${Math.round(ms)} ms)`)
}

t.test('schemas past the bounds are refused before compiling, in vLLM-like words', async (t) => {
  await served(t, { json: nested(20) }, 'a schema 20 objects deep')
  await served(t, { json: wide(200) }, 'a schema with 200 properties')
  for (const [name, schema, words] of [
    ['5,000 properties', wide(5000), /too large to compile: it has 5000 properties in all, more than 1000/],
    ['200 levels deep', nested(200), /too large to compile: it is nested more than 64 levels deep/],
  ] as const) {
    const [r, ms] = await ask({ json: schema })
    t.equal(r.status, 400, `${name}: 400`)
    t.match(r.json?.error, { message: words, type: 'BadRequestError', code: 400 }, `${name}: says which bound`)
    t.ok(ms < 2000, `${name}: answered in ${Math.round(ms)} ms, before any compile`)
  }
  await served(t, { json: nested(3) }, 'the next request')
})

t.test('a compile past the time limit stops its lane: 400, and the next requests are served', async (t) => {
  // 3,000 alternatives each leading to a counted repetition: over a minute of compile without the limit (measured).
  const rules = Array.from({ length: 3000 }, (_, i) => i)
  const hostile = {
    grammar: `root ::= ${rules.map((i) => `"w${i}" r${i}`).join(' | ')}\n${rules.map((i) => `r${i} ::= [a-z]{1,50} "${i}"`).join('\n')}`,
  }
  const [r, ms] = await ask(hostile)
  t.equal(r.status, 400, `the hostile grammar: 400 (${r.json?.error?.message})`)
  t.match(r.json?.error?.message, /took longer than 4 s to compile and was stopped/)
  t.ok(ms < LIMIT_MS + 5000, `answered in ${Math.round(ms)} ms`)
  await served(t, { json: nested(3) }, 'a schema right after')
  await served(t, { regex: '[a-c]{2,4}' }, 'a regex right after')
  const [again] = await ask(hostile)
  t.equal(again.status, 400, 'the hostile grammar again: 400 again (no half-compiled grammar was kept)')
  await served(t, { choice: ['yes', 'no'] }, 'and a choice after that')
})
