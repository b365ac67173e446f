import t from 'tap'
import { rm, writeFile } from 'node:fs/promises'
import path from 'node:path'
import { tempDir } from './helpers/server.js'
import { openAnalytics, startPart, endPart } from '../src/index.js'
import type { CallStatsReq } from '../src/schemas/calls.js'
import { Params } from '../src/query/expr.js'

const P = 'e/persist'
const req: CallStatsReq = {
  project_id: P,
  start: '2026-05-01T00:00:00Z',
  end: '2026-05-03T00:00:00Z',
  granularity: 86400,
  call_metrics: [
    { metric: 'latency_ms' as const, aggregations: ['sum', 'min', 'max'], percentiles: [50] },
    { metric: 'call_count' as const },
  ],
  usage_metrics: [{ metric: 'input_tokens' as const }],
}

function calls(from: number, n: number) {
  return Array.from({ length: n }, (_, i) => {
    const k = from + i
    const id = `01900000-0000-7000-b000-${k.toString(16).padStart(12, '0')}`
    const started = Date.parse('2026-05-01T00:00:00Z') + k * 600_000
    return [
      startPart(
        { project_id: P, id, trace_id: id, op_name: `op${k % 3}`, started_at: new Date(started).toISOString(), attributes: {}, inputs: {} },
        'me',
      ),
      endPart({
        project_id: P,
        id,
        ended_at: new Date(started + 10 * k + 5).toISOString(),
        summary: { usage: { m: { prompt_tokens: k } } },
      }),
    ]
  }).flat()
}

t.test('rollups are saved and loaded across restarts; a damaged save only means a rebuild', async (t) => {
  const dir = tempDir()
  t.teardown(() => rm(dir, { recursive: true, force: true }))
  let a = await openAnalytics(dir, { flushIntervalMs: 0 })
  await a.ready()
  t.equal(a.rollups.origin, 'rebuilt', 'a new store builds its (empty) rollups')
  await a.store.ingest(calls(0, 100))
  await a.store.flush()
  await a.store.compact()
  const before = await a.stats.run(req)
  t.equal(before.path, 'rollup')
  await a.close()

  a = await openAnalytics(dir, { flushIntervalMs: 0 })
  await a.ready()
  t.equal(a.rollups.origin, 'loaded', 'loaded from disk, not rebuilt')
  t.same(await a.stats.run(req), before, 'the same answer')
  // Flushed after the last save: the load catches up.
  await a.store.ingest(calls(100, 50))
  await a.store.flush()
  const more = await a.stats.run(req)
  await a.close()

  a = await openAnalytics(dir, { flushIntervalMs: 0 })
  await a.ready()
  t.equal(a.rollups.origin, 'loaded')
  t.same(await a.stats.run(req), more, 'caught up after a restart')
  await a.close()

  await writeFile(path.join(dir, 'rollups', 'rollups.duckdb'), 'not a database')
  a = await openAnalytics(dir, { flushIntervalMs: 0 })
  await a.ready()
  t.equal(a.rollups.origin, 'rebuilt', 'a damaged file is rebuilt over')
  t.same(await a.stats.run(req), more)
  const counted = (more.result.call_buckets as { count: number }[]).reduce((s, b) => s + b.count, 0)
  t.equal(counted, 150, 'every call counted')
  await a.close()
})

t.test('the per-call tier through corrections, deletes and consolidation gives what a scan gives', async (t) => {
  const dir = tempDir()
  t.teardown(() => rm(dir, { recursive: true, force: true }))
  const a = await openAnalytics(dir, { flushIntervalMs: 0 })
  t.teardown(() => a.close())
  await a.ready()
  const Q = 'e/calltier'
  const base = Date.parse('2026-05-01T00:00:00Z')
  const ids = Array.from({ length: 60 }, (_, k) => `01900000-0000-7000-c000-${k.toString(16).padStart(12, '0')}`)
  const started = (k: number) => base + k * 7 * 60_000 + 1234
  // Starts first (flushed: in the tables), then ends with usage and errors, then deletes.
  await a.store.ingest(
    ids.map((id, k) =>
      startPart(
        {
          project_id: Q,
          id,
          trace_id: id,
          op_name: `op${k % 2}`,
          started_at: new Date(started(k)).toISOString(),
          attributes: {},
          inputs: {},
        },
        'me',
      ),
    ),
  )
  await a.store.flush()
  await a.store.ingest(
    ids.map((id, k) =>
      endPart({
        project_id: Q,
        id,
        ended_at: new Date(started(k) + 100 + k * 37).toISOString(),
        summary: { usage: { [`m${k % 3}`]: { prompt_tokens: k, completion_tokens: 2 * k } } },
        ...(k % 11 === 0 ? { exception: 'boom' } : {}),
      }),
    ),
  )
  await a.store.flush()
  await a.store.ingest(
    ids.filter((_, k) => k % 7 === 3).map((id) => ({ kind: 'delete' as const, project_id: Q, id, deleted_us: Date.now() * 1000 })),
  )
  // Left in the tail: the query-time correction.
  await a.store.ingest(
    ids.slice(0, 5).map((id, k) => endPart({ project_id: Q, id, ended_at: new Date(started(k) + 5000).toISOString(), summary: {} })),
  )
  const req: CallStatsReq = {
    project_id: Q,
    start: new Date(base + 17 * 60_000 + 5).toISOString(),
    end: new Date(base + 6 * 3_600_000 + 41 * 60_000).toISOString(),
    granularity: 3600,
    call_metrics: [
      { metric: 'latency_ms' as const, aggregations: ['sum', 'avg'], percentiles: [50, 90] },
      { metric: 'call_count' as const },
      { metric: 'error_count' as const },
    ],
    usage_metrics: [{ metric: 'input_tokens' as const, aggregations: ['sum', 'count'] }, { metric: 'output_tokens' as const }],
  }
  const scan = await a.stats.run({ ...req, filter: { trace_ids: ids } })
  t.equal(scan.path, 'scan')
  const before = await a.stats.run(req)
  t.equal(before.path, 'rollup')
  t.same(before.result, scan.result, 'corrections and the tail: as a scan')
  await a.store.flush()
  await a.rollups.consolidate()
  const after = await a.stats.run(req)
  t.same(after.result, scan.result, 'after consolidation: the same')
  const user = await a.stats.run({ ...req, filter: { svc_user_ids: ['me'] } })
  t.same(user.result, scan.result, 'latency percentiles by user (call tier only): the same')
  const calls = (scan.result.call_buckets as { count: number }[]).reduce((s, b) => s + b.count, 0)
  t.ok(calls > 30, `calls counted (${calls})`)
})

t.test('the rollup tables are kept in small row groups, so that a few minutes of them are read alone', async (t) => {
  // DuckDB skips a table's data by row group (rollups.ts ROLLUP_ROW_GROUP): at its default of 122,880 rows a request's
  // edge of a few seconds scanned a whole group of the call tier.
  const dir = tempDir()
  t.teardown(() => rm(dir, { recursive: true, force: true }))
  const a = await openAnalytics(dir, { flushIntervalMs: 0 })
  t.teardown(() => a.close())
  await a.ready()
  await a.store.ingest(calls(0, 20_000))
  await a.store.flush()
  const groups = async () =>
    Number(
      (
        await a.store.rows(
          `SELECT count(DISTINCT row_group_id)::BIGINT AS n FROM pragma_storage_info('rollups_db.rollup_calls_by_call')`,
          new Params(),
        )
      )[0]!.n,
    )
  t.equal(
    Number((await a.store.rows(`SELECT count(*)::BIGINT AS n FROM rollups_db.rollup_calls_by_call`, new Params()))[0]!.n),
    20_000,
    'a row a call',
  )
  await a.store.compact()
  await a.store.exclusive(() => a.rollups.rebuild())
  t.ok((await groups()) >= 2, 'built over 20,000 calls: more than one row group (one at DuckDB default)')
})
