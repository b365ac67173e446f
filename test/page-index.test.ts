import t, { type Test } from 'tap'
import { readdir, rm, truncate } from 'node:fs/promises'
import path from 'node:path'
import type { CallPart, QueryOptions } from '../src/calls/model.js'
import type { Params } from '../src/query/params.js'
import { CallStore } from '../src/calls/store.js'
import { foldParts } from '../src/calls/ingest/parts.js'
import { indexPageIds, pageIdsPaths, pageNewer, pageWindow } from '../src/calls/read/page-index.js'
import { pageIndexLayout } from '../src/calls/storage/page-index.js'
import { ownFiles } from '../src/calls/storage/segments.js'
import { tempDir } from './helpers/server.js'
import { hourTraces } from './helpers/page-traces.js'
import { rng } from './helpers/rng.js'
import { shuffle } from './helpers/merge-order.js'

// Small row groups and a small first window, so that pages here cross windows and row groups as at 10M calls.
pageIndexLayout.rowGroup = 16
pageIndexLayout.minParts = 0
pageWindow.firstRows = 10
pageNewer.firstRows = 2
pageNewer.perCall = 1

/** The pages asked for: each sorted newest first (the index path), with filters, `$expr` on latency and offsets. */
function pages(r: () => number): QueryOptions[] {
  const desc = [{ field: 'started_at', direction: 'desc' as const }]
  const slow = { $expr: { $gt: [{ $getField: 'summary.weave.latency_ms' }, { $literal: 60_500 }] } }
  return [
    { sort_by: desc, limit: 7 },
    { sort_by: desc, limit: 1000 },
    { sort_by: desc, limit: 5, offset: Math.floor(r() * 20) },
    { sort_by: desc, limit: 6, filter: { op_names: ['op1'] } },
    { sort_by: desc, limit: 4, filter: { trace_roots_only: true } },
    { sort_by: desc, limit: 9, filter: { op_names: ['op0', 'op2'], trace_roots_only: true }, query: slow },
    { sort_by: desc, limit: 8, query: slow },
  ]
}

/**
 * Each page as the index path answers it and as the merged view does (the same order spelt with a second
 * key, which the index path does not take; it breaks ties by id as the first does).
 */
async function comparePages(t: Test, store: CallStore, project: string, r: () => number, when: string): Promise<void> {
  for (const q of pages(r)) {
    const viaIndex = await store.query(project, q)
    const merged = await store.query(project, { ...q, sort_by: [...q.sort_by!, { field: 'id', direction: 'asc' }] })
    t.same(viaIndex, merged, `${when}: ${JSON.stringify({ ...q, sort_by: undefined })}`)
  }
}

async function indexedProject(store: CallStore, project: string): Promise<number> {
  const conn = await store.connect()
  try {
    const r = await conn.runAndReadAll(
      `SELECT count(*)::INTEGER AS n FROM page_index_groups WHERE project_min <= $1 AND project_max >= $1`,
      [project],
    )
    return Number(r.getRowObjectsJS()[0]!.n)
  } finally {
    conn.closeSync()
  }
}

t.test('pages through the page index equal the merged view, whatever order parts arrive in around compactions', async (t) => {
  const dir = tempDir()
  t.teardown(() => rm(dir, { recursive: true, force: true }))
  const store = await CallStore.open(dir, { flushRows: 25, flushIntervalMs: 0, maxSegments: 3, compactParts: 150 })
  t.teardown(() => store.close())
  for (let seed = 1; seed <= 3; seed++) {
    const r = rng(seed)
    const project = `pages/s${seed}`
    const parts = shuffle(hourTraces(project, 12, r), r)
    // Most parts before a compaction, the rest (late ends, starts after their ends, updates, duplicates) after it.
    const cut = Math.floor(parts.length * (0.5 + r() * 0.3))
    const send = async (xs: CallPart[]) => {
      for (let i = 0; i < xs.length;) {
        const n = 1 + Math.floor(r() * 8)
        await store.ingest(r() < 0.5 ? foldParts(xs.slice(i, i + n)) : xs.slice(i, i + n))
        i += n
      }
    }
    await send(parts.slice(0, cut))
    await store.flush()
    await store.compact()
    t.ok(await indexedProject(store, project), `seed ${seed}: the compacted calls are indexed`)
    // Nothing newer than the index: its pages read the index alone (read/page-index.ts).
    const before = { ...pageIdsPaths }
    await comparePages(t, store, project, r, `seed ${seed} compacted`)
    t.ok(pageIdsPaths.index > before.index && pageIdsPaths.merged === before.merged, `seed ${seed}: pages from the index alone`)
    await send(parts.slice(cut))
    const ids = [...new Set(parts.map((p) => p.id))]
    // Starts sent again with another time (a retried start, a clock put right): the later part wins in the merged
    // view, moving a compacted call past every other (into the newest window) or back behind them all.
    const starts = parts.filter((p) => p.kind === 'start' && p.started_us != null)
    const again = shuffle(starts, r)
      .slice(0, 6)
      .map((p, i) => ({ ...p, started_us: String(BigInt(p.started_us!) + BigInt(i % 2 ? 1 : -1) * 900n * 3_600_000_000n) }))
    await store.ingest(again)
    const deleted = shuffle(ids, r).slice(0, 3)
    await store.ingest(
      deleted.map((id) => ({ kind: 'delete' as const, project_id: project, id, deleted_us: String(BigInt(Date.now()) * 1000n) })),
    )
    // Late parts partly flushed into newer segments, partly in the tail.
    const merged = pageIdsPaths.merged
    await comparePages(t, store, project, r, `seed ${seed} late parts`)
    t.ok(pageIdsPaths.merged > merged, `seed ${seed}: pages with newer parts merge them`)
    await store.flush()
    await comparePages(t, store, project, r, `seed ${seed} flushed`)
    await store.compact()
    await comparePages(t, store, project, r, `seed ${seed} compacted again`)
    const live = await store.query(project, { sort_by: [{ field: 'started_at', direction: 'desc' }], limit: 1000 })
    t.notOk(
      live.some((c) => deleted.includes(String(c.id))),
      `seed ${seed}: deleted calls stay deleted`,
    )
  }
  t.ok(store.segments.filter((s) => s.level).length > 1, 'compaction wrote several id-range segments, each with its index')
  t.ok(
    store.segments.every((s) => !s.level || s.index),
    'every compacted segment has a page index',
  )
})

t.test('a compaction removes the segments it folded, their page indexes and block files', async (t) => {
  const dir = tempDir()
  t.teardown(() => rm(dir, { recursive: true, force: true }))
  process.env.WEFT_SEGMENT_RETIRE_MS = '0'
  const store = await CallStore.open(dir, { flushRows: 25, flushIntervalMs: 0, maxSegments: 100, compactParts: 150 })
  delete process.env.WEFT_SEGMENT_RETIRE_MS
  t.teardown(() => store.close())
  const r = rng(7)
  const parts = hourTraces('pages/retire', 12, r)
  const onDisk = async () => (await readdir(path.join(dir, 'calls'))).filter((f) => /\.(parquet|pidx|pblk)$/.test(f)).sort()
  const named = () => store.segments.flatMap(ownFiles).sort()
  for (let round = 0; round < 3; round++) {
    await store.ingest(parts.slice(round * 40, round * 40 + 40))
    await store.flush()
    await store.compact()
    t.ok(
      store.segments.some((s) => s.index),
      `round ${round}: compacted segments have indexes`,
    )
    // Removal is asynchronous (fs.rm after the retire); give it a moment.
    await new Promise((res) => setTimeout(res, 100))
    t.same(await onDisk(), named(), `round ${round}: the files on disk are exactly those the manifest names`)
  }
})

t.test('a missing or damaged page index: pages take the merge path, and the index is rebuilt', async (t) => {
  const dir = tempDir()
  t.teardown(() => rm(dir, { recursive: true, force: true }))
  const r = rng(42)
  const project = 'pages/rebuild'
  let store = await CallStore.open(dir, { flushIntervalMs: 0 })
  await store.ingest(hourTraces(project, 30, r))
  await store.flush()
  await store.compact()
  const q: QueryOptions = { sort_by: [{ field: 'started_at', direction: 'desc' }], limit: 20, filter: { trace_roots_only: true } }
  const before = await store.query(project, q)
  t.equal(before.length, 20)
  const index = store.segments[0]!.index!
  await store.close()
  await truncate(path.join(dir, 'calls', index), 100)
  store = await CallStore.open(dir, { flushIntervalMs: 0 })
  t.teardown(() => store.close())
  t.same(await store.query(project, q), before, 'same page while the damaged index is set aside and rebuilt')
  // The start rebuilds it in turn with flushes and compactions: a flush waits for it.
  await store.flush()
  t.not(store.segments[0]!.index, index, 'a new index file is named')
  t.ok(await indexedProject(store, project), 'and used')
  t.same(await store.query(project, q), before, 'same page through the rebuilt index')
})

t.test('a compacted call started again later: merged from its index row wherever that row lies', async (t) => {
  // Calls 0-3 are the oldest and named by an update, 4 and 5 deleted; all are compacted. Their starts then arrive
  // again, newest of all: each must be merged with its index row (outside the page's window), which holds the name
  // or the deletion. Expected ids worked out here: the four named, tied on started_at, by id; never 4 or 5.
  const dir = tempDir()
  t.teardown(() => rm(dir, { recursive: true, force: true }))
  const store = await CallStore.open(dir, { flushIntervalMs: 0, maxSegments: 100 })
  t.teardown(() => store.close())
  const project = 'pages/restart'
  const hour = 3_600_000_000
  const t0 = 1_767_225_600_000_000
  const id = (i: number) => `0190000000000${String(i).padStart(3, '0')}`
  const start = (i: number, at: number): CallPart => ({ kind: 'start', project_id: project, id: id(i), op_name: 'op', started_us: at })
  const parts: CallPart[] = []
  for (let i = 0; i < 60; i++)
    parts.push(start(i, t0 + i * hour), { kind: 'end', project_id: project, id: id(i), ended_us: t0 + i * hour + 1000 })
  for (let i = 0; i < 4; i++) parts.push({ kind: 'update', project_id: project, id: id(i), display_name: 'named' })
  // Calls 4 and 5 deleted: their index rows are tombstones, which a late start must not undo.
  for (const i of [4, 5]) parts.push({ kind: 'delete', project_id: project, id: id(i), deleted_us: t0 + 70 * hour })
  await store.ingest(parts)
  await store.flush()
  await store.compact()
  t.ok(await indexedProject(store, project), 'the calls are indexed')
  await store.ingest([3, 1, 0, 2, 5, 4].map((i) => start(i, t0 + (i < 4 ? 100 : 200) * hour)))
  const named = { $expr: { $eq: [{ $getField: 'display_name' }, { $literal: 'named' }] } }
  const desc = [{ field: 'started_at', direction: 'desc' as const }]
  const page = await store.query(project, { sort_by: desc, limit: 4, query: named })
  t.same(
    page.map((c) => c.id),
    [0, 1, 2, 3].map(id),
    'the four named calls, now newest',
  )
  t.same(
    (await store.query(project, { sort_by: desc, limit: 6 })).map((c) => c.id),
    [0, 1, 2, 3, 59, 58].map(id),
    'then the newest of the rest; the deleted calls stay deleted',
  )
})

t.test('a page with newer parts: the first window takes two statements (the groups with the newer start, then the ids)', async (t) => {
  const dir = tempDir()
  t.teardown(() => rm(dir, { recursive: true, force: true }))
  const store = await CallStore.open(dir, { flushIntervalMs: 0 })
  t.teardown(() => store.close())
  const project = 'pages/statements'
  const r = rng(7)
  await store.ingest(foldParts(hourTraces(project, 6, r)))
  await store.flush()
  await store.compact()
  // Newer calls in the tail, started after every compacted one.
  const now = BigInt(Date.now()) * 1000n
  await store.ingest(
    Array.from({ length: 5 }, (_, i) => ({
      kind: 'start' as const,
      project_id: project,
      id: `zz-newer-${i}`,
      trace_id: `zz-trace-${i}`,
      op_name: 'op0',
      started_us: String(now + BigInt(i)),
    })),
  )
  await store.visible()
  const conn = await store.connect()
  t.teardown(() => conn.closeSync())
  const sqls: string[] = []
  const readAll = async (sql: string, p: Params) => {
    sqls.push(sql)
    return (await conn.runAndReadAll(sql, p.values as never)).getRowObjectsJS()
  }
  const q: QueryOptions = { sort_by: [{ field: 'started_at', direction: 'desc' }], limit: 2 }
  const found = await indexPageIds(project, q, readAll)
  t.same(found?.ids, ['zz-newer-4', 'zz-newer-3'], 'the newest two')
  t.equal(sqls.length, 2, `statements: ${sqls.map((s) => s.replace(/\s+/g, ' ').slice(0, 40)).join(' | ')}`)
  t.same(
    (await store.query(project, q)).map((c) => c.id),
    found?.ids,
    'the page is the same through the store',
  )
})
