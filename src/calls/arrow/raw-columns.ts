import bindings from '@duckdb/node-bindings'
import type { DuckDBDataChunk } from '@duckdb/node-api'

/**
 * A result chunk's columns read from DuckDB's vector memory in bulk, for Arrow answers (convert.ts): text as its
 * UTF-8 bytes, 64-bit numbers and timestamps as one copy of their 8-byte values, validity as DuckDB's bitmap (the
 * same bit order as Arrow's). Reading value by value (`getItem`) decoded every string to a JS string and encoded it
 * back, and made a BigInt per number: a 1M-call export spent ~20 s of the event loop there (bench/export).
 * Result chunks hold flat vectors (the C API flattens them), which is the layout read here. The calls are those
 * @duckdb/node-api makes itself (`vector_get_data`, `vector_get_validity`, `get_data_from_pointer`) from the binding
 * package.json pins beside it.
 */

/** A column's validity as Arrow wants it (bit i set: row i has a value) and its null count; no bitmap: no nulls. */
export interface RawValidity {
  nullBitmap?: Uint8Array
  nullCount: number
}

const vectorOf = (chunk: DuckDBDataChunk, col: number) => bindings.data_chunk_get_vector(chunk.chunk, col)

/** Bits set in a byte, for null counts. */
const BITS = Uint8Array.from({ length: 256 }, (_, b) => {
  let n = 0
  for (let x = b; x; x >>= 1) n += x & 1
  return n
})

/** The validity of `n` rows: DuckDB returns none when every row is valid. */
export function rawValidity(chunk: DuckDBDataChunk, col: number, n: number): RawValidity {
  const words = Math.ceil(n / 64)
  const bits = bindings.vector_get_validity(vectorOf(chunk, col), words * 8) as Uint8Array | null
  if (!bits) return { nullCount: 0 }
  // A copy: the chunk's memory is DuckDB's and goes with the chunk.
  const nullBitmap = new Uint8Array(words * 8)
  nullBitmap.set(bits.subarray(0, words * 8))
  // Bits past the last row are not rows: clear them so the count and the bitmap say the same.
  if (n % 8) nullBitmap[n >> 3]! &= (1 << (n % 8)) - 1
  nullBitmap.fill(0, (n + 7) >> 3)
  let valid = 0
  for (let i = 0; i < (n + 7) >> 3; i++) valid += BITS[nullBitmap[i]!]!
  return { nullBitmap, nullCount: n - valid }
}

const isSet = (v: RawValidity, i: number) => !v.nullBitmap || (v.nullBitmap[i >> 3]! & (1 << (i & 7))) !== 0

/** 8-byte values (BIGINT, TIMESTAMP, DOUBLE) of `n` rows, copied; a null row's slot is zero. */
export function rawWords(chunk: DuckDBDataChunk, col: number, n: number, validity: RawValidity): ArrayBuffer {
  const bytes = bindings.vector_get_data(vectorOf(chunk, col), n * 8)
  const out = new Uint8Array(n * 8)
  out.set(bytes.subarray(0, n * 8))
  if (validity.nullCount) for (let i = 0; i < n; i++) if (!isSet(validity, i)) out.fill(0, i * 8, i * 8 + 8)
  return out.buffer
}

/**
 * Strings (VARCHAR) of `n` rows as Arrow's Utf8 layout: offsets and one buffer of their bytes. Each row is a
 * duckdb_string_t of 16 bytes: its length, then the bytes inline (12 or fewer) or a prefix and a pointer. A chunk's
 * longer strings mostly sit one after another in its string heap, so each run of them whose pointers follow on
 * (the next starts where the last ended, checked on the pointers' values) is read in one call: one call per string
 * took ~3 µs, 11 of the 17 s of a 1M-call export.
 */
export function rawUtf8(
  chunk: DuckDBDataChunk,
  col: number,
  n: number,
  validity: RawValidity,
): { valueOffsets: Int32Array; data: Uint8Array } {
  const raw = bindings.vector_get_data(vectorOf(chunk, col), n * 16)
  const view = new DataView(raw.buffer, raw.byteOffset, n * 16)
  const valueOffsets = new Int32Array(n + 1)
  let total = 0
  for (let i = 0; i < n; i++) {
    if (isSet(validity, i)) total += view.getUint32(i * 16, true)
    valueOffsets[i + 1] = total
  }
  const data = new Uint8Array(total)
  // The open run: its first row (whose pointer the read starts from), its length so far, and where its pointer ends.
  let runRow = -1
  let runLen = 0
  let endLo = 0
  let endHi = 0
  const flush = () => {
    if (runRow < 0) return
    data.set(bindings.get_data_from_pointer(raw.buffer as ArrayBuffer, raw.byteOffset + runRow * 16 + 8, runLen), valueOffsets[runRow]!)
    runRow = -1
  }
  for (let i = 0; i < n; i++) {
    const len = valueOffsets[i + 1]! - valueOffsets[i]!
    // Empty and null rows take no bytes: a run goes on across them.
    if (len === 0) continue
    if (len <= 12) {
      flush()
      data.set(new Uint8Array(raw.buffer, raw.byteOffset + i * 16 + 4, len), valueOffsets[i]!)
      continue
    }
    const lo = view.getUint32(i * 16 + 8, true)
    const hi = view.getUint32(i * 16 + 12, true)
    if (runRow >= 0 && lo === endLo && hi === endHi) runLen += len
    else {
      flush()
      runRow = i
      runLen = len
    }
    // Past 2^32 the high word would change: the run ends there (endHi stays, so the next one cannot match).
    endLo = lo + len
    endHi = hi
    if (endLo > 0xffffffff) {
      flush()
      endLo = -1
    }
  }
  flush()
  return { valueOffsets, data }
}

/** Strings (VARCHAR) of `n` rows as JS strings (null where null), decoded from the bytes rawUtf8 reads. */
export function rawStrings(chunk: DuckDBDataChunk, col: number, n: number): (string | null)[] {
  const validity = rawValidity(chunk, col, n)
  const { valueOffsets, data } = rawUtf8(chunk, col, n, validity)
  const bytes = Buffer.from(data.buffer, data.byteOffset, data.byteLength)
  const out = new Array<string | null>(n)
  for (let i = 0; i < n; i++) out[i] = isSet(validity, i) ? bytes.toString('utf8', valueOffsets[i], valueOffsets[i + 1]) : null
  return out
}
