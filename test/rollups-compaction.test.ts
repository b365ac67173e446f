import t, { type Test } from 'tap'
import { copyFile, rm } from 'node:fs/promises'
import path from 'node:path'
import { postJson, requestJson, startServer, streamQuery, tempDir, type TestServer } from './helpers/server.js'
import { endPart, openAnalytics, startPart } from '../src/index.js'
import { progress } from '../src/core/progress.js'

const BASE = Date.parse('2026-05-01T00:00:00Z')
const DAY = 86_400_000
const iso = (ms: number) => new Date(ms).toISOString()
const idOf = (k: number) => `01900000-0000-7000-d000-${k.toString(16).padStart(12, '0')}`
const startedOf = (k: number) => BASE + k * 13 * 60_000 + 777
const latencyOf = (k: number) => 100 + 37 * k

const request = (project: string) => ({
  project_id: project,
  start: iso(BASE),
  end: iso(BASE + 2 * DAY),
  granularity: 86400,
  call_metrics: [{ metric: 'latency_ms', aggregations: ['sum', 'min', 'max', 'count'] }, { metric: 'call_count' }],
  usage_metrics: [{ metric: 'input_tokens', aggregations: ['sum', 'count'] }],
})

interface Seen {
  started_at: string
  ended_at: string | null
  summary?: { usage?: Record<string, Record<string, number>> } | null
}

/** What /calls/stats must answer, computed here from the calls as /calls/stream_query returns them. */
function recompute(calls: Seen[]) {
  const callBuckets = [0, 1].map((d) => {
    const cs = calls.filter((c) => Math.floor((Date.parse(c.started_at) - BASE) / DAY) === d)
    const lat = cs.filter((c) => c.ended_at).map((c) => Date.parse(c.ended_at!) - Date.parse(c.started_at))
    return {
      timestamp: iso(BASE + d * DAY),
      count: cs.length,
      sum_latency_ms: lat.reduce((a, b) => a + b, 0),
      min_latency_ms: lat.length ? Math.min(...lat) : null,
      max_latency_ms: lat.length ? Math.max(...lat) : null,
      count_latency_ms: lat.length,
    }
  })
  const usage: Record<string, number> = {}
  for (const c of calls)
    for (const [model, u] of Object.entries(c.summary?.usage ?? {})) {
      const key = `${iso(BASE + Math.floor((Date.parse(c.started_at) - BASE) / DAY) * DAY)} ${model}`
      usage[key] = (usage[key] ?? 0) + (u.prompt_tokens ?? 0) + (u.input_tokens ?? 0)
    }
  return { callBuckets, usage }
}

/** The answer's parts compared with recompute's. */
function answered(json: { call_buckets: Record<string, unknown>[]; usage_buckets: Record<string, unknown>[] }) {
  const pick = ['timestamp', 'count', 'sum_latency_ms', 'min_latency_ms', 'max_latency_ms', 'count_latency_ms']
  const callBuckets = json.call_buckets.map((b) => Object.fromEntries(pick.map((k) => [k, b[k]])))
  const usage: Record<string, number> = {}
  for (const b of json.usage_buckets) if (Number(b.count) > 0) usage[`${b.timestamp} ${b.model}`] = Number(b.sum_input_tokens)
  return { callBuckets, usage }
}

const startItem = (project: string, k: number) => ({
  mode: 'start',
  req: {
    start: {
      project_id: project,
      id: idOf(k),
      trace_id: idOf(k),
      op_name: `op${k % 3}`,
      started_at: iso(startedOf(k)),
      attributes: {},
      inputs: {},
    },
  },
})
const endItem = (project: string, k: number) => ({
  mode: 'end',
  req: {
    end: {
      project_id: project,
      id: idOf(k),
      ended_at: iso(startedOf(k) + latencyOf(k)),
      output: null,
      summary: { usage: { [`m${k % 2}`]: { prompt_tokens: k, completion_tokens: 1 } } },
    },
  },
})

async function adminStats(s: TestServer) {
  const r = await requestJson(s, 'GET', '/admin/stats')
  return r.json as {
    rollups: { origin: string; ready: boolean; x: number }
    calls: { tail_parts: number; segments: number }
    tasks: { running: { name: string }[]; finished: { name: string; state: string }[] }
  }
}

async function until(what: string, check: () => Promise<boolean>) {
  for (let i = 0; i < 300; i++) {
    if (await check()) return
    await new Promise((r) => setTimeout(r, 100))
  }
  throw new Error(`timed out waiting for ${what}`)
}

async function checkStats(t: Test, s: TestServer, project: string, what: string) {
  const r = await postJson(s, '/calls/stats', request(project))
  t.equal(r.status, 200, `${what}: 200`)
  t.equal(r.headers.get('x-weft-stats-path'), 'rollup', `${what}: answered by the rollups`)
  const calls = (await streamQuery(s, { project_id: project })) as Seen[]
  t.same(answered(r.json), recompute(calls), `${what}: equal to a recomputation from the calls`)
  return calls.length
}

const builds = (st: Awaited<ReturnType<typeof adminStats>>) =>
  [...st.tasks.running, ...st.tasks.finished].filter((x) => x.name === 'rollups build').length

t.test('over HTTP: compaction keeps the rollups, late ends are counted, a restart loads them', async (t) => {
  const dataDir = tempDir()
  t.teardown(() => rm(dataDir, { recursive: true, force: true }))
  const args = ['--model', 'none', '--calls-flush-rows', '10', '--calls-flush-interval-ms', '0']
  let s = await startServer({ dataDir, args })
  t.teardown(() => s.stop())
  const P = 'acme/compact'
  await until('rollups ready', async () => (await adminStats(s)).rollups?.ready === true)
  // Ten batches over the flush size: ten flushes, a compaction past the eighth segment. Calls 100–119 start only.
  for (let b = 0; b < 10; b++) {
    const batch = [
      ...Array.from({ length: 10 }, (_, i) => [startItem(P, b * 10 + i), endItem(P, b * 10 + i)]).flat(),
      startItem(P, 100 + 2 * b),
      startItem(P, 101 + 2 * b),
    ]
    t.equal((await postJson(s, '/call/upsert_batch', { batch })).status, 200)
    // Each batch its own flush (one queued flush would take several batches).
    await until('a flush', async () => (await adminStats(s)).calls.tail_parts === 0)
    // Asked while flushes and the compaction go on: still the rollups.
    const mid = await postJson(s, '/calls/stats', request(P))
    t.equal(mid.headers.get('x-weft-stats-path'), 'rollup', `during ingest ${b}: rollups`)
  }
  await until('a compaction', async () => (await adminStats(s)).tasks.finished.some((x) => x.name === 'calls compaction'))
  t.equal(await checkStats(t, s, P, 'after the compaction'), 120)
  t.equal(builds(await adminStats(s)), 0, 'no rollup build after the compaction')

  // Late ends of calls whose starts were compacted: a flushed batch and a few left in the tail.
  const late = Array.from({ length: 20 }, (_, i) => endItem(P, 100 + i))
  t.equal((await postJson(s, '/call/upsert_batch', { batch: late.slice(0, 16) })).status, 200)
  t.equal((await postJson(s, '/call/upsert_batch', { batch: late.slice(16) })).status, 200)
  await checkStats(t, s, P, 'late ends after the compaction')

  await s.stop()
  s = await startServer({ dataDir, args })
  await until('rollups ready', async () => (await adminStats(s)).rollups?.ready === true)
  const st = await adminStats(s)
  t.equal(st.rollups.origin, 'loaded', 'after a restart: loaded, not rebuilt')
  t.equal(builds(st), 0, 'no rollup build after the restart')
  await checkStats(t, s, P, 'after the restart')
})

function parts(project: string, from: number, n: number, ends: boolean) {
  return Array.from({ length: n }, (_, i) => {
    const k = from + i
    const start = startPart(
      { project_id: project, id: idOf(k), trace_id: idOf(k), op_name: 'op', started_at: iso(startedOf(k)), attributes: {}, inputs: {} },
      'me',
    )
    return ends ? [start, lateEnd(project, k)] : [start]
  }).flat()
}
const lateEnd = (project: string, k: number) =>
  endPart({
    project_id: project,
    id: idOf(k),
    ended_at: iso(startedOf(k) + latencyOf(k)),
    summary: { usage: { m: { prompt_tokens: k } } },
  })

/** Calls deleted after they ended (a subtraction with a latency: their groups' min/max marked). */
const deleted = (k: number) => k < 60 && k % 7 === 3

/** Expected (count, latency sum, min, max) per day of calls 0..n-1, the first `ended` of them ended. */
function expected(n: number, ended: (k: number) => boolean) {
  return [0, 1].map((d) => {
    const ks = Array.from({ length: n }, (_, k) => k).filter((k) => !deleted(k) && Math.floor((startedOf(k) - BASE) / DAY) === d)
    const lat = ks.filter(ended).map(latencyOf)
    return [ks.length, lat.reduce((a, b) => a + b, 0), lat.length ? Math.min(...lat) : null, lat.length ? Math.max(...lat) : null]
  })
}
const got = (r: { result: Record<string, unknown> }) =>
  (r.result.call_buckets as Record<string, unknown>[]).map((b) => [b.count, b.sum_latency_ms, b.min_latency_ms, b.max_latency_ms])

t.test('in process: no rebuild at compaction, marks cleared; rollups missing compacted parts are rebuilt', async (t) => {
  const dir = tempDir()
  t.teardown(() => rm(dir, { recursive: true, force: true }))
  const P = 'e/compaction'
  const req = request(P) as Parameters<Awaited<ReturnType<typeof openAnalytics>>['stats']['run']>[0]
  let a = await openAnalytics(dir, { flushIntervalMs: 0 })
  await a.ready()
  await a.store.ingest(parts(P, 0, 100, false))
  await a.store.flush()
  // Ends of flushed starts: a correction that subtracts their earlier states (marking their groups).
  await a.store.ingest(Array.from({ length: 60 }, (_, k) => lateEnd(P, k)))
  await a.store.flush()
  const gone = Array.from({ length: 60 }, (_, k) => k).filter(deleted)
  await a.store.ingest(gone.map((k) => ({ kind: 'delete' as const, project_id: P, id: idOf(k), deleted_us: Date.now() * 1000 })))
  await a.store.flush()
  t.equal((await a.stats.run(req)).path, 'scan', 'before the compaction: min/max of marked groups scan')
  const buildsBefore = progress.finishedTasks().filter((x) => x.name === 'rollups build').length
  await a.store.compact()
  t.equal(progress.finishedTasks().filter((x) => x.name === 'rollups build').length, buildsBefore, 'no rebuild at the compaction')
  let r = await a.stats.run(req)
  t.equal(r.path, 'rollup', 'min/max answered by the rollups: the marks were cleared')
  t.same(
    got(r),
    expected(100, (k) => k < 60),
  )
  // After the compaction: more late ends, flushed and in the tail.
  await a.store.ingest(Array.from({ length: 20 }, (_, i) => lateEnd(P, 60 + i)))
  await a.store.flush()
  await a.store.ingest(Array.from({ length: 10 }, (_, i) => lateEnd(P, 80 + i)))
  r = await a.stats.run({ ...req, call_metrics: [{ metric: 'latency_ms', aggregations: ['sum', 'count'] }, { metric: 'call_count' }] })
  t.equal(r.path, 'rollup')
  t.same(
    got(r).map((x) => x.slice(0, 2)),
    expected(100, (k) => k < 90).map((x) => x.slice(0, 2)),
    'late ends after the compaction counted',
  )
  await a.store.flush()
  await a.close()

  // A save from before more flushes and a compaction, as left by a crash (or a failed advance) between them.
  const file = path.join(dir, 'rollups', 'rollups.duckdb')
  await copyFile(file, file + '.old')
  a = await openAnalytics(dir, { flushIntervalMs: 0 })
  await a.ready()
  t.equal(a.rollups.origin, 'loaded')
  await a.store.ingest(Array.from({ length: 10 }, (_, i) => lateEnd(P, 90 + i)))
  await a.store.flush()
  await a.store.compact()
  const want = expected(100, () => true)
  t.same(got(await a.stats.run(req)), want)
  await a.close()
  await copyFile(file + '.old', file)
  await rm(file + '.wal', { force: true })
  a = await openAnalytics(dir, { flushIntervalMs: 0 })
  t.teardown(() => a.close())
  await a.ready()
  t.equal(a.rollups.origin, 'rebuilt', 'tables older than the compacted parts are rebuilt')
  r = await a.stats.run(req)
  t.equal(r.path, 'rollup')
  t.same(got(r), want, 'no call counted twice')
})
