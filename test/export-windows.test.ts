import t, { type Test } from 'tap'
import { rm } from 'node:fs/promises'
import type { CallPart, CallRecord, QueryOptions } from '../src/calls/model.js'
import { CallStore } from '../src/calls/store.js'
import { endPart, foldParts, startPart } from '../src/calls/ingest/parts.js'
import { tempDir } from './helpers/server.js'
import { rng } from './helpers/rng.js'
import { hex, shuffle } from './helpers/merge-order.js'

/**
 * An export in start-time order over a large compacted project is read in windows of start time, one statement
 * each (read/windows.ts). Its answer must be the whole query's: every live call once, in order, each as merged.
 * The order is computed here from the parts sent; the calls are compared with pages of the same query, which
 * merge every part of the calls they hold. Windows of 2,048 calls (WEFT_EXPORT_WINDOW_CALLS) over 40,000 calls in
 * five row groups, with late parts (ends of settled calls, new calls between old ones, deletes) flushed and in the tail;
 * each export read by the reader pool's workers and in-process.
 */

process.env.WEFT_EXPORT_WINDOW_CALLS = '2048'
const PROJECT = 'windows/p'
const CALLS = 40_000
const T0 = Date.UTC(2026, 0, 1)

/** A UUIDv7-like id: milliseconds first, so ids sort by start time as the SDKs' do. */
const v7 = (ms: number, r: () => number) => {
  const h = ms.toString(16).padStart(12, '0')
  return `${h.slice(0, 8)}-${h.slice(8)}-7${hex(r, 3)}-8${hex(r, 3)}-${hex(r, 12)}`
}

interface Call {
  id: string
  started: number
  op: string
  deleted: boolean
}

function start(c: Call, r: () => number): CallPart {
  return startPart(
    {
      project_id: PROJECT,
      id: c.id,
      trace_id: hex(r, 32),
      op_name: c.op,
      started_at: new Date(c.started).toISOString(),
      inputs: { v: hex(r, 40) },
      attributes: {},
    },
    'u',
  )
}

const end = (c: Call, r: () => number): CallPart =>
  endPart({ project_id: PROJECT, id: c.id, ended_at: new Date(c.started + 500).toISOString(), output: { o: hex(r, 20) }, summary: {} })

const del = (c: Call): CallPart => ({ kind: 'delete', project_id: PROJECT, id: c.id, deleted_us: String(BigInt(Date.now()) * 1000n) })

/** The live calls' ids in start-time order (ties by id), as the query's order says, computed from the calls sent. */
function expected(calls: Call[], filter: (c: Call) => boolean, desc: boolean): string[] {
  const live = calls.filter((c) => !c.deleted && filter(c))
  live.sort((a, b) => (a.started - b.started) * (desc ? -1 : 1) || (a.id < b.id ? -1 : a.id > b.id ? 1 : 0))
  return live.map((c) => c.id)
}

/** The export as JSON and as Arrow ids, through the reader pool (WEFT_READERS=2) or in-process (0). */
async function exported(store: CallStore, opts: QueryOptions, pool = true): Promise<{ json: CallRecord[]; arrow: string[] }> {
  process.env.WEFT_READERS = pool ? '2' : '0'
  try {
    const json: CallRecord[] = []
    for await (const chunk of await store.stream(PROJECT, opts)) json.push(...chunk)
    const arrow: string[] = []
    for await (const b of (await store.streamArrow(PROJECT, opts)).batches) arrow.push(...(b.getChild('id')!.toArray() as string[]))
    return { json, arrow }
  } finally {
    delete process.env.WEFT_READERS
  }
}

/** Reads the reader pool has taken up (0 before its first). */
const pooledReads = (store: CallStore) => store.readerStats?.reads ?? 0

/** The same query's calls by pages of 5,000 (each merging every part of its calls). */
async function paged(store: CallStore, opts: QueryOptions): Promise<CallRecord[]> {
  const out: CallRecord[] = []
  for (let offset = 0; ; offset += 5000) {
    const page = await store.query(PROJECT, { ...opts, limit: 5000, offset })
    out.push(...page)
    if (page.length < 5000) return out
  }
}

/** The first place two lists differ (-1: none); a failing t.same of 40,000 calls takes minutes to print. */
function firstDiff(a: readonly unknown[], b: readonly unknown[]): number {
  for (let i = 0; i < Math.max(a.length, b.length); i++) if (JSON.stringify(a[i]) !== JSON.stringify(b[i])) return i
  return -1
}

async function check(t: Test, store: CallStore, calls: Call[], what: string, pages = false) {
  const cases: [string, QueryOptions, (c: Call) => boolean, boolean][] = [
    ['oldest first', {}, () => true, false],
    ['newest first', { sort_by: [{ field: 'started_at', direction: 'desc' }] }, () => true, true],
    [
      'one op, newest first',
      { filter: { op_names: ['op1'] }, sort_by: [{ field: 'started_at', direction: 'desc' }] },
      (c) => c.op === 'op1',
      true,
    ],
  ]
  for (const [name, opts, filter, desc] of cases)
    for (const pool of [true, false]) {
      const how = `${what}, ${name}, ${pool ? 'reader pool' : 'in-process'}`
      const [windows, reads] = [store.exportWindows, pooledReads(store)]
      const { json, arrow } = await exported(store, opts, pool)
      const ids = expected(calls, filter, desc)
      t.equal(pooledReads(store) - reads, pool ? 2 : 0, `${how}: ${pool ? 'both answers' : 'neither'} read by the pool`)
      t.ok(store.exportWindows - windows >= 4, `${how}: read in windows (${store.exportWindows - windows})`)
      t.equal(json.length, ids.length, `${how}: every live call once (${ids.length})`)
      t.equal(
        firstDiff(
          json.map((c) => c.id),
          ids,
        ),
        -1,
        `${how}: in order`,
      )
      t.equal(firstDiff(arrow, ids), -1, `${how}: Arrow, the same calls in order`)
      if (pages) t.equal(firstDiff(json, await paged(store, opts)), -1, `${how}: each call as the merge has it`)
    }
}

t.test('an export read in windows of start time answers as the whole query', async (t) => {
  const dir = tempDir()
  t.teardown(() => rm(dir, { recursive: true, force: true }))
  const store = await CallStore.open(dir, { flushIntervalMs: 0, maxSegments: 1000 })
  t.teardown(() => store.close())
  const r = rng(5)
  const calls: Call[] = []
  // Calls 10 s apart, a few sharing a start time (ties are ordered by id, and a tie may sit on a window's edge).
  for (let i = 0; i < CALLS; i++) {
    const started = T0 + i * 10_000 - (r() < 0.05 ? 10_000 : 0)
    calls.push({ id: v7(started, r), started, op: `op${Math.floor(r() * 3)}`, deleted: false })
  }
  const open = new Set(shuffle(calls, r).slice(0, 300))
  const parts = calls.flatMap((c) => (open.has(c) ? [start(c, r)] : [start(c, r), end(c, r)]))
  for (let i = 0; i < parts.length; i += 5000) await store.ingest(foldParts(parts.slice(i, i + 5000)))
  await store.flush()
  await store.compact()
  t.ok(store.segments.length > 0 && store.segments.every((s) => s.level === 1), 'compacted only')
  await check(t, store, calls, 'compacted', true)

  // Late parts: the open calls end, new calls start between old ones, some calls are deleted; half flushed, half in the tail.
  const late: CallPart[] = [...open].map((c) => end(c, r))
  for (let i = 0; i < 500; i++) {
    const started = T0 + Math.floor(r() * CALLS) * 10_000 + 1 + Math.floor(r() * 9_000)
    const c = { id: v7(started, r), started, op: `op${Math.floor(r() * 3)}`, deleted: false }
    calls.push(c)
    late.push(start(c, r), end(c, r))
  }
  const gone = shuffle(calls, r).slice(0, 200)
  for (const c of gone) c.deleted = true
  late.push(...gone.map(del))
  const mixed = shuffle(late, r)
  await store.ingest(foldParts(mixed.slice(0, mixed.length >> 1)))
  await store.flush()
  await store.ingest(foldParts(mixed.slice(mixed.length >> 1)))
  t.ok(
    store.segments.some((s) => !s.level),
    'a flushed segment beside the compacted one',
  )
  await check(t, store, calls, 'late parts flushed and in the tail', true)
})

t.test('random ids (row groups overlapping in time) are read whole', async (t) => {
  const dir = tempDir()
  t.teardown(() => rm(dir, { recursive: true, force: true }))
  const store = await CallStore.open(dir, { flushIntervalMs: 0, maxSegments: 1000 })
  t.teardown(() => store.close())
  const r = rng(6)
  const calls: Call[] = Array.from({ length: 20_000 }, (_, i) => ({
    id: `${hex(r, 8)}-${hex(r, 4)}-4${hex(r, 3)}-8${hex(r, 3)}-${hex(r, 12)}`,
    started: T0 + i * 1000,
    op: 'op0',
    deleted: false,
  }))
  await store.ingest(foldParts(calls.flatMap((c) => [start(c, r), end(c, r)])))
  await store.flush()
  await store.compact()
  for (const pool of [true, false]) {
    const before = store.exportWindows
    const { json } = await exported(store, {}, pool)
    t.equal(store.exportWindows, before, `${pool ? 'reader pool' : 'in-process'}: no windows`)
    t.equal(
      firstDiff(
        json.map((c) => c.id),
        expected(calls, () => true, false),
      ),
      -1,
      `${pool ? 'reader pool' : 'in-process'}: in order`,
    )
  }
})
