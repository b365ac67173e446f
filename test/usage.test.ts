import t from 'tap'
import { rm } from 'node:fs/promises'
import { postJson, startServer, tempDir, type TestServer } from './helpers/server.js'
import { openAnalytics, startPart, endPart, type CallPart } from '../src/index.js'
import { rng } from './helpers/rng.js'

// No chat in this file: its servers start without the built-in model (about 1 s of CPU less per start).
process.env.WEFT_MODEL ??= 'none'

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
    batch.push({
      mode: 'start',
      req: {
        start: {
          project_id: P,
          id: node.id,
          trace_id: traceId,
          parent_id: parent,
          op_name: 'op',
          started_at: '2026-05-01T10:00:00Z',
          attributes: {},
          inputs: {},
        },
      },
    })
    if (!node.running)
      batch.push({
        mode: 'end',
        req: { end: { project_id: P, id: node.id, ended_at: '2026-05-01T10:00:01Z', summary: { usage: node.usage ?? {} } } },
      })
    for (const c of node.children ?? []) walk(c, node.id)
  }
  walk(root, null)
  const r = await post('/call/upsert_batch', { batch })
  if (r.status !== 200 || r.json.res.some((x: any) => x.error)) throw new Error(r.text)
}

const u = (prompt: number, completion: number, extra: Record<string, number> = {}) => ({
  prompt_tokens: prompt,
  completion_tokens: completion,
  requests: 1,
  ...extra,
})

interface RandomCall {
  traceId: string
  id: string
  parent: string | null
}
/**
 * Random traces of `min` to `min + spread - 1` calls, handed to `each` in order: the first call of a
 * trace is a root; later ones have no parent (another root), a parent that never arrives (an
 * orphan), or an earlier call of the trace.
 */
function randomForest(r: () => number, traces: number, min: number, spread: number, each: (c: RandomCall) => void): void {
  for (let tr = 0; tr < traces; tr++) {
    const traceId = uuid()
    const ids: string[] = []
    for (let i = 0; i < min + Math.floor(r() * spread); i++) {
      const id = uuid()
      const k = r()
      const parent = i === 0 || k < 0.1 ? null : k < 0.2 ? uuid() : ids[Math.floor(r() * ids.length)]!
      ids.push(id)
      each({ traceId, id, parent })
    }
  }
}

t.test('/calls/usage: each root with all its descendants, both spellings summed, unknown ids empty', async (t) => {
  const leaf = { id: uuid(), usage: { 'gpt-4o': { input_tokens: 7, output_tokens: 3, requests: 1 } } }
  const child = {
    id: uuid(),
    usage: { 'gpt-4o': u(100, 10), 'claude-3-5-sonnet-20241022': u(50, 5, { cache_read_input_tokens: 20 }) },
    children: [leaf],
  }
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
  for (const limit of [0, -1])
    t.equal((await post('/calls/usage', { project_id: P, call_ids: [big.id], limit })).status, 400, `limit ${limit} → 400`)
  t.equal(
    (await post('/calls/usage', { project_id: P, call_ids: ['not a call id'] })).json.call_usage['not a call id'] !== undefined,
    true,
    'an odd id is just unknown',
  )
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
    endPart({
      project_id: 'e/p',
      id,
      ended_at: '2026-05-01T10:00:00.250Z',
      summary: { usage: { 'gpt-4o': { prompt_tokens: 10, completion_tokens: 2 } } },
    }),
  ])
  await a.ready()
  const res = (await a.stats.stats({
    project_id: 'e/p',
    start: '2026-05-01T00:00:00Z',
    end: '2026-05-02T00:00:00Z',
    granularity: 86400,
    call_metrics: [{ metric: 'latency_ms', aggregations: ['max'] }],
    usage_metrics: [{ metric: 'input_tokens' }],
  })) as any
  t.same(res.call_buckets, [{ timestamp: '2026-05-01T00:00:00.000Z', max_latency_ms: 250, count: 1 }])
  t.same(res.usage_buckets, [{ timestamp: '2026-05-01T00:00:00.000Z', model: 'gpt-4o', sum_input_tokens: 10, count: 1 }])
  const usage = await a.usage.calls('e/p', [id], true, 10)
  t.equal(usage.call_usage[id]!['gpt-4o']!.prompt_tokens, 10)
  await a.store.flush()
  t.equal(await a.stats.count('e/p', null), 1, 'counted from the rollups after a flush')
  await a.close()
})

t.test('/calls/usage sums in SQL what the per-call roll-up sums: random forests with orphans, several roots, odd usage', async (t) => {
  // Without costs the roll-up runs in SQL; with costs, per call in JavaScript. Their counts must agree.
  const r = rng(12345)
  const batch: unknown[] = []
  const asked: string[] = []
  let i = 0
  randomForest(r, 12, 3, 12, ({ traceId, id, parent }) => {
    const usage: Record<string, Record<string, number>> = {}
    for (const m of ['gpt-4o', 'x-model', 'zero']) {
      if (r() < 0.5) continue
      usage[m] =
        m === 'zero'
          ? { prompt_tokens: 0, requests: 0 }
          : r() < 0.5
            ? u(Math.floor(r() * 100), Math.floor(r() * 50))
            : { input_tokens: Math.floor(r() * 9), output_tokens: 2, total_tokens: r() < 0.5 ? 0 : 99, cache_creation_input_tokens: 3 }
    }
    batch.push({
      mode: 'start',
      req: {
        start: {
          project_id: P,
          id,
          trace_id: traceId,
          parent_id: parent,
          op_name: 'op',
          started_at: `2026-05-02T10:00:${String(i++ % 60).padStart(2, '0')}Z`,
          attributes: {},
          inputs: {},
        },
      },
    })
    if (r() < 0.9) batch.push({ mode: 'end', req: { end: { project_id: P, id, ended_at: '2026-05-02T10:01:00Z', summary: { usage } } } })
    if (r() < 0.4) asked.push(id)
  })
  t.equal((await post('/call/upsert_batch', { batch })).status, 200)
  const strip = (res: any) =>
    Object.fromEntries(
      Object.entries(res.call_usage as Record<string, Record<string, Record<string, unknown>>>).map(([id, m]) => [
        id,
        Object.fromEntries(
          Object.entries(m)
            .sort()
            .map(([model, v]) => [model, Object.fromEntries(Object.entries(v).filter(([f]) => !f.endsWith('_cost')))]),
        ),
      ]),
    )
  const plain = await post('/calls/usage', { project_id: P, call_ids: asked })
  const costed = await post('/calls/usage', { project_id: P, call_ids: asked, include_costs: true })
  t.equal(plain.status, 200, plain.text)
  t.ok(Object.values(plain.json.call_usage).filter((m: any) => Object.keys(m).length > 1).length > 3, 'several calls sum several models')
  t.same(strip(plain.json), strip(costed.json), 'the same sums either way')
  t.same(plain.json.unfinished_call_ids, costed.json.unfinished_call_ids)
  t.ok(plain.json.unfinished_call_ids.length > 0)
  for (const [limit, status] of [
    [3, 413],
    [16, 200],
  ] as const) {
    const a = await post('/calls/usage', { project_id: P, call_ids: asked, limit })
    const b = await post('/calls/usage', { project_id: P, call_ids: asked, limit, include_costs: true })
    t.same([a.status, b.status], [status, status], `limit ${limit}: ${status} either way`)
    if (status === 200) t.same(strip(a.json), strip(plain.json), 'traces fetched in smaller batches: the same sums')
  }
})

t.test('/calls/usage answers for parents that form a cycle', async (t) => {
  const traceId = uuid()
  const [a, b] = [uuid(), uuid()]
  const batch = [
    {
      mode: 'start',
      req: {
        start: {
          project_id: P,
          id: a,
          trace_id: traceId,
          parent_id: b,
          op_name: 'op',
          started_at: '2026-05-03T10:00:00Z',
          attributes: {},
          inputs: {},
        },
      },
    },
    {
      mode: 'start',
      req: {
        start: {
          project_id: P,
          id: b,
          trace_id: traceId,
          parent_id: a,
          op_name: 'op',
          started_at: '2026-05-03T10:00:01Z',
          attributes: {},
          inputs: {},
        },
      },
    },
    { mode: 'end', req: { end: { project_id: P, id: a, ended_at: '2026-05-03T10:01:00Z', summary: { usage: { m: u(1, 1) } } } } },
    { mode: 'end', req: { end: { project_id: P, id: b, ended_at: '2026-05-03T10:01:00Z', summary: { usage: { m: u(2, 2) } } } } },
  ]
  t.equal((await post('/call/upsert_batch', { batch })).status, 200)
  const r = await post('/calls/usage', { project_id: P, call_ids: [a] })
  t.equal(r.status, 200, 'no endless descent')
  t.ok(r.json.call_usage[a].m.prompt_tokens >= 1)
})

t.test(
  '/calls/usage from the rollups (usage_calls) agrees with the per-call roll-up: after a flush, a compaction, late parts and deletes',
  async (t) => {
    const dir = tempDir()
    t.teardown(() => rm(dir, { recursive: true, force: true }))
    const a = await openAnalytics(dir, { flushIntervalMs: 0 })
    await a.ready()
    const project = 'e/usage-table'
    const r = rng(777)
    const all: string[] = []
    const open: string[] = []
    const usage = () => {
      const out: Record<string, Record<string, number>> = {}
      for (const m of ['gpt-4o', 'x-model'])
        if (r() < 0.6)
          out[m] =
            r() < 0.5
              ? u(Math.floor(r() * 100), Math.floor(r() * 50))
              : { input_tokens: Math.floor(r() * 9), output_tokens: 2, cache_read_input_tokens: 4 }
      return out
    }
    /** Random traces (orphans, several roots, unfinished calls) as parts. */
    const forest = (traces: number) => {
      const parts: CallPart[] = []
      randomForest(r, traces, 2, 10, ({ traceId, id, parent }) => {
        all.push(id)
        parts.push(
          startPart(
            {
              project_id: project,
              id,
              trace_id: traceId,
              parent_id: parent,
              op_name: 'op',
              started_at: '2026-05-04T10:00:00Z',
              attributes: {},
              inputs: {},
            },
            'me',
          ),
        )
        if (r() < 0.8) parts.push(endPart({ project_id: project, id, ended_at: '2026-05-04T10:01:00Z', summary: { usage: usage() } }))
        else open.push(id)
      })
      return parts
    }
    const strip = (res: { call_usage: Record<string, Record<string, object>> }) =>
      Object.fromEntries(
        Object.entries(res.call_usage).map(([id, m]) => [
          id,
          Object.fromEntries(
            Object.entries(m)
              .sort()
              .map(([model, v]) => [model, Object.fromEntries(Object.entries(v).filter(([f]) => !f.endsWith('_cost')))]),
          ),
        ]),
      )
    const agree = async (label: string) => {
      const asked = all.filter((_, i) => i % 3 === 0)
      const plain = await a.usage.calls(project, asked, false, 10_000)
      const costed = await a.usage.calls(project, asked, true, 10_000)
      t.ok(a.rollups.ready, `${label}: the rollups are in use`)
      t.ok(
        Object.values(plain.call_usage).some((m) => Object.keys(m).length > 0),
        `${label}: some usage`,
      )
      t.same(strip(plain), strip(costed), `${label}: the same sums`)
      t.same(plain.unfinished_call_ids, costed.unfinished_call_ids, `${label}: the same unfinished calls`)
    }
    await a.store.ingest(forest(8))
    await agree('in the tail')
    await a.store.flush()
    await agree('flushed (rows added to the table)')
    await a.store.ingest(forest(8))
    await a.store.flush()
    await a.store.compact()
    await agree('compacted (table rebuilt)')
    // Calls already in the table change: unfinished ones end, ended ones report again (the latest wins), some are deleted.
    const late = [
      ...open
        .splice(0, 6)
        .map((id) => endPart({ project_id: project, id, ended_at: '2026-05-04T10:02:00Z', summary: { usage: { 'gpt-4o': u(1000, 1) } } })),
      ...all
        .filter((_, i) => i % 5 === 1)
        .map((id) => endPart({ project_id: project, id, ended_at: '2026-05-04T10:03:00Z', summary: { usage: { 'late-model': u(5, 5) } } })),
      ...all
        .filter((_, i) => i % 7 === 2)
        .map((id) => ({ kind: 'delete' as const, project_id: project, id, deleted_us: Date.now() * 1000 })),
    ]
    await a.store.ingest(late)
    const lateOnes = (
      await a.usage.calls(
        project,
        all.filter((_, i) => i % 5 === 1 && i % 7 !== 2),
        false,
        10_000,
      )
    ).call_usage
    t.ok(
      Object.values(lateOnes).every((m) => m['late-model'] !== undefined),
      'a late end part is seen at once',
    )
    await agree('changed in the tail (table rows overridden)')
    await a.store.flush()
    await agree('changes flushed (table rows replaced)')
    await a.close()
  },
)
