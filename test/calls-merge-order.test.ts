import t from 'tap'
import { rm } from 'node:fs/promises'
import { readdirSync } from 'node:fs'
import path from 'node:path'
import type { CallPart } from '../src/calls/model.js'
import { CallStore } from '../src/calls/store.js'
import { endPart, foldParts, startPart } from '../src/calls/ingest/parts.js'
import { tempDir } from './helpers/server.js'
import { rng } from './helpers/rng.js'

function shuffle<T>(xs: T[], r: () => number): T[] {
  const a = [...xs]
  for (let i = a.length - 1; i > 0; i--) {
    const j = Math.floor(r() * (i + 1))
    ;[a[i], a[j]] = [a[j]!, a[i]!]
  }
  return a
}

const hex = (r: () => number, n: number) => Array.from({ length: n }, () => Math.floor(r() * 16).toString(16)).join('')

/** Parts of one random trace: starts, ends (some with exceptions), display-name updates, duplicates. */
function traceParts(project: string, r: () => number): CallPart[] {
  const trace = hex(r, 32)
  const ids = Array.from({ length: 2 + Math.floor(r() * 6) }, () => hex(r, 16))
  const parts: CallPart[] = []
  ids.forEach((id, i) => {
    const parent = i === 0 ? null : ids[Math.floor(r() * i)]!
    const s = startPart(
      {
        project_id: project,
        id,
        trace_id: trace,
        parent_id: parent,
        op_name: `op${i % 3}`,
        started_at: `2026-01-01T00:00:${String(i).padStart(2, '0')}.${hex(r, 3).replace(/\D/g, '1')}Z`,
        attributes: { i },
        inputs: { v: r() },
      },
      'u',
    )
    parts.push(s)
    if (r() < 0.3) parts.push({ ...s }) // duplicate start
    if (r() < 0.8) {
      parts.push(
        endPart({
          project_id: project,
          id,
          ended_at: `2026-01-01T00:01:${String(i).padStart(2, '0')}Z`,
          output: { o: i },
          summary: { n: i },
          exception: r() < 0.2 ? 'boom' : null,
        }),
      )
    }
    // One display-name update per call at most: several would be order-dependent by design (last write wins).
    if (r() < 0.3) parts.push({ kind: 'update', project_id: project, id, display_name: `dn${i}` })
  })
  return parts
}

for (const [flushRows, maxSegments, compactParts] of [
  [1_000_000, 8, 2_000_000],
  [7, 1000, 2_000_000],
  [7, 2, 2_000_000],
  // Compaction split into many id ranges (one segment each), as a large store's is.
  [7, 2, 400],
])
  t.test(
    `the merged view does not depend on the order parts arrive in (flush every ${flushRows} parts, compact past ${maxSegments} segments of ${compactParts} parts)`,
    async (t) => {
      const dir = tempDir()
      t.teardown(() => rm(dir, { recursive: true, force: true }))
      const store = await CallStore.open(dir, { flushRows, flushIntervalMs: 0, maxSegments, compactParts })
      t.teardown(() => store.close())
      for (let seed = 1; seed <= 25; seed++) {
        const r = rng(seed)
        const parts = Array.from({ length: 3 }, () => traceParts('base/p', r)).flat()
        const orders = [parts, [...parts].reverse(), shuffle(parts, r), shuffle(parts, r)]
        const views: string[] = []
        for (let k = 0; k < orders.length; k++) {
          const project = `seed${seed}/order${k}`
          // Ingest in small random batches, as clients would; half the orders with each batch's parts
          // of one call folded into one, as the ingest workers do.
          const ordered = orders[k]!.map((p) => ({ ...p, project_id: project }))
          for (let i = 0; i < ordered.length;) {
            const n = 1 + Math.floor(r() * 6)
            const batch = ordered.slice(i, i + n)
            await store.ingest(k % 2 === 0 ? foldParts(batch) : batch)
            i += n
          }
          await store.flush()
          const calls = await store.query(project, { sort_by: [{ field: 'id', direction: 'asc' }] })
          views.push(JSON.stringify(calls.map(({ project_id: _p, ...rest }) => rest)))
        }
        for (let k = 1; k < views.length; k++) t.equal(views[k], views[0], `seed ${seed}: order ${k} merges like order 0`)
      }
      if (compactParts < 1000)
        t.ok(
          store.segments.filter((s) => s.level === 1).length > 1,
          `compaction wrote several id-range segments (${store.segments.length} segments)`,
        )
    },
  )

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
