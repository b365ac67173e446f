import type { Test } from 'tap'
import { rm } from 'node:fs/promises'
import type { CallPart } from '../../src/calls/model.js'
import { CallStore } from '../../src/calls/store.js'
import { endPart, foldParts, startPart } from '../../src/calls/ingest/parts.js'
import { tempDir } from './server.js'
import { rng } from './rng.js'

export function shuffle<T>(xs: T[], r: () => number): T[] {
  const a = [...xs]
  for (let i = a.length - 1; i > 0; i--) {
    const j = Math.floor(r() * (i + 1))
    ;[a[i], a[j]] = [a[j]!, a[i]!]
  }
  return a
}

export const hex = (r: () => number, n: number) => Array.from({ length: n }, () => Math.floor(r() * 16).toString(16)).join('')

/** Parts of one random trace: starts, ends (some with exceptions), display-name updates, duplicates. */
export function traceParts(project: string, r: () => number): CallPart[] {
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

/** 15 in the suite (25 before the suite neared its 20 minutes); more with MERGE_ORDER_SEEDS. */
const SEEDS = Number(process.env.MERGE_ORDER_SEEDS ?? 15)

/**
 * The merged view must not depend on the order parts arrive in: MERGE_ORDER_SEEDS (default 15) seeds of random traces, each ingested in
 * four orders (as sent, reversed, two shuffles) with the store's flush and compaction settings given.
 */
export async function mergeOrderCase(t: Test, flushRows: number, maxSegments: number, compactParts: number): Promise<void> {
  const dir = tempDir()
  t.teardown(() => rm(dir, { recursive: true, force: true }))
  const store = await CallStore.open(dir, { flushRows, flushIntervalMs: 0, maxSegments, compactParts })
  t.teardown(() => store.close())
  for (let seed = 1; seed <= SEEDS; seed++) {
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
      // Every fifth seed, a newest-first page too: after a compaction it is read from the page index, merged
      // with later parts (test/page-index.test.ts compares such pages with the merged view at length).
      const page = seed % 5 === 0 ? await store.query(project, { sort_by: [{ field: 'started_at', direction: 'desc' }], limit: 6 }) : []
      views.push(JSON.stringify([calls, page].map((cs) => cs.map(({ project_id: _p, ...rest }) => rest))))
    }
    for (let k = 1; k < views.length; k++) t.equal(views[k], views[0], `seed ${seed}: order ${k} merges like order 0`)
  }
  if (compactParts < 1000)
    t.ok(
      store.segments.filter((s) => s.level === 1).length > 1,
      `compaction wrote several id-range segments (${store.segments.length} segments)`,
    )
}
