import path from 'node:path'
import type { Storage } from '../storage/storage.js'
import { checkName } from '../storage/segments.js'

/**
 * What a pooled read reads: the segment files of one moment, pinned (a compaction does not remove
 * them while the read runs; storage/pins.ts), and the ids of the project's calls with parts in the
 * tail then. Every part acknowledged before the read is in one or the other: the tail ids are read
 * first, the segment list right after without yielding, and a flush only adds what leaves the tail to
 * the segments before it leaves. The pool answers the calls without tail parts; the main thread answers
 * the others whole (tail-side.ts), so no call is merged from half of its parts.
 */
export interface Snapshot {
  /** The compacted segments' files and the flushed ones' (storage/parquet.ts: settled_parts and fresh_parts). */
  settled: string[]
  fresh: string[]
  tailIds: string[]
  /** Unpins the files (once; later calls do nothing). */
  release: () => void
}

export async function takeSnapshot(storage: Storage, project: string): Promise<Snapshot> {
  await storage.tail.visible()
  const conn = await storage.connect()
  let tailIds: string[]
  try {
    const r = await conn.runAndReadAll('SELECT DISTINCT id FROM call_parts WHERE project_id = $1', [project])
    tailIds = r.getRowsJS().map((row) => String(row[0]))
  } finally {
    conn.closeSync()
  }
  const file = (s: (typeof storage.segments)[number]) => path.join(storage.dir, checkName(s.file))
  const settled = storage.segments.filter((s) => s.level).map(file)
  const fresh = storage.segments.filter((s) => !s.level).map(file)
  return { settled, fresh, tailIds, release: storage.pins.pin([...settled, ...fresh]) }
}
