import fs from 'node:fs/promises'
import path from 'node:path'
import { hit } from '../../core/failpoints.js'

/** One immutable Parquet file of call parts. */
export interface Segment {
  file: string
  rows: number
  min_seq: number
  max_seq: number
  bytes: number
  /** 1 for the output of a compaction (one id range each), absent for a flush. */
  level?: 1
  /**
   * A compacted segment's page index (src/calls/index/): its light columns sorted newest first. Derived
   * data: written before the manifest names it, rebuilt when missing or unreadable.
   */
  index?: string
  /** Its block file (page-blocks.ts): the calls' answer rows in the index's order. Derived, written with the index. */
  blocks?: string
}

/** A segment's files: the segment itself, and its page index and block file when it has them. */
export function ownFiles(x: Segment): string[] {
  return [x.file, ...(x.index ? [x.index] : []), ...(x.blocks ? [x.blocks] : [])]
}

/**
 * What the calls directory holds: the live segments, and the write-ahead logs whose parts are
 * not in a segment yet, oldest first (the last one takes new appends).
 */
export interface Manifest {
  version: 1
  segments: Segment[]
  wals: string[]
  next_file: number
}

export const MANIFEST = 'manifest.json'
const NAME = /^(seg-\d{6}\.parquet|wal-\d{6}\.log|idx-\d{6}\.pidx|blk-\d{6}\.pblk)$/

const EXT = { seg: 'parquet', wal: 'log', idx: 'pidx', blk: 'pblk' } as const

/** Page index files are Parquet too, named apart so that `*.parquet` still lists the segments alone. */
export function fileName(kind: keyof typeof EXT, n: number): string {
  return `${kind}-${String(n).padStart(6, '0')}.${EXT[kind]}`
}

/** Names in the manifest end up inside SQL text (read_parquet lists cannot be bound): only ours pass. */
export function checkName(name: string): string {
  if (!NAME.test(name)) throw new Error(`unexpected file name in the calls manifest: ${JSON.stringify(name)}`)
  return name
}

export async function fsyncPath(p: string): Promise<void> {
  const fh = await fs.open(p, 'r')
  try {
    await fh.sync()
  } finally {
    await fh.close()
  }
}

export async function readManifest(dir: string): Promise<Manifest | null> {
  try {
    const m = JSON.parse(await fs.readFile(path.join(dir, MANIFEST), 'utf8')) as Manifest
    m.segments.forEach((s) => {
      checkName(s.file)
      if (s.index !== undefined) checkName(s.index)
      if (s.blocks !== undefined) checkName(s.blocks)
    })
    m.wals.forEach(checkName)
    return m
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'ENOENT') return null
    // The manifest is the list of what the store holds: a start without it could only guess, so it refuses.
    const file = path.join(dir, MANIFEST)
    throw new Error(
      `the calls manifest ${file} cannot be read (${(e as Error).message}); the segments and logs it lists are untouched: repair or restore the file to start`,
    )
  }
}

/** Atomically: a reader sees the old manifest or the new one, never a mix, also across a crash. */
export async function writeManifest(dir: string, m: Manifest): Promise<void> {
  const tmp = path.join(dir, MANIFEST + '.tmp')
  await fs.writeFile(tmp, JSON.stringify(m, null, 1))
  await fsyncPath(tmp)
  hit('manifest.before-rename')
  await fs.rename(tmp, path.join(dir, MANIFEST))
  hit('manifest.after-rename')
  await fsyncPath(dir)
}
