import fs from 'node:fs/promises'
import path from 'node:path'
import zlib from 'node:zlib'
import type { DuckDBConnection, DuckDBDataChunk } from '@duckdb/node-api'
import { hit } from '../../core/failpoints.js'
import { createLogger } from '../../core/log.js'
import { blockRowsSql } from '../page-rows.js'
import { rawUtf8, rawValidity, rawWords } from '../arrow/raw-columns.js'
import { sqlPath } from './parquet.js'
import { checkName } from './segments.js'

/**
 * The block file of a compacted segment (`blk-N.pblk`, beside its page index): each call's answer row (SELECT_OUT
 * as JSON) in the segment's row order, `perBlock` calls to a zlib block. A page fetches its calls by (file, row)
 * from the index: one pread and inflate per call's block, not the decode of whole Parquet row groups that
 * `id IN (...)` costs (bench/README.md, `bench/query`). Layout:
 *
 *   block 0 … block n-1 | footer: zlib of n+1 float64 offsets | trailer (TRAILER bytes, see below)
 *
 * Every block and the footer carry zlib's Adler-32, the trailer the footer's place and length, so a torn or
 * damaged file is found (at attach, or when a block fails to inflate) and the page takes the merge path.
 */
export const pageBlocksLayout = {
  /**
   * Calls a block. On the 1M bench store (2026-11-25, load ~20): 8 / 16 / 32 calls made 161 / 134 / 120 bytes a
   * call, and 100 calls read back in 16-35 / 30-98 / 20-96 ms CPU (inflating the whole block is most of it). Written
   * with zlib.deflate on the pool they took 233 / 134 / 64 µs of CPU a call; deflated synchronously (2026-12-05, load
   * ~3.5) 13 / 10 µs a call for 8 / 32, so smaller blocks are now cheap to write; a 32-call block inflates in ~40 µs.
   */
  perBlock: Number(process.env.WEFT_PAGE_BLOCK_CALLS ?? 32),
}

/** `WEFT_PAGE_BLOCKS=off`: pages fetch their calls by id as before even where block files exist (to compare). */
export const pageBlocksRead = () => process.env.WEFT_PAGE_BLOCKS !== 'off'

const MAGIC = Buffer.from('WEFTBLK1')
const NEWLINE = Buffer.from('\n')
/** magic (8) | footer offset (f64) | footer length (u32) | blocks (u32) | calls (u32) | calls a block (u32). */
const TRAILER = 32
const log = createLogger(process.env.WEFT_LOG_LEVEL || 'info')

/**
 * Writes the block file of one compacted segment at `file` (fsynced, then renamed from a temporary name:
 * a crash before leaves a stray file the next start removes). Calls go in the segment's own row order, so
 * row r of the segment (its `file_row_number`, which the page index keeps) is call r % perBlock of block
 * r / perBlock: a plain scan, no sort (sorting the rows newest first, as the index is, made the write ~1.3x
 * the CPU; a page's calls lie in different blocks either way).
 *
 * Blocks are deflated synchronously, ~50 µs of CPU a 32-call block: zlib.deflate on libuv's pool and a write a block
 * (a pool round trip and a zlib stream each) degraded under load (a 1M store's block files took 38-42 s of CPU at load
 * ~4 against 10-12 s). It runs on a worker thread with a DuckDB of its own (block-file-writer.ts): on the event loop,
 * even in 3 ms slices, it was most of the loop's work during a compaction.
 */
export async function writeBlockFile(
  maint: DuckDBConnection,
  segmentPath: string,
  file: string,
  perBlock = pageBlocksLayout.perBlock,
): Promise<void> {
  const tmp = file + '.tmp'
  const rows = blockRowsSql(sqlPath(segmentPath))
  // No ORDER BY: the scan keeps the file's order (DuckDB's preserve_insertion_order); checked row by row below. Each
  // row's JSON comes as its UTF-8 bytes (encode: a BLOB, read in bulk by chunkRows), not as a JavaScript string: a block
  // is its rows' bytes joined by newlines, deflated. Decoding 300,000 rows of ~2.7 KB into strings, joining them and
  // encoding them again for zlib took 4.6-6.3 s of CPU, mostly the main thread's, against 3.3-3.5 s this way, the
  // blocks byte for byte the same (bench/README, 2026-12-06 night).
  const result = await maint.stream(
    `SELECT o.file_row_number AS n, encode(to_json(struct_pack(*COLUMNS(* EXCLUDE (file_row_number))))::VARCHAR) AS r FROM (${rows}) o`,
  )
  const fh = await fs.open(tmp, 'w')
  try {
    const offsets: number[] = [0]
    let pos = 0
    let calls = 0
    let pending: Uint8Array[] = []
    // A chunk's blocks written in one piece.
    const write = async (texts: Buffer[]) => {
      if (!texts.length) return
      const blocks = texts.map((t) => zlib.deflateSync(t, { level: 1 }))
      const start = pos
      for (const b of blocks) {
        pos += b.length
        offsets.push(pos)
      }
      const all = Buffer.concat(blocks, pos - start)
      await fh.write(all, 0, all.length, start)
    }
    for (let chunk = await result.fetchChunk(); chunk && chunk.rowCount > 0; chunk = await result.fetchChunk()) {
      const texts: Buffer[] = []
      for (const bytes of chunkRows(chunk, calls, segmentPath)) {
        pending.push(bytes)
        calls++
        if (pending.length === perBlock) {
          texts.push(joined(pending))
          pending = []
        }
      }
      await write(texts)
    }
    if (pending.length) await write([joined(pending)])
    await writeFooter(fh, pos, offsets, calls, perBlock)
    await fh.sync()
  } catch (e) {
    await fh.close()
    await fs.rm(tmp, { force: true })
    throw e
  }
  await fh.close()
  hit('page-blocks.before-rename')
  await fs.rename(tmp, file)
}

/** A block's text: its rows' JSON joined by newlines. */
const joined = (rows: Uint8Array[]) => Buffer.concat(rows.flatMap((r, i) => (i ? [NEWLINE, r] : [r])))

/**
 * A chunk's rows' JSON bytes (column 1), checked to be the segment's rows from `first` on (column 0). Read in bulk
 * (rawUtf8: one copy of the chunk's bytes, each row a view into it): getItemBytes, one binding call a row, took ~3.5 µs
 * a row of the event loop under ingest.
 */
function chunkRows(chunk: DuckDBDataChunk, first: number, segmentPath: string): Uint8Array[] {
  const n = chunk.rowCount
  const numbers = new BigInt64Array(rawWords(chunk, 0, n, rawValidity(chunk, 0, n)))
  const valid = rawValidity(chunk, 1, n)
  const { valueOffsets, data } = rawUtf8(chunk, 1, n, valid)
  const out: Uint8Array[] = []
  for (let i = 0; i < n; i++) {
    const row = first + i
    if (Number(numbers[i]) !== row) throw new Error(`block file of ${segmentPath}: row ${String(numbers[i])} came as row ${row}`)
    if (valid.nullBitmap && !(valid.nullBitmap[i >> 3]! & (1 << (i & 7))))
      throw new Error(`block file of ${segmentPath}: row ${row} has no JSON`)
    out.push(data.subarray(valueOffsets[i]!, valueOffsets[i + 1]!))
  }
  return out
}

/** The footer (the blocks' offsets, zlib) at `pos`, then the trailer that finds it. */
async function writeFooter(fh: fs.FileHandle, pos: number, offsets: number[], calls: number, perBlock: number): Promise<void> {
  const footer = zlib.deflateSync(Buffer.from(new Float64Array(offsets).buffer))
  const trailer = Buffer.alloc(TRAILER)
  MAGIC.copy(trailer, 0)
  trailer.writeDoubleLE(pos, 8)
  trailer.writeUInt32LE(footer.length, 16)
  trailer.writeUInt32LE(offsets.length - 1, 20)
  trailer.writeUInt32LE(calls, 24)
  trailer.writeUInt32LE(perBlock, 28)
  await fh.write(footer, 0, footer.length, pos)
  await fh.write(trailer, 0, TRAILER, pos + footer.length)
}

/** A block file's footer: where each block starts (and the footer, at the end), and calls a block. */
interface Footer {
  offsets: Float64Array
  calls: number
  perBlock: number
}

/** Footers read, by path and the file's size and change time (names are not reused, but a directory may be). */
const footers = new Map<string, { key: string; footer: Footer }>()
/** Block files a read found damaged: attach treats them as missing (rebuilt), until then pages fetch by id. */
const damaged = new Set<string>()

async function readFooter(fh: fs.FileHandle, file: string): Promise<Footer> {
  const st = await fh.stat()
  const key = `${st.size}:${st.ctimeMs}`
  const cached = footers.get(file)
  if (cached?.key === key) return cached.footer
  if (st.size < TRAILER) throw new Error('shorter than its trailer')
  const trailer = Buffer.alloc(TRAILER)
  await fh.read(trailer, 0, TRAILER, st.size - TRAILER)
  if (!trailer.subarray(0, 8).equals(MAGIC)) throw new Error('no block-file trailer')
  const at = trailer.readDoubleLE(8)
  const length = trailer.readUInt32LE(16)
  const blocks = trailer.readUInt32LE(20)
  if (at + length + TRAILER !== st.size) throw new Error(`length ${st.size} does not match its trailer`)
  const raw = Buffer.alloc(length)
  await fh.read(raw, 0, length, at)
  const buf = zlib.inflateSync(raw)
  const offsets = new Float64Array(buf.buffer.slice(buf.byteOffset, buf.byteOffset + buf.length))
  if (offsets.length !== blocks + 1 || offsets[blocks] !== at) throw new Error('footer does not match its trailer')
  const footer = { offsets, calls: trailer.readUInt32LE(24), perBlock: trailer.readUInt32LE(28) }
  if (footers.size > 256) footers.clear()
  footers.set(file, { key, footer })
  return footer
}

/** Whether a block file's trailer and footer read (a missing, torn or damaged one is rebuilt, not used). */
export async function blockFileReadable(file: string): Promise<boolean> {
  if (damaged.has(file)) return false
  try {
    const fh = await fs.open(file, 'r')
    try {
      await readFooter(fh, file)
    } finally {
      await fh.close()
    }
    return true
  } catch {
    return false
  }
}

/** Forgets a block file (removed or replaced). */
export function forgetBlockFile(file: string): void {
  damaged.delete(file)
  footers.delete(file)
}

/** Where a page's call is: its block file (a manifest name) and its row in the page index. */
export interface BlockLocator {
  id: string
  file: string
  row: number
}

/** Calls read from block files, and block files found damaged, since the process started (tests, /admin). */
export const blockReads = { calls: 0, damaged: 0 }

/**
 * Inflated in 64 KiB pieces rather than zlib's default 16 KiB: a 32-call block (~42 KB) inflated in 37 µs against
 * 123 (three pieces, then their concatenation), most of a page's fetch.
 */
const INFLATE = { chunkSize: 64 * 1024 }

/** Blocks closer than this are read in one pread (a page's calls cluster among the newest blocks). */
const COALESCE_BYTES = 16_384

/**
 * The answer rows (as SELECT_OUT gives them) of the located calls, by id. A file that fails to read, or a
 * block that fails to inflate or holds another call than the index says, leaves its calls out (the caller
 * fetches them by id) and is marked damaged, with a log line, so that the next attach rebuilds it.
 */
export async function readBlockRows(
  dir: string,
  locs: readonly BlockLocator[],
): Promise<{ rows: Map<string, Record<string, unknown>>; damaged: boolean }> {
  const rows = new Map<string, Record<string, unknown>>()
  const byFile = new Map<string, BlockLocator[]>()
  for (const l of locs) byFile.set(l.file, [...(byFile.get(l.file) ?? []), l])
  let bad = false
  for (const [name, list] of byFile) {
    const file = path.join(dir, checkName(name))
    // Found damaged before: fetched by id, without a log line a page, until the rebuild replaces it.
    if (damaged.has(file)) continue
    try {
      for (const [id, row] of await readFileRows(file, list)) rows.set(id, row)
      blockReads.calls += list.length
    } catch (e) {
      // Removed since the page's ids were read (a compaction retired it): fetched by id, nothing to rebuild.
      if ((e as NodeJS.ErrnoException).code === 'ENOENT') continue
      bad = true
      blockReads.damaged++
      damaged.add(file)
      footers.delete(file)
      log.warn({ file, err: (e as Error).message }, `page blocks: ${name} unreadable; its calls are fetched by id until it is rebuilt`)
    }
  }
  return { rows, damaged: bad }
}

async function readFileRows(file: string, list: readonly BlockLocator[]): Promise<Map<string, Record<string, unknown>>> {
  const out = new Map<string, Record<string, unknown>>()
  const fh = await fs.open(file, 'r')
  try {
    const { offsets, perBlock } = await readFooter(fh, file)
    const blocks = [...new Set(list.map((l) => Math.floor(l.row / perBlock)))].sort((a, b) => a - b)
    const runs: { first: number; last: number }[] = []
    // Runs of nearby blocks, one pread each.
    for (let i = 0; i < blocks.length;) {
      let j = i
      while (j + 1 < blocks.length && offsets[blocks[j + 1]!]! - offsets[blocks[j]! + 1]! < COALESCE_BYTES) j++
      if (blocks[j]! + 1 >= offsets.length) throw new Error(`block ${blocks[j]} past the file's ${offsets.length - 1}`)
      runs.push({ first: i, last: j })
      i = j + 1
    }
    // All reads at once, each run's blocks inflated as its read lands. Awaited one after another, a page's ~100
    // reads each waited for a turn of the thread pool and of this thread: 50 ms to over a second for the reads
    // of one page on a machine at load 20 (bench/README.md, `bench/query`, s33). Inflating on the pool instead
    // (zlib.inflate) took ~1.5x the CPU for no shorter page on 2 cores.
    const inflated = new Map<number, Buffer>()
    await Promise.all(
      runs.map(async ({ first, last }) => {
        const start = offsets[blocks[first]!]!
        const buf = Buffer.allocUnsafe(offsets[blocks[last]! + 1]! - start)
        const { bytesRead } = await fh.read(buf, 0, buf.length, start)
        if (bytesRead !== buf.length) throw new Error(`short read at ${start}: ${bytesRead} of ${buf.length} bytes`)
        for (let k = first; k <= last; k++) {
          const b = blocks[k]!
          inflated.set(b, zlib.inflateSync(buf.subarray(offsets[b]! - start, offsets[b + 1]! - start), INFLATE))
        }
      }),
    )
    for (const l of list) {
      const text = line(inflated.get(Math.floor(l.row / perBlock))!, l.row % perBlock)
      const row = text === null ? undefined : (JSON.parse(text) as Record<string, unknown>)
      if (!row || row.id !== l.id) throw new Error(`row ${l.row} is not call ${l.id}`)
      out.set(l.id, row)
    }
  } finally {
    await fh.close()
  }
  return out
}

/** Line k of a block (JSON text never holds a raw newline), decoded alone; null past its last line. */
function line(block: Buffer, k: number): string | null {
  let start = 0
  for (let i = 0; i < k; i++) {
    start = block.indexOf(10, start) + 1
    if (start === 0) return null
  }
  const end = block.indexOf(10, start)
  return block.toString('utf8', start, end < 0 ? block.length : end)
}
