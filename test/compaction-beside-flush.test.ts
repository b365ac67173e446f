import t from 'tap'
import { randomBytes } from 'node:crypto'
import { rm } from 'node:fs/promises'
import type { CallPart } from '../src/calls/model.js'
import { CallStore } from '../src/calls/store.js'
import { tempDir } from './helpers/server.js'

// A compaction folds its segments beside flushes (issue 18): in a 30-minute soak at 2,500 calls/s each compaction
// took 3-7 minutes, flushes waited for it, and the tail grew to 1.3M parts. Here a flush is asked for while a
// compaction folds ~24,000 calls: it must finish first (the tail is emptied while the fold goes on), the compaction
// must keep the flush's segment when it swaps, and every call must be there once, before and after a restart.

const P = 'acme/compaction-beside-flush'
const hex = (n: number) => randomBytes(n).toString('hex')

function calls(n: number): { parts: CallPart[]; ids: string[] } {
  const parts: CallPart[] = []
  const ids: string[] = []
  const t0 = Date.now() * 1000
  for (let i = 0; i < n; i++) {
    const id = hex(8)
    ids.push(id)
    const input = JSON.stringify({ q: hex(200) })
    parts.push(
      { kind: 'start', project_id: P, id, trace_id: hex(16), op_name: 'op', started_us: t0 + i, inputs: input, attributes: '{}' },
      { kind: 'end', project_id: P, id, ended_us: t0 + i + 1000, output: JSON.stringify(hex(200)), summary: '{}' },
    )
  }
  return { parts, ids }
}

async function allIds(store: CallStore): Promise<string[]> {
  return (await store.query(P, { limit: 1_000_000 })).map((c) => String(c.id)).sort()
}

t.test('a flush asked for during a compaction finishes before it, and the swap keeps its segment', async (t) => {
  const dir = tempDir('compaction-beside-flush-')
  t.teardown(() => rm(dir, { recursive: true, force: true }))
  let store = await CallStore.open(dir, { flushIntervalMs: 0, maxSegments: 100 })
  const sent: string[] = []
  for (let s = 0; s < 3; s++) {
    for (let b = 0; b < 8; b++) {
      const { parts, ids } = calls(1000)
      await store.ingest(parts)
      sent.push(...ids)
    }
    await store.flush()
  }
  t.equal(store.segments.filter((x) => !x.level).length, 3, 'three flushed segments to fold')

  let compacted = false
  const compaction = store.compact().then(() => (compacted = true))
  // The compaction has chosen its segments (its first step, in turn with flushes) once a flush can follow it.
  const late = calls(50)
  await store.ingest(late.parts)
  sent.push(...late.ids)
  await store.flush()
  t.equal(compacted, false, 'the flush finished while the compaction was folding')
  t.equal(store.stats().tail_parts, 0, 'the tail is empty')
  await compaction
  const flushed = store.segments.filter((x) => !x.level)
  t.equal(flushed.length, 1, "the flush's segment is kept beside the compacted ones")
  t.equal(flushed[0]!.rows, 100, 'holding the 50 late calls')
  t.ok(
    store.segments.some((x) => x.level),
    'the three folded segments are compacted',
  )

  const expected = [...sent].sort()
  t.same(await allIds(store), expected, 'every call once')
  const before = store.segments.map((x) => x.file)
  await store.close()
  store = await CallStore.open(dir, { flushIntervalMs: 0, maxSegments: 100 })
  t.teardown(() => store.close())
  t.same(await allIds(store), expected, 'and again after a restart')
  t.same(
    store.segments.map((x) => x.file),
    before,
    'the manifest names the segments the store had',
  )
})
