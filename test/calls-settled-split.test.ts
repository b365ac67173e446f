import t, { type Test } from 'tap'
import { rm } from 'node:fs/promises'
import type { CallPart } from '../src/calls/model.js'
import { CallStore } from '../src/calls/store.js'
import { foldParts } from '../src/calls/ingest/parts.js'
import { tempDir } from './helpers/server.js'
import { rng } from './helpers/rng.js'
import { hex, shuffle, traceParts } from './helpers/merge-order.js'

/**
 * A whole query (an export) reads a call with no fresh parts as its compacted row, unmerged, and merges only the
 * calls with parts in a flushed segment or the tail (read/merged.ts settledSplit). Its answer must be the merge's:
 * compared here with pages of the same query, which merge every part of the calls they hold (order.ts fetchSql),
 * over a store holding compacted, flushed and tail parts, deletes in each, and ref lists with repeats.
 */

const PROJECT = 'split/p'
const ref = (r: () => number) => `weave:///split/p/object/o${Math.floor(r() * 4)}:${hex(r, 8)}`

/** Traces whose inputs and outputs hold refs (some repeated, so the ref lists need making distinct). */
function partsWithRefs(r: () => number): CallPart[] {
  const parts = traceParts(PROJECT, r)
  for (const p of parts) {
    if (p.kind === 'start' && r() < 0.5) {
      const a = ref(r)
      const b = ref(r)
      Object.assign(p, { inputs: JSON.stringify({ a, again: a, b, v: r() }), input_refs: [a, a, b] })
    }
    if (p.kind === 'end' && r() < 0.5) {
      const x = ref(r)
      Object.assign(p, { output: JSON.stringify({ x }), output_refs: [x] })
    }
  }
  return parts
}

const byId = { sort_by: [{ field: 'id', direction: 'asc' as const }] }

async function compare(t: Test, store: CallStore, what: string): Promise<number> {
  const whole = await store.query(PROJECT, byId)
  const paged: unknown[] = []
  for (let offset = 0; ; offset += 40) {
    const page = await store.query(PROJECT, { ...byId, limit: 40, offset })
    paged.push(...page)
    if (page.length < 40) break
  }
  t.same(whole, paged, `${what}: the whole query equals its pages (${whole.length} calls)`)
  return whole.length
}

t.test('a whole query over compacted, flushed and tail parts answers as the merge does', async (t) => {
  const dir = tempDir()
  t.teardown(() => rm(dir, { recursive: true, force: true }))
  const store = await CallStore.open(dir, { flushIntervalMs: 0, maxSegments: 1000 })
  t.teardown(() => store.close())
  const r = rng(11)
  const parts = shuffle(Array.from({ length: 40 }, () => partsWithRefs(r)).flat(), r)
  const cut = Math.floor(parts.length * 0.7)
  await store.ingest(foldParts(parts.slice(0, cut)))
  const ids = [...new Set(parts.map((p) => p.id))]
  const del = (n: number) =>
    shuffle(ids, r)
      .slice(0, n)
      .map((id) => ({ kind: 'delete' as const, project_id: PROJECT, id, deleted_us: String(BigInt(Date.now()) * 1000n) }))
  await store.ingest(del(3))
  await store.flush()
  await store.compact()
  t.ok(store.segments.length > 0 && store.segments.every((s) => s.level === 1), 'compacted only')
  const compacted = await compare(t, store, 'compacted')
  t.ok(compacted > 100, 'calls to compare')
  // Late parts: half flushed into a newer segment, half in the tail; more deletes in each.
  const late = parts.slice(cut)
  await store.ingest(late.slice(0, late.length >> 1))
  await store.ingest(del(2))
  await store.flush()
  await store.ingest(late.slice(late.length >> 1))
  await store.ingest(del(2))
  t.ok(
    store.segments.some((s) => !s.level),
    'a flushed segment beside the compacted ones',
  )
  await compare(t, store, 'late parts flushed and in the tail')
  await store.flush()
  await store.compact()
  await compare(t, store, 'compacted again')
})
