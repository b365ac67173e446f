import t from 'tap'
import { rm } from 'node:fs/promises'
import { postJson, startServer, tempDir, type TestServer } from './helpers/server.js'
import { openAnalytics, startPart, endPart } from '../src/index.js'

let s: TestServer
t.before(async () => {
  s = await startServer()
})
t.teardown(() => s.stop())

const P = 'acme/usage'
let n = 0
const uuid = () => `01900000-0000-7000-9000-${(++n).toString(16).padStart(12, '0')}`

const post = (path: string, body: unknown) => postJson(s, path, body)

interface Node {
  id: string
  usage?: Record<string, Record<string, number>>
  children?: Node[]
  running?: boolean
}

/** Sends a tree of calls as one trace; returns its ids in order. */
async function trace(root: Node): Promise<void> {
  const traceId = uuid()
  const batch: unknown[] = []
  const walk = (node: Node, parent: string | null) => {
    batch.push({ mode: 'start', req: { start: { project_id: P, id: node.id, trace_id: traceId, parent_id: parent, op_name: 'op', started_at: '2026-05-01T10:00:00Z', attributes: {}, inputs: {} } } })
    if (!node.running) batch.push({ mode: 'end', req: { end: { project_id: P, id: node.id, ended_at: '2026-05-01T10:00:01Z', summary: { usage: node.usage ?? {} } } } })
    for (const c of node.children ?? []) walk(c, node.id)
  }
  walk(root, null)
  const r = await post('/call/upsert_batch', { batch })
  if (r.status !== 200 || r.json.res.some((x: any) => x.error)) throw new Error(r.text)
}

const u = (prompt: number, completion: number, extra: Record<string, number> = {}) => ({ prompt_tokens: prompt, completion_tokens: completion, requests: 1, ...extra })

t.test('/calls/usage: each root with all its descendants, both spellings summed, unknown ids empty', async (t) => {
  const leaf = { id: uuid(), usage: { 'gpt-4o': { input_tokens: 7, output_tokens: 3, requests: 1 } } }
  const child = { id: uuid(), usage: { 'gpt-4o': u(100, 10), 'claude-3-5-sonnet-20241022': u(50, 5, { cache_read_input_tokens: 20 }) }, children: [leaf] }
  const other = { id: uuid(), usage: { 'gpt-4o': u(1, 1) }, running: true }
  const root = { id: uuid(), usage: {}, children: [child, other] }
  await trace(root)
  const unknown = uuid()
  const r = await post('/calls/usage', { project_id: P, call_ids: [root.id, child.id, unknown, root.id] })
  t.equal(r.status, 200, r.text)
  t.same(Object.keys(r.json.call_usage).sort(), [root.id, child.id, unknown].sort(), 'one key per distinct requested id')
  t.same(r.json.call_usage[unknown], {})
  // The running call has not reported usage (it arrives with the end).
  t.same(r.json.call_usage[root.id]['gpt-4o'], {
    requests: 2,
    prompt_tokens: 107,
    completion_tokens: 13,
    total_tokens: 120,
    cache_read_input_tokens: 0,
    cache_creation_input_tokens: 0,
    prompt_tokens_total_cost: null,
    completion_tokens_total_cost: null,
    cache_read_input_tokens_total_cost: null,
    cache_creation_input_tokens_total_cost: null,
  })
  t.equal(r.json.call_usage[root.id]['claude-3-5-sonnet-20241022'].cache_read_input_tokens, 20)
  t.equal(r.json.call_usage[child.id]['gpt-4o'].prompt_tokens, 107, 'the child: itself and its leaf')
  t.same(r.json.unfinished_call_ids, [other.id])

  const costed = await post('/calls/usage', { project_id: P, call_ids: [child.id], include_costs: true })
  const g = costed.json.call_usage[child.id]['gpt-4o']
  t.equal(g.prompt_tokens_total_cost, 107 * 2.5e-6, 'default book price for gpt-4o')
  t.equal(g.completion_tokens_total_cost, 13 * 10e-6)
  t.equal(costed.json.call_usage[child.id]['claude-3-5-sonnet-20241022'].cache_read_input_tokens_total_cost, 20 * 0.3e-6)
})

t.test('/calls/usage: a trace larger than limit is 413, never partial; batches are split to fit', async (t) => {
  const big = { id: uuid(), usage: { m: u(1, 1) }, children: Array.from({ length: 5 }, () => ({ id: uuid(), usage: { m: u(1, 1) } })) }
  const small = { id: uuid(), usage: { m: u(2, 2) }, children: [{ id: uuid(), usage: { m: u(1, 1) } }] }
  const small2 = { id: uuid(), usage: { m: u(3, 3) }, children: [{ id: uuid(), usage: { m: u(1, 1) } }] }
  await trace(big)
  await trace(small)
  await trace(small2)
  const tooBig = await post('/calls/usage', { project_id: P, call_ids: [big.id], limit: 5 })
  t.equal(tooBig.status, 413)
  t.match(tooBig.json.reason, /single trace exceeds the 5-call aggregation limit/)
  const ok = await post('/calls/usage', { project_id: P, call_ids: [small.id, small2.id], limit: 2 })
  t.equal(ok.status, 200, 'two traces of two calls with limit 2: fetched one at a time')
  t.equal(ok.json.call_usage[small.id].m.prompt_tokens, 3)
  t.equal(ok.json.call_usage[small2.id].m.prompt_tokens, 4)
  const exact = await post('/calls/usage', { project_id: P, call_ids: [big.id], limit: 6 })
  t.equal(exact.json.call_usage[big.id].m.requests, 6)
  for (const limit of [0, -1]) t.equal((await post('/calls/usage', { project_id: P, call_ids: [big.id], limit })).status, 400, `limit ${limit} → 400`)
  t.equal((await post('/calls/usage', { project_id: P, call_ids: ['not a call id'] })).json.call_usage['not a call id'] !== undefined, true, 'an odd id is just unknown')
  t.equal((await post('/calls/usage', { project_id: P, call_ids: 'x' })).status, 422)
})

t.test('/trace/usage: every matching call with its fetched descendants', async (t) => {
  const leaf = { id: uuid(), usage: { m: u(5, 5) } }
  const root = { id: uuid(), usage: { m: u(1, 0) }, children: [leaf] }
  await trace(root)
  const r = await post('/trace/usage', { project_id: P, filter: { call_ids: [root.id, leaf.id] } })
  t.equal(r.status, 200, r.text)
  t.equal(r.json.call_usage[root.id].m.prompt_tokens, 6)
  t.equal(r.json.call_usage[leaf.id].m.prompt_tokens, 5)
  const onlyRoot = await post('/trace/usage', { project_id: P, filter: { call_ids: [root.id] } })
  t.equal(onlyRoot.json.call_usage[root.id].m.prompt_tokens, 1, 'a descendant outside the matching set is not followed')
})

t.test('the same statistics in-process, without HTTP (openAnalytics)', async (t) => {
  const dir = tempDir()
  t.teardown(() => rm(dir, { recursive: true, force: true }))
  const a = await openAnalytics(dir, { flushIntervalMs: 0 })
  const id = '01900000-0000-7000-a000-000000000001'
  await a.store.ingest([
    startPart({ project_id: 'e/p', id, trace_id: id, op_name: 'op', started_at: '2026-05-01T10:00:00Z', attributes: {}, inputs: {} }, 'me'),
    endPart({ project_id: 'e/p', id, ended_at: '2026-05-01T10:00:00.250Z', summary: { usage: { 'gpt-4o': { prompt_tokens: 10, completion_tokens: 2 } } } }),
  ])
  await a.ready()
  const res = (await a.stats.stats({ project_id: 'e/p', start: '2026-05-01T00:00:00Z', end: '2026-05-02T00:00:00Z', granularity: 86400, call_metrics: [{ metric: 'latency_ms', aggregations: ['max'] }], usage_metrics: [{ metric: 'input_tokens' }] })) as any
  t.same(res.call_buckets, [{ timestamp: '2026-05-01T00:00:00.000Z', max_latency_ms: 250, count: 1 }])
  t.same(res.usage_buckets, [{ timestamp: '2026-05-01T00:00:00.000Z', model: 'gpt-4o', sum_input_tokens: 10, count: 1 }])
  const usage = await a.usage.calls('e/p', [id], true, 10)
  t.equal(usage.call_usage[id]!['gpt-4o']!.prompt_tokens, 10)
  await a.store.flush()
  t.equal(await a.stats.count('e/p', null), 1, 'counted from the rollups after a flush')
  await a.close()
})
