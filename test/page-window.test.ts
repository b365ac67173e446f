import t, { type Test } from 'tap'
import { rm } from 'node:fs/promises'
import type { CallPart, QueryOptions } from '../src/calls/model.js'
import { CallStore } from '../src/calls/store.js'
import { foldParts } from '../src/calls/ingest/parts.js'
import { pageNewer } from '../src/calls/read/page-index.js'
import { mergedPagePaths } from '../src/calls/read/order.js'
import { tempDir } from './helpers/server.js'
import { hourTraces } from './helpers/page-traces.js'
import { rng } from './helpers/rng.js'
import { shuffle } from './helpers/merge-order.js'

// Without a page index (a store below its size, or the tail alone) a newest-first page merges the calls started since
// the rows-th newest start part, widening while that holds too few (read/order.ts, mergedPageIds). Small windows here,
// so that pages cross several.
pageNewer.firstRows = 2
pageNewer.perCall = 1

const desc = [{ field: 'started_at', direction: 'desc' as const }]
const slow = { $expr: { $gt: [{ $getField: 'summary.weave.latency_ms' }, { $literal: 60_500 }] } }
const pages: QueryOptions[] = [
  { sort_by: desc, limit: 7 },
  { sort_by: desc, limit: 1000 },
  { sort_by: desc, limit: 5, offset: 13 },
  { sort_by: desc, limit: 6, filter: { op_names: ['op1'] } },
  { sort_by: desc, limit: 4, filter: { trace_roots_only: true } },
  { sort_by: desc, limit: 9, filter: { op_names: ['op0', 'op2'], trace_roots_only: true }, query: slow },
  { sort_by: desc, limit: 3, query: slow, offset: 2 },
]

/** Each page windowed, and as the whole merge answers it (the same order with a second key, which is not windowed). */
async function comparePages(t: Test, store: CallStore, project: string, when: string): Promise<void> {
  const before = mergedPagePaths.windows
  for (const q of pages) {
    const windowed = await store.query(project, q)
    const whole = await store.query(project, { ...q, sort_by: [...q.sort_by!, { field: 'id', direction: 'asc' }] })
    t.same(windowed, whole, `${when}: ${JSON.stringify({ ...q, sort_by: undefined })}`)
  }
  t.ok(mergedPagePaths.windows > before, `${when}: pages were merged in windows`)
}

t.test('newest-first pages merged in windows equal the whole merge, in the tail, segments and both', async (t) => {
  const dir = tempDir()
  t.teardown(() => rm(dir, { recursive: true, force: true }))
  const store = await CallStore.open(dir, { flushRows: 1_000_000, flushIntervalMs: 0, maxSegments: 100 })
  t.teardown(() => store.close())
  for (let seed = 1; seed <= 3; seed++) {
    const r = rng(seed)
    const project = `window/s${seed}`
    const parts = shuffle(hourTraces(project, 12, r), r)
    const send = async (xs: CallPart[]) => {
      for (let i = 0; i < xs.length;) {
        const n = 1 + Math.floor(r() * 8)
        await store.ingest(r() < 0.5 ? foldParts(xs.slice(i, i + n)) : xs.slice(i, i + n))
        i += n
      }
    }
    const cut = Math.floor(parts.length * 0.6)
    await send(parts.slice(0, cut))
    await comparePages(t, store, project, `seed ${seed} tail`)
    await store.flush()
    await send(parts.slice(cut))
    // Starts sent again with another time: the later part wins, moving a call into the newest window or out of it.
    const starts = parts.filter((p) => p.kind === 'start' && p.started_us != null)
    const again = shuffle(starts, r)
      .slice(0, 6)
      .map((p, i) => ({ ...p, started_us: String(BigInt(p.started_us!) + BigInt(i % 2 ? 1 : -1) * 900n * 3_600_000_000n) }))
    await store.ingest(again)
    const ids = [...new Set(parts.map((p) => p.id))]
    const deleted = shuffle(ids, r).slice(0, 3)
    await store.ingest(
      deleted.map((id) => ({ kind: 'delete' as const, project_id: project, id, deleted_us: String(BigInt(Date.now()) * 1000n) })),
    )
    await comparePages(t, store, project, `seed ${seed} segment and tail`)
    await store.flush()
    await comparePages(t, store, project, `seed ${seed} segments`)
  }
  t.ok(mergedPagePaths.whole > 0, 'some pages widened until they merged everything (rare filters, offsets)')
})
