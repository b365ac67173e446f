import t from 'tap'
import { rm } from 'node:fs/promises'
import { readdirSync } from 'node:fs'
import path from 'node:path'
import type { CallPart } from '../src/calls/model.js'
import { CallStore } from '../src/calls/store.js'
import { endPart, foldParts, startPart } from '../src/calls/ingest/parts.js'
import { tempDir } from './helpers/server.js'
import { rng } from './helpers/rng.js'
import { hex, shuffle, traceParts } from './helpers/merge-order.js'

t.test('the merged view survives a restart (log replay) unchanged', async (t) => {
  const dir = tempDir()
  t.teardown(() => rm(dir, { recursive: true, force: true }))
  const r = rng(99)
  let store = await CallStore.open(dir)
  const parts = Array.from({ length: 5 }, () => traceParts('re/play', r)).flat()
  await store.ingest(shuffle(parts, r))
  const before = await store.query('re/play', {})
  await store.close()
  store = await CallStore.open(dir)
  t.teardown(() => store.close())
  t.equal(store.recovered.parts, parts.length)
  t.same(await store.query('re/play', {}), before)
})

t.test('segments: flushed parts live in Parquet any engine can read, and survive a restart', async (t) => {
  const dir = tempDir()
  t.teardown(() => rm(dir, { recursive: true, force: true }))
  const r = rng(7)
  // No compaction until asked for below (maxSegments), however the flushes fall.
  let store = await CallStore.open(dir, { flushRows: 40, flushIntervalMs: 0, maxSegments: 1000 })
  const parts = Array.from({ length: 30 }, () => traceParts('seg/p', r)).flat()
  for (let i = 0; i < parts.length; i += 10) await store.ingest(parts.slice(i, i + 10))
  await store.flush()
  const segments = [...store.segments]
  t.ok(segments.length >= 2, `${segments.length} segments after ${parts.length} parts`)
  t.equal(
    segments.reduce((a, s) => a + s.rows, 0),
    parts.length,
    'every part is in a segment',
  )
  const before = await store.query('seg/p', {})
  t.ok(before.length > 0)
  await store.close()

  const { DuckDBInstance } = await import('@duckdb/node-api')
  const other = await DuckDBInstance.create(':memory:')
  const conn = await other.connect()
  const files = readdirSync(path.join(dir, 'calls')).filter((f) => f.endsWith('.parquet'))
  t.equal(files.length, segments.length, 'no stray files')
  const n = (
    await conn.runAndReadAll(
      `SELECT count(*)::INTEGER AS n, count(DISTINCT id)::INTEGER AS ids FROM read_parquet('${path.join(dir, 'calls', '*.parquet')}')`,
    )
  ).getRowObjectsJS()[0]!
  t.equal(n.n, parts.length, 'a separate DuckDB reads every part from the Parquet files')
  conn.closeSync()
  other.closeSync()

  store = await CallStore.open(dir, { flushRows: 40, flushIntervalMs: 0 })
  t.teardown(() => store.close())
  t.equal(store.recovered.segments, segments.length)
  t.equal(store.recovered.parts, 0, 'nothing left to replay: the logs were folded into segments')
  t.same(await store.query('seg/p', {}), before, 'same merged view after restart')
  await store.ingest(traceParts('seg/p', r))
  const withNew = await store.query('seg/p', {})
  t.ok(withNew.length > before.length, 'new writes land beside the segments')

  await store.flush()
  await store.compact()
  t.equal(store.segments.length, 1, 'compacted into one segment')
  t.ok(
    store.segments[0]!.rows <= withNew.length + 1,
    `one row per call after folding (${store.segments[0]!.rows} rows, ${withNew.length} live calls plus deleted ones)`,
  )
  t.same(await store.query('seg/p', {}), withNew, 'same merged view after compaction')
  await store.close()
  store = await CallStore.open(dir, { flushRows: 40, flushIntervalMs: 0 })
  t.same(await store.query('seg/p', {}), withNew, 'and after a restart')
  t.same(
    readdirSync(path.join(dir, 'calls')).filter((f) => f.endsWith('.parquet')),
    [store.segments[0]!.file],
    'the compacted-away files are gone',
  )
})

t.test('a second process cannot open a held store', async (t) => {
  const dir = tempDir()
  t.teardown(() => rm(dir, { recursive: true, force: true }))
  const store = await CallStore.open(dir)
  t.teardown(() => store.close())
  await t.rejects(CallStore.open(dir), /held by process/)
})

t.test("a batch's parts of one call fold into what the merged view reads from them apart", async (t) => {
  const dir = tempDir()
  t.teardown(() => rm(dir, { recursive: true, force: true }))
  const store = await CallStore.open(dir, { flushIntervalMs: 0 })
  t.teardown(() => store.close())
  const r = rng(5)
  for (let seed = 0; seed < 20; seed++) {
    const id = hex(r, 16)
    const pool: CallPart[] = [
      startPart(
        {
          project_id: 'x/x',
          id,
          trace_id: hex(r, 32),
          op_name: 'a',
          display_name: 'first',
          started_at: '2026-01-01T00:00:00Z',
          attributes: {},
          inputs: { ref: 'weave:///x/x/object/in:v1' },
        },
        'u',
      ),
      startPart(
        {
          project_id: 'x/x',
          id,
          trace_id: hex(r, 32),
          op_name: 'b',
          started_at: '2026-01-01T00:00:02Z',
          attributes: { again: true },
          inputs: { ref: 'weave:///x/x/object/in:v2' },
        },
        'u',
      ),
      endPart({
        project_id: 'x/x',
        id,
        ended_at: '2026-01-01T00:00:05Z',
        output: ['weave:///x/x/object/out:v1'],
        summary: { usage: { m: { prompt_tokens: 3 } } },
        display_name: 'from end',
      }),
      endPart({
        project_id: 'x/x',
        id,
        ended_at: '2026-01-01T00:00:09Z',
        output: null,
        exception: 'late',
        summary: { usage: { m: { prompt_tokens: 5 } } },
      }),
      { kind: 'update', project_id: 'x/x', id, display_name: 'renamed' },
    ]
    const batch = shuffle(pool, r).slice(0, 2 + Math.floor(r() * 4))
    await store.ingest(batch.map((p) => ({ ...p, project_id: `apart/s${seed}` })))
    await store.ingest(foldParts(batch.map((p) => ({ ...p, project_id: `folded/s${seed}` }))))
  }
  const apart: unknown[] = []
  const folded: unknown[] = []
  for (let seed = 0; seed < 20; seed++) {
    apart.push((await store.query(`apart/s${seed}`, {})).map(({ project_id: _p, ...rest }) => rest))
    folded.push((await store.query(`folded/s${seed}`, {})).map(({ project_id: _p, ...rest }) => rest))
  }
  t.same(folded, apart, 'every call reads the same folded or not')
  const found = async (side: string, filter: object) => {
    const hits: number[] = []
    for (let seed = 0; seed < 20; seed++) if ((await store.query(`${side}/s${seed}`, { filter })).length) hits.push(seed)
    return hits
  }
  for (const filter of [
    { input_refs: ['weave:///x/x/object/in:v1'] },
    { input_refs: ['weave:///x/x/object/in:v2'] },
    { output_refs: ['weave:///x/x/object/out:v1'] },
  ]) {
    const hits = await found('apart', filter)
    t.ok(hits.length > 0 && hits.length < 20, `the ${JSON.stringify(filter)} filter matches some calls (${hits.length})`)
    t.same(await found('folded', filter), hits, `${JSON.stringify(filter)} finds the same calls folded or not`)
  }
})
