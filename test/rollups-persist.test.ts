import t from 'tap'
import { rm, writeFile } from 'node:fs/promises'
import path from 'node:path'
import { tempDir } from './helpers/server.js'
import { openAnalytics, startPart, endPart } from '../src/index.js'

const P = 'e/persist'
const req = {
  project_id: P,
  start: '2026-05-01T00:00:00Z',
  end: '2026-05-03T00:00:00Z',
  granularity: 86400,
  call_metrics: [{ metric: 'latency_ms' as const, aggregations: ['sum', 'min', 'max'], percentiles: [50] }, { metric: 'call_count' as const }],
  usage_metrics: [{ metric: 'input_tokens' as const }],
}

function calls(from: number, n: number) {
  return Array.from({ length: n }, (_, i) => {
    const k = from + i
    const id = `01900000-0000-7000-b000-${k.toString(16).padStart(12, '0')}`
    const started = Date.parse('2026-05-01T00:00:00Z') + k * 600_000
    return [
      startPart({ project_id: P, id, trace_id: id, op_name: `op${k % 3}`, started_at: new Date(started).toISOString(), attributes: {}, inputs: {} }, 'me'),
      endPart({ project_id: P, id, ended_at: new Date(started + 10 * k + 5).toISOString(), summary: { usage: { m: { prompt_tokens: k } } } }),
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
