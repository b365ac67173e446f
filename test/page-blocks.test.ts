import t, { type Test } from 'tap'
import { open, readFile, rm, writeFile } from 'node:fs/promises'
import path from 'node:path'
import type { QueryOptions } from '../src/calls/model.js'
import { CallStore } from '../src/calls/store.js'
import { foldParts } from '../src/calls/ingest/parts.js'
import { pageWindow } from '../src/calls/read/page-index.js'
import { blockReads, pageBlocksLayout } from '../src/calls/storage/page-blocks.js'
import { pageIndexLayout } from '../src/calls/storage/page-index.js'
import { tempDir } from './helpers/server.js'
import { hourTraces } from './helpers/page-traces.js'
import { rng } from './helpers/rng.js'
import { shuffle } from './helpers/merge-order.js'

// Small index row groups, windows and blocks, so that a page here crosses all three as at 10M calls.
pageIndexLayout.rowGroup = 16
pageIndexLayout.minParts = 0
pageWindow.firstRows = 10
pageBlocksLayout.perBlock = 4

const desc = [{ field: 'started_at', direction: 'desc' as const }]

function pages(): QueryOptions[] {
  const slow = { $expr: { $gt: [{ $getField: 'summary.weave.latency_ms' }, { $literal: 60_500 }] } }
  return [
    { sort_by: desc, limit: 1000 },
    { sort_by: desc, limit: 5, offset: 3 },
    { sort_by: desc, limit: 6, filter: { op_names: ['op1'], trace_roots_only: true }, query: slow },
  ]
}

/**
 * Each page three ways: block files (the default), by id (`WEFT_PAGE_BLOCKS=off`), and the merged view (a
 * second sort key the index path does not take); query and stream. Returns the calls the blocks gave.
 */
async function compare(t: Test, store: CallStore, project: string, when: string): Promise<number> {
  const before = blockReads.calls
  for (const q of pages()) {
    const blocks = await store.query(project, q)
    const streamed: unknown[] = []
    for await (const chunk of await store.stream(project, q)) streamed.push(...chunk)
    process.env.WEFT_PAGE_BLOCKS = 'off'
    const byId = await store.query(project, q)
    delete process.env.WEFT_PAGE_BLOCKS
    const merged = await store.query(project, { ...q, sort_by: [...desc, { field: 'id', direction: 'asc' }] })
    const what = `${when}: ${JSON.stringify({ ...q, sort_by: undefined })}`
    t.same(blocks, merged, `${what}: blocks = merged view`)
    t.same(byId, merged, `${what}: by id = merged view`)
    t.same(streamed, merged, `${what}: streamed = merged view`)
  }
  return blockReads.calls - before
}

async function open2(dir: string) {
  return CallStore.open(dir, { flushRows: 25, flushIntervalMs: 0, maxSegments: 100, compactParts: 150 })
}

t.test('pages from block files equal the merged view across compacted, flushed and tail parts', async (t) => {
  const dir = tempDir()
  t.teardown(() => rm(dir, { recursive: true, force: true }))
  const store = await open2(dir)
  t.teardown(() => store.close())
  const r = rng(5)
  const project = 'blocks/mixed'
  const parts = shuffle(hourTraces(project, 14, r), r)
  const cut = Math.floor(parts.length * 0.7)
  await store.ingest(foldParts(parts.slice(0, cut)))
  await store.flush()
  await store.compact()
  t.ok(
    store.segments.every((s) => !s.level || (s.index && s.blocks)),
    'every compacted segment has its index and block file',
  )
  // Written off the event loop: by the block-file writer's worker thread (the main thread's id is 0).
  const written = store.stats().block_files
  t.ok(written.written >= store.segments.filter((s) => s.level).length, `block files written by the writer (${written.written})`)
  t.ok(Number(written.last_thread_id) > 0, `on a worker thread (id ${written.last_thread_id})`)
  t.ok((await compare(t, store, project, 'compacted')) > 0, 'compacted: calls came from the block files')
  // Late parts (ends, updates, duplicates) and deletes: some flushed into a newer segment, some in the tail.
  const late = parts.slice(cut)
  await store.ingest(late.slice(0, late.length >> 1))
  await store.flush()
  await store.ingest(late.slice(late.length >> 1))
  const ids = [...new Set(parts.map((p) => p.id))]
  await store.ingest(
    shuffle(ids, r)
      .slice(0, 4)
      .map((id) => ({ kind: 'delete' as const, project_id: project, id, deleted_us: String(BigInt(Date.now()) * 1000n) })),
  )
  t.ok((await compare(t, store, project, 'late parts')) > 0, 'late parts: calls without newer parts still came from the blocks')
  await store.flush()
  await store.compact()
  await compare(t, store, project, 'compacted again')
})

t.test('a damaged block file: the page fetches by id, logs, and the file is rebuilt', async (t) => {
  const dir = tempDir()
  t.teardown(() => rm(dir, { recursive: true, force: true }))
  const project = 'blocks/damaged'
  let store = await open2(dir)
  await store.ingest(foldParts(hourTraces(project, 30, rng(9))))
  await store.flush()
  await store.compact()
  const q: QueryOptions = { sort_by: desc, limit: 1000 }
  const before = await store.query(project, q)
  t.ok(before.length > 50)
  const blocks = store.segments[0]!.blocks!
  // A flipped byte inside the first blocks: the trailer still reads, the block fails its checksum.
  const fh = await open(path.join(dir, 'calls', blocks), 'r+')
  const b = Buffer.alloc(1)
  await fh.read(b, 0, 1, 40)
  b[0]! ^= 0xff
  await fh.write(b, 0, 1, 40)
  await fh.close()
  const damagedBefore = blockReads.damaged
  t.same(await store.query(project, q), before, 'same page, fetched by id')
  t.equal(blockReads.damaged, damagedBefore + 1, 'the damage was found (and logged) once')
  await store.flush() // runs after the rebuild the damage scheduled
  t.not(store.segments[0]!.blocks, blocks, 'a new block file is named')
  const read = blockReads.calls
  t.same(await store.query(project, q), before, 'same page from the rebuilt file')
  t.ok(blockReads.calls > read, 'read from the rebuilt block file')

  // A directory from before block files (the manifest names none), then a torn one: both rebuilt at start.
  await store.close()
  const manifest = path.join(dir, 'calls', 'manifest.json')
  const m = JSON.parse(await readFile(manifest, 'utf8')) as { segments: { blocks?: string }[] }
  const named = m.segments[0]!.blocks!
  delete m.segments[0]!.blocks
  await writeFile(manifest, JSON.stringify(m))
  store = await open2(dir)
  t.same(await store.query(project, q), before, 'no block file named: same page')
  await store.flush()
  t.ok(store.segments[0]!.blocks && store.segments[0]!.blocks !== named, 'a block file is written for the old directory')
  await store.close()
  const torn = path.join(dir, 'calls', store.segments[0]!.blocks!)
  const fh2 = await open(torn, 'r+')
  await fh2.truncate(100)
  await fh2.close()
  store = await open2(dir)
  t.teardown(() => store.close())
  t.same(await store.query(project, q), before, 'torn block file: same page')
  await store.flush()
  t.not(path.join(dir, 'calls', store.segments[0]!.blocks!), torn, 'the torn file is replaced')
  const read2 = blockReads.calls
  t.same(await store.query(project, q), before, 'same page from the new file')
  t.ok(blockReads.calls > read2, 'read from it')
})
