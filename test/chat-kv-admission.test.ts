import t from 'tap'
import { chatServer } from './helpers/openai.js'
import { streamQuery, type TestServer } from './helpers/server.js'
import { ChatStream, chatOnce, engineState, waitFor } from './helpers/chat-load.js'

// --kv-cache-tokens admission through the real server on the built-in tiny model. A request reserves
// n × (prompt + max_tokens) positions; the batch may hold several sequences (--max-num-seqs is left at
// its default), so here the KV budget alone decides who runs.
const BUDGET = 1000
const BLOCK = 16
const chat = chatServer({ args: ['--kv-cache-tokens', String(BUDGET)] })

const words = (seed: number, n: number) =>
  Array.from(
    { length: n },
    (_, i) => ['warp', 'weft', 'shuttle', 'heddle', 'reed', 'beam', 'treadle'][(seed * 31 + i * 7) % 7] + ((i * seed) % 13),
  ).join(' ')
const convo = (seed: number, n = 30) => [{ role: 'user', content: `${seed}: ${words(seed, n)}` }]

async function promptTokens(s: TestServer, messages: unknown): Promise<number> {
  const r = await fetch(s.url + '/tokenize', {
    method: 'POST',
    headers: { ...s.bearer(), 'content-type': 'application/json' },
    body: JSON.stringify({ model: 'weft-tiny', messages }),
  })
  return ((await r.json()) as { count: number }).count
}

t.test('a request that could never fit the KV budget is refused at once (400) and changes nothing', async (t) => {
  const s = chat.s
  const messages = convo(1)
  const P = await promptTokens(s, messages)
  t.ok(P > 2 * BLOCK && P < BUDGET / 4, `a prompt of ${P} tokens`)
  const over = await chatOnce(s, { messages, max_tokens: BUDGET - P + 1, ignore_eos: true }, {}, 10_000)
  t.equal(over.status, 400, 'prompt + max_tokens one past the budget')
  t.match(over.json?.error?.message ?? over.json?.message, new RegExp(`${BUDGET - P + 1 + P} KV-cache positions.*${BUDGET}`))
  // n choices reserve n times: each alone would fit, together they cannot.
  const m = Math.floor(BUDGET / 2) - P + 10
  const twice = await chatOnce(s, { messages, n: 2, temperature: 1, max_tokens: m, ignore_eos: true }, {}, 10_000)
  t.equal(twice.status, 400, `n: 2 × (${P} + ${m}) > ${BUDGET}`)
  const exact = await chatOnce(s, { messages, max_tokens: BUDGET - P, ignore_eos: true })
  t.equal(exact.status, 200, 'exactly the budget fits')
  t.equal(exact.json.usage.completion_tokens, BUDGET - P)
  t.match(await engineState(s), { running_requests: 0, waiting_requests: 0, kv_positions_used: 0 })
})

t.test('requests wait while the cache is full and run once it frees: neither fails', async (t) => {
  const s = chat.s
  const project = 'acme/kv-wait-' + Math.random().toString(36).slice(2, 8)
  const headers = { 'openai-project': project }
  const messages = convo(2)
  const P = await promptTokens(s, messages)
  // Each needs 60% of the budget: one at a time.
  const m = Math.round(0.6 * BUDGET) - P
  const first = ChatStream.open(s, { messages, max_tokens: m, ignore_eos: true, request_id: 'first' }, headers)
  await first.readTokens(1)
  const second = chatOnce(s, { messages, max_tokens: m, ignore_eos: true, request_id: 'second' }, headers)
  t.ok(await waitFor(async () => (await engineState(s)).waiting_requests === 1, 10_000), 'the second waits while the first holds the cache')
  t.notOk(first.done, 'the first was still running then')
  t.match(await engineState(s), { running_requests: 1, kv_positions: BUDGET })
  await first.drain()
  t.equal(await first.status(), 200)
  t.equal(first.tokenChunks().length, m, 'the first streamed all its tokens')
  const r = await second
  t.equal(r.status, 200, 'the second was served, not refused')
  t.equal(r.json.usage.completion_tokens, m)
  // Same prompt: the second starts from the first's cached prompt blocks.
  t.equal(r.json.usage.prompt_tokens_details.cached_tokens, Math.floor((P - 1) / BLOCK) * BLOCK)

  let calls: any[] = []
  await waitFor(async () => (calls = await streamQuery(s, { project_id: project }, s.bearer())).length === 2, 10_000, 50)
  const byId = (id: string) => calls.find((c) => c.attributes.weft.completion_id === `chatcmpl-${id}`)
  const [a, b] = [byId('first'), byId('second')]
  // When each ran, on the server's clock: the second started only once the first had ended.
  const firstEnded = Date.parse(a.started_at) + a.attributes.weft.timings.total_ms
  const secondStarted = Date.parse(b.started_at) + b.attributes.weft.timings.queued_ms
  const slack = 50 // ms between the route's clock reading and the engine's, on a loaded machine
  t.ok(
    secondStarted + slack >= firstEnded,
    `the second started ${(secondStarted - firstEnded).toFixed(0)} ms after the first ended (ran ${a.attributes.weft.timings.total_ms.toFixed(0)} ms)`,
  )
})

t.test('idle cached blocks count against the budget: they are evicted for a request that needs the room', async (t) => {
  const s = chat.s
  const old = convo(3, 80)
  const P = await promptTokens(s, old)
  const warm = await chatOnce(s, { messages: old, max_tokens: 4, ignore_eos: true })
  t.equal(warm.status, 200)
  const hit = await chatOnce(s, { messages: old, max_tokens: 4, ignore_eos: true })
  const cachable = Math.floor((P - 1) / BLOCK) * BLOCK
  t.equal(hit.json.usage.prompt_tokens_details.cached_tokens, cachable, 'its prompt blocks are cached')
  // Another prompt that takes the whole budget: it fits only if every idle block goes.
  const big = convo(4, 70)
  const Q = await promptTokens(s, big)
  const whole = await chatOnce(s, { messages: big, max_tokens: BUDGET - Q, ignore_eos: true })
  t.equal(whole.status, 200)
  t.equal(whole.json.usage.completion_tokens, BUDGET - Q)
  const after = await chatOnce(s, { messages: old, max_tokens: 4, ignore_eos: true })
  t.equal(after.json.usage.prompt_tokens_details.cached_tokens, 0, 'the old prompt was evicted to make room')
  const stats = await fetch(s.url + '/admin/stats', { headers: s.bearer() })
  const st = ((await stats.json()) as any).inference['weft-tiny']
  t.ok(st.prefix_cache.blocks_cached * BLOCK <= BUDGET, 'the cache stays within --kv-cache-tokens')
})
