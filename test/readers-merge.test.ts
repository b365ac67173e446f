import t from 'tap'
import { rm } from 'node:fs/promises'
import type { CallPart, CallRecord, QueryOptions } from '../src/calls/model.js'
import { CallStore } from '../src/calls/store.js'
import { foldParts } from '../src/calls/ingest/parts.js'
import { tempDir } from './helpers/server.js'
import { exportArrowRows, exportCalls } from './helpers/readers.js'
import { rng } from './helpers/rng.js'
import { shuffle, traceParts } from './helpers/merge-order.js'

/**
 * Exports through the reader pool must answer exactly as the in-process read does, whatever mix of
 * tail, flushed and compacted data a call's parts sit in: random traces (with deletes) ingested in
 * random batches, flushes and compactions at random points, the last batches still in the tail.
 */

/** The live calls the parts make, by a model of their own: started, never deleted; in (started, id) order. */
function expectedIds(parts: CallPart[]): string[] {
  const started = new Map<string, bigint>()
  const deleted = new Set<string>()
  for (const p of parts) {
    if (p.started_us !== undefined && p.started_us !== null) started.set(p.id, BigInt(p.started_us))
    if (p.kind === 'delete') deleted.add(p.id)
  }
  return [...started]
    .filter(([id]) => !deleted.has(id))
    .sort(([a, x], [b, y]) => (x < y ? -1 : x > y ? 1 : a < b ? -1 : a > b ? 1 : 0))
    .map(([id]) => id)
}

const QUERIES: [string, QueryOptions][] = [
  ['default order', {}],
  ['op name descending', { sort_by: [{ field: 'op_name', direction: 'desc' }] }],
  ['a JSON field', { sort_by: [{ field: 'inputs.v', direction: 'asc' }] }],
  ['ended_at descending, offset', { sort_by: [{ field: 'ended_at', direction: 'desc' }], offset: 7 }],
  ['roots only, limit past a page', { filter: { trace_roots_only: true }, limit: 10_005, offset: 2 }],
]

const SEEDS = 6

t.test('exports through the pool merge tail, flushed and compacted parts as the in-process read does', async (t) => {
  const dir = tempDir()
  t.teardown(() => rm(dir, { recursive: true, force: true }))
  const store = await CallStore.open(dir, { flushIntervalMs: 0, maxSegments: 1000, compactParts: 200 })
  t.teardown(() => store.close())
  let pooledReads = 0
  for (let seed = 1; seed <= SEEDS; seed++) {
    const r = rng(seed * 31)
    const project = `mix${seed}/p`
    const traces = Array.from({ length: 12 }, () => traceParts(project, r)).flat()
    // Some calls deleted (a delete may arrive before the call's other parts).
    const ids = [...new Set(traces.map((p) => p.id))]
    const deletes: CallPart[] = ids
      .filter(() => r() < 0.15)
      .map((id) => ({ kind: 'delete', project_id: project, id, deleted_us: '1800000000000000' }))
    const parts = shuffle([...traces, ...deletes], r)
    for (let i = 0; i < parts.length;) {
      const n = 1 + Math.floor(r() * 12)
      const batch = parts.slice(i, i + n)
      await store.ingest(r() < 0.5 ? foldParts(batch) : batch)
      i += n
      // Flushes and compactions at random points, the last ~third of the parts left in the tail.
      if (i < (parts.length * 2) / 3) {
        const x = r()
        if (x < 0.25) await store.flush()
        else if (x < 0.32) await store.compact()
      }
    }
    t.ok(store.segments.length > 0, `seed ${seed}: ${store.segments.length} segments, the rest in the tail`)
    const expected = expectedIds(parts)
    const before = store.readerStats?.completed ?? 0
    const all = await exportCalls(store, project, {}, true)
    t.same(
      all.map((c) => c.id),
      expected,
      `seed ${seed}: the pooled export holds the live calls, in order (model of the parts)`,
    )
    for (const [name, q] of QUERIES) {
      t.same(await exportCalls(store, project, q, true), await exportCalls(store, project, q, false), `seed ${seed}, ${name}: JSON`)
    }
    const unordered = (xs: CallRecord[]) => JSON.stringify([...xs].sort((a, b) => (String(a.id) < String(b.id) ? -1 : 1)))
    t.equal(
      unordered(await exportCalls(store, project, { sort_by: [] }, true)),
      unordered(await exportCalls(store, project, { sort_by: [] }, false)),
      `seed ${seed}, no order: the same calls`,
    )
    t.same(
      await exportArrowRows(store, project, { sort_by: [{ field: 'started_at', direction: 'desc' }] }, true),
      await exportArrowRows(store, project, { sort_by: [{ field: 'started_at', direction: 'desc' }] }, false),
      `seed ${seed}: Arrow`,
    )
    pooledReads += (store.readerStats?.completed ?? 0) - before
  }
  t.ok(pooledReads >= SEEDS * (QUERIES.length + 3), `the pool ran the pooled reads (${pooledReads})`)
})
