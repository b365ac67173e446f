import t from 'tap'
import { rm } from 'node:fs/promises'
import type { CallPart } from '../src/calls/model.js'
import { CallStore } from '../src/calls/store.js'
import { Catalog } from '../src/catalog/db.js'
import { Prices, defaultPrices } from '../src/catalog/prices.js'
import type { CallStatsReq } from '../src/schemas/calls.js'
import { CallStats } from '../src/stats/engine.js'
import { Rollups } from '../src/stats/rollups.js'
import { tempDir } from './helpers/server.js'

// /calls/stats reads the rollups in several statements (one per table, and one for the tail's correction); all must
// see the tables at one commit (src/stats/commit-gate.ts). A commit that overtakes them (the gate's wait here 0)
// makes the request read everything again in one statement. Its answer is checked against values computed here.

const P = 'acme/stats-overtaken'
const H = 3_600_000
const BASE = Date.UTC(2026, 2, 6)
const hex = (i: number, n: number) => i.toString(16).padStart(n, '0')

t.test('a read a commit overtook is read again in one statement, with the same answer', async (t) => {
  const dir = tempDir('stats-overtaken-')
  const store = await CallStore.open(dir, { flushIntervalMs: 0, flushRows: 100_000_000 })
  const catalog = await Catalog.open(dir)
  t.teardown(async () => {
    await store.close()
    await catalog.close()
    await rm(dir, { recursive: true, force: true })
  })
  // 600 calls: all start in Parquet; 400 end there too, 200 end in the tail (their state at the rollups' mark is
  // subtracted and their state now added); 300 more calls only in the tail.
  const latency = (i: number) => 100 + ((i * 37) % 900)
  const start = (i: number): CallPart => ({
    kind: 'start',
    project_id: P,
    id: hex(i, 32),
    trace_id: hex(i, 32),
    op_name: 'op',
    started_us: (BASE + i * 1000) * 1000,
    inputs: '{}',
    attributes: '{}',
  })
  const end = (i: number): CallPart => ({
    kind: 'end',
    project_id: P,
    id: hex(i, 32),
    ended_us: (BASE + i * 1000 + latency(i)) * 1000,
    output: '1',
    summary: '{}',
  })
  await store.ingest([...Array.from({ length: 600 }, (_, i) => start(i)), ...Array.from({ length: 400 }, (_, i) => end(i))])
  await store.flush()
  const rollups = new Rollups(store)
  await rollups.start()
  while (!rollups.ready) await new Promise((r) => setTimeout(r, 50))
  await store.ingest([
    ...Array.from({ length: 200 }, (_, i) => end(400 + i)),
    ...Array.from({ length: 300 }, (_, i) => [start(600 + i), end(600 + i)]).flat(),
  ])

  const stats = new CallStats(store, rollups, new Prices(catalog, defaultPrices('')))
  const req = {
    project_id: P,
    start: new Date(BASE).toISOString(),
    end: new Date(BASE + H).toISOString(),
    granularity: 3600,
    call_metrics: [
      { metric: 'latency_ms', aggregations: ['sum', 'count'], percentiles: [50] },
      { metric: 'call_count', aggregations: ['sum'] },
    ],
  } as CallStatsReq
  const want = {
    sum_call_count: 900,
    count_latency_ms: 900,
    sum_latency_ms: Array.from({ length: 900 }, (_, i) => latency(i)).reduce((a, b) => a + b, 0),
  }

  const quiet = await stats.run(req)
  t.equal(quiet.path, 'rollup')
  t.match((quiet.result.call_buckets as unknown[])[0], want, 'the rollups and the correction count every call once')
  t.equal(rollups.gate.stats().overtaken, 0, 'nothing overtook it')

  // The statements each request runs, to see which answered.
  const read = store.rows.bind(store)
  const sqls: string[] = []
  store.rows = (sql, params) => (sqls.push(sql), read(sql, params))
  rollups.gate.maxWaitMs = 0
  const overtaken = stats.run(req)
  // The commit comes once the read is in the gate (its statements issued; the correction's span is read before it).
  while (!sqls.some((s) => s.includes('fr_ids AS MATERIALIZED'))) await new Promise((r) => setImmediate(r))
  await rollups.gate.commit(async () => {})
  const r = await overtaken
  store.rows = read
  t.equal(rollups.gate.stats().overtaken, 1, 'the commit overtook the read')
  t.equal(r.path, 'rollup')
  t.same(r.result, quiet.result, 'the same answer')
  const one = sqls.filter((s) => s.includes('fr_now AS MATERIALIZED') && s.includes('rollup_calls_by_project'))
  t.equal(one.length, 1, 'read again in one statement holding the tables and the correction')
})
