import { createHash } from 'node:crypto'
import { createReadStream } from 'node:fs'
import fs from 'node:fs/promises'
import path from 'node:path'
import { MANIFEST, checkName, fsyncPath, type Segment } from './segments.js'

/**
 * The SHA-256 of every live segment, recorded right after the flush or compaction that wrote it. Parquet has no
 * checksum DuckDB checks, and a flipped bit in a page can decode to another value: without this a damaged segment
 * would serve wrong answers instead of stopping the start.
 */
export const CHECKSUMS = 'checksums.json'

type Sums = Record<string, string>

async function sha256(file: string): Promise<string> {
  const h = createHash('sha256')
  for await (const chunk of createReadStream(file)) h.update(chunk as Buffer)
  return h.digest('hex')
}

async function readSums(dir: string): Promise<Sums> {
  const text = await fs.readFile(path.join(dir, CHECKSUMS), 'utf8').catch(() => null)
  if (text === null) return {}
  try {
    const parsed = JSON.parse(text) as unknown
    if (parsed && typeof parsed === 'object' && !Array.isArray(parsed)) return parsed as Sums
  } catch {}
  // The sums only check the segments: losing them costs the check of the segments written before, not data.
  process.emitWarning(`calls store: ${CHECKSUMS} cannot be read; the segments' checksums are recorded again from their current bytes`)
  return {}
}

async function writeSums(dir: string, sums: Sums): Promise<void> {
  const tmp = path.join(dir, CHECKSUMS + '.tmp')
  await fs.writeFile(tmp, JSON.stringify(sums))
  await fsyncPath(tmp)
  await fs.rename(tmp, path.join(dir, CHECKSUMS))
  await fsyncPath(dir)
}

/** The error a start stops with: the file named, what is wrong, and what the operator can do. */
export function damagedSegment(file: string, why: string): Error {
  return new Error(
    `calls store: segment ${file} is damaged (${why}); the start stops rather than serve or lose its calls. ` +
      `Restore the file from a backup, or (losing its calls) move it away and remove its entry from ${MANIFEST}`,
  )
}

/**
 * Checks every segment the manifest names against its size and recorded checksum, throwing on the first damaged
 * one; segments without a recorded sum (a crash between the manifest naming them and the sum being written, or a
 * store from before the sums) have it recorded from their bytes now.
 */
export async function verifySegments(dir: string, segments: readonly Segment[]): Promise<void> {
  const sums = await readSums(dir)
  const next: Sums = {}
  for (const seg of segments) {
    const file = path.join(dir, checkName(seg.file))
    const size = await fs
      .stat(file)
      .then((s) => s.size)
      .catch(() => null)
    if (size === null) throw damagedSegment(seg.file, 'missing')
    if (size !== seg.bytes) throw damagedSegment(seg.file, `${size} bytes where ${seg.bytes} were written`)
    const sum = await sha256(file)
    if (sums[seg.file] !== undefined && sums[seg.file] !== sum) throw damagedSegment(seg.file, 'its SHA-256 differs from the one recorded')
    next[seg.file] = sum
  }
  if (Object.keys(next).length !== Object.keys(sums).length || segments.some((s) => sums[s.file] === undefined)) await writeSums(dir, next)
}

/** Records the sums of segments new since the last call (after a flush or compaction), dropping those no longer live. */
export async function recordSegments(dir: string, segments: readonly Segment[]): Promise<void> {
  const sums = await readSums(dir)
  const next: Sums = {}
  for (const seg of segments) next[seg.file] = sums[seg.file] ?? (await sha256(path.join(dir, checkName(seg.file))))
  await writeSums(dir, next)
}
