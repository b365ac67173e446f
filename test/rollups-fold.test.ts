import t from 'tap'
import { rm } from 'node:fs/promises'
import { tempDir } from './helpers/server.js'
import { openAnalytics, startPart, endPart } from '../src/index.js'
import type { CallStatsReq } from '../src/schemas/calls.js'

// The rollups fold the rows added since their last fold from the earliest start those rows hold on (rollups.ts
// fold): with calls arriving as they run, the last minutes instead of the whole tables.
const P = 'e/fold'
const BASE = Date.parse('2026-05-01T00:00:00Z')
const id = (k: number) => `01900000-0000-7000-d000-${k.toString(16).padStart(12, '0')}`
const started = (k: number) => BASE + k * 600_000
const range = (from: number, n: number) => Array.from({ length: n }, (_, i) => from + i)
const starts = (ks: number[]) =>
  ks.map((k) =>
    startPart(
      {
        project_id: P,
        id: id(k),
        trace_id: id(k),
        op_name: `op${k % 3}`,
        started_at: new Date(started(k)).toISOString(),
        attributes: {},
        inputs: {},
      },
      'me',
    ),
  )
const ends = (ks: number[], extra = 0) =>
  ks.map((k) =>
    endPart({
      project_id: P,
      id: id(k),
      ended_at: new Date(started(k) + 10 * k + 5 + extra).toISOString(),
      summary: { usage: { [`m${k % 2}`]: { prompt_tokens: k, completion_tokens: 3 } } },
      ...(k % 11 === 0 ? { exception: 'boom' } : {}),
    }),
  )

const req: CallStatsReq = {
  project_id: P,
  start: new Date(BASE).toISOString(),
  end: new Date(BASE + 4 * 86_400_000).toISOString(),
  granularity: 3600,
  call_metrics: [
    { metric: 'latency_ms' as const, aggregations: ['sum', 'min', 'max', 'count'], percentiles: [50, 99] },
    { metric: 'call_count' as const },
    { metric: 'error_count' as const },
  ],
  usage_metrics: [{ metric: 'input_tokens' as const, aggregations: ['sum', 'min', 'max', 'count'] }, { metric: 'output_tokens' as const }],
}

t.test('a fold from the earliest start touched leaves the tables as a whole fold does, and answers as a scan', async (t) => {
  const dir = tempDir()
  t.teardown(() => rm(dir, { recursive: true, force: true }))
  const a = await openAnalytics(dir, { flushIntervalMs: 0 })
  t.teardown(() => a.close())
  await a.ready()
  const rollups = a.rollups as unknown as { foldFrom: number | null }
  // Three days of calls started, flushed; most of them ended, flushed: each end subtracts its call's started state.
  await a.store.ingest(starts(range(0, 400)))
  await a.store.flush()
  await a.store.ingest(ends(range(0, 300)))
  await a.store.flush()
  await a.rollups.consolidate()
  t.equal(rollups.foldFrom, Infinity, 'nothing left to fold')
  const scanOf = () => a.stats.run({ ...req, filter: { trace_ids: range(0, 450).map(id) } })

  // The newest calls end and new ones run: only recent rows are added.
  await a.store.ingest([...ends(range(300, 100)), ...starts(range(400, 50))])
  await a.store.flush()
  await a.store.ingest(ends(range(400, 50)))
  await a.store.flush()
  t.equal(rollups.foldFrom, started(300), 'fold from the earliest start the added rows hold')
  const added = await a.rollups.size()
  await a.rollups.consolidate()
  const folded = await a.rollups.size()
  t.ok(folded < added, `rows folded (${added} -> ${folded})`)
  let got = await a.stats.run(req)
  t.equal(got.path, 'rollup')
  t.same(got.result, (await scanOf()).result, 'answers as a scan')

  // A late end part of an old call moves the start back to it.
  await a.store.ingest(ends([5], 777))
  await a.store.flush()
  t.equal(rollups.foldFrom, started(5), 'a late part of an old call: fold from its start')
  await a.rollups.consolidate()
  const incremental = await a.rollups.size()
  got = await a.stats.run(req)
  t.same(got.result, (await scanOf()).result, 'after the late part: answers as a scan')

  // The whole tables folded again change nothing: no group was left in pieces.
  rollups.foldFrom = null
  await a.rollups.consolidate()
  t.equal(await a.rollups.size(), incremental, 'a whole fold finds nothing more to fold')
  t.same((await a.stats.run(req)).result, got.result, 'and answers the same')
})
