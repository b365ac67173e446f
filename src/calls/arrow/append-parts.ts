import bindings, { type Vector } from '@duckdb/node-bindings'
import type { DuckDBDataChunk } from '@duckdb/node-api'
import { tableFromIPC, type Data, type Int64, type List, type Struct, type Utf8 } from 'apache-arrow'
import { INT_FIELDS, MICROS_FIELDS, PART_BATCH_FIELDS, STRING_FIELDS, USAGE_FIELDS } from '../model.js'

const PARTS_NAMES = PART_BATCH_FIELDS.join()

/**
 * A parts batch (partsBatch's Arrow IPC bytes) into DuckDB data chunks of the tail table's columns (see ArrowGroupScan,
 * which hands them to an insert). The columns go into DuckDB's vectors as they are: text as its UTF-8 bytes, integers
 * and microseconds (DuckDB's TIMESTAMP) as one copy of their 8-byte values, validity as Arrow's bitmap (the same bit
 * order as DuckDB's). In process on the ingest bench's calls, batch and insert took ~10 µs of CPU a part against ~19
 * for the same batch through DuckDB's JSON reader (bench/README, 2026-12-06 late night); most of it is DuckDB's own
 * append to the table. The calls are the binding functions @duckdb/node-api makes itself for the same vectors (see
 * raw-columns.ts for the reading side). Synchronous, on the caller's thread.
 */

/** A parts batch's columns (partsBatch's Arrow IPC bytes, checked to be the tail's fields), or null when it has no rows. */
export function partsColumns(ipc: Uint8Array): Data[] | null {
  const table = tableFromIPC(ipc)
  const names = table.schema.fields.map((f) => f.name).join()
  if (names !== PARTS_NAMES) throw new Error(`An Arrow parts batch with other columns than the tail's: ${names.slice(0, 200)}`)
  const batch = table.batches[0]
  return batch && batch.numRows > 0 ? (batch.data.children as Data[]) : null
}

/**
 * Rows [from, from + m) of a parts batch's columns into `chunk` (the tail table's columns, m at most VECTOR), numbered
 * from `seq`, with log generation `gen`; sets the chunk's row count.
 */
export function fillPartsChunk(chunk: DuckDBDataChunk, cols: Data[], from: number, m: number, seq: bigint, gen: number): void {
  chunk.rowCount = m
  const vec = (i: number) => bindings.data_chunk_get_vector(chunk.chunk, i)
  const seqs = new BigInt64Array(m)
  for (let j = 0; j < m; j++) seqs[j] = seq + BigInt(j)
  bindings.copy_data_to_vector(vec(0), 0, seqs.buffer, 0, 8 * m)
  for (const [table, arrow, write] of LAYOUT) write(vec(table), cols[arrow]!, from, m)
  bindings.copy_data_to_vector(vec(TAIL_WIDTH - 1), 0, new Int32Array(m).fill(gen).buffer, 0, 4 * m)
}

/** DuckDB's vector size: a data chunk holds at most this many rows. */
export const VECTOR = bindings.vector_size()
/** The tail table's columns: seq, the batch's fields, wal_gen (see TAIL_COLUMNS and PARTS_SCHEMA). */
const TAIL_WIDTH = STRING_FIELDS.length + MICROS_FIELDS.length + INT_FIELDS.length + 3 + 2

type Writer = (v: Vector, d: Data, from: number, m: number) => void

/**
 * Table column, batch column, and how it is written. The table has the first nine text fields, the three times,
 * the other seven text fields, the two integers, the lists; the batch has the text fields, times and integers
 * together (model.ts: PART_COLUMNS and STRING_FIELDS).
 */
const LAYOUT: [number, number, Writer][] = (() => {
  const out: [number, number, Writer][] = []
  const S = STRING_FIELDS.length
  const T = MICROS_FIELDS.length
  for (let i = 0; i < S; i++) out.push([i < 9 ? 1 + i : 1 + T + i, i, writeText as Writer])
  for (let i = 0; i < T; i++) out.push([10 + i, S + i, writeInt64 as Writer])
  for (let i = 0; i < INT_FIELDS.length; i++) out.push([1 + S + T + i, S + T + i, writeInt64 as Writer])
  const lists = 1 + S + T + INT_FIELDS.length
  const at = S + T + INT_FIELDS.length
  out.push([lists, at, writeTextList as Writer], [lists + 1, at + 1, writeTextList as Writer], [lists + 2, at + 2, writeUsage as Writer])
  return out
})()

/** Rows [from, from + m) of an Arrow validity bitmap as DuckDB's, rows counted from 0 (from needs no byte alignment). */
function writeValidity(v: Vector, d: Data, from: number, m: number): void {
  const bits = d.nullBitmap
  if (!bits || d.nullCount === 0) return
  let out: Uint8Array
  if ((from + d.offset) % 8 === 0) out = bits.subarray((from + d.offset) >> 3, (from + d.offset + m + 7) >> 3)
  else {
    out = new Uint8Array((m + 7) >> 3)
    for (let j = 0; j < m; j++) {
      const r = from + d.offset + j
      if (bits[r >> 3]! & (1 << (r & 7))) out[j >> 3]! |= 1 << (j & 7)
    }
  }
  bindings.vector_ensure_validity_writable(v)
  bindings.copy_data_to_vector_validity(v, 0, out.buffer as ArrayBuffer, out.byteOffset, out.byteLength)
}

/**
 * Text rows as DuckDB's strings: each row a duckdb_string_t of 16 bytes (the C API's layout, read the same way in
 * raw-columns.ts): its length, then its bytes inline (12 or fewer) or its first 4 bytes and a pointer. The rows'
 * bytes, one run in Arrow's buffer, go into the vector's string heap in one call (assigned to row 0, whose entry then
 * says where the copy is); each longer row points into that copy, and all the entries go in as one copy. One binding
 * call a row (vector_assign_string_element_len, which copies each string on its own) took ~0.4 µs a value, most of the
 * ~6 µs a part the event loop spent filling chunks.
 */
function writeText(v: Vector, d: Data<Utf8>, from: number, m: number): void {
  const offsets = d.valueOffsets
  const bytes = d.values
  const valid = d.nullCount === 0 ? null : d.nullBitmap
  const first = d.offset + from
  const start = offsets[first]!
  const end = offsets[first + m]!
  // Where the heap copy starts (as a number: x86-64 and arm64 addresses fit in 48 bits).
  let heap = 0
  if (end - start > 12) {
    bindings.vector_assign_string_element_len(v, 0, bytes.subarray(start, end))
    const entry = new DataView(bindings.vector_get_data(v, 16).slice(0, 16).buffer)
    heap = entry.getUint32(8, true) + entry.getUint32(12, true) * 2 ** 32
  }
  const entries = new Uint8Array(16 * m)
  const words = new DataView(entries.buffer)
  for (let j = 0; j < m; j++) {
    const r = first + j
    if (valid && !(valid[r >> 3]! & (1 << (r & 7)))) continue
    const at = offsets[r]!
    const len = offsets[r + 1]! - at
    const e = 16 * j
    words.setUint32(e, len, true)
    if (len <= 12) {
      for (let k = 0; k < len; k++) entries[e + 4 + k] = bytes[at + k]!
      continue
    }
    for (let k = 0; k < 4; k++) entries[e + 4 + k] = bytes[at + k]!
    const ptr = heap + (at - start)
    words.setUint32(e + 8, ptr % 2 ** 32, true)
    words.setUint32(e + 12, Math.floor(ptr / 2 ** 32), true)
  }
  bindings.copy_data_to_vector(v, 0, entries.buffer, 0, entries.byteLength)
  writeValidity(v, d, from, m)
}

function writeInt64(v: Vector, d: Data<Int64>, from: number, m: number): void {
  const values = d.values
  bindings.copy_data_to_vector(v, 0, values.buffer as ArrayBuffer, values.byteOffset + 8 * (d.offset + from), 8 * m)
  writeValidity(v, d, from, m)
}

/** A list column's entries for rows [from, from + m) (DuckDB's: offset and length, 64-bit), and its child's range. */
function writeEntries(v: Vector, d: Data<List>, from: number, m: number): [number, number] {
  const o = d.valueOffsets.subarray(d.offset)
  const entries = new BigUint64Array(2 * m)
  for (let j = 0; j < m; j++) {
    entries[2 * j] = BigInt(o[from + j]! - o[from]!)
    entries[2 * j + 1] = BigInt(o[from + j + 1]! - o[from + j]!)
  }
  bindings.copy_data_to_vector(v, 0, entries.buffer, 0, entries.byteLength)
  writeValidity(v, d, from, m)
  const total = o[from + m]! - o[from]!
  bindings.list_vector_reserve(v, total)
  bindings.list_vector_set_size(v, total)
  return [o[from]!, total]
}

function writeTextList(v: Vector, d: Data<List<Utf8>>, from: number, m: number): void {
  const [start, total] = writeEntries(v, d, from, m)
  if (total > 0) writeText(bindings.list_vector_get_child(v), d.children[0] as Data<Utf8>, start, total)
}

function writeUsage(v: Vector, d: Data<List<Struct>>, from: number, m: number): void {
  const [start, total] = writeEntries(v, d, from, m)
  if (total === 0) return
  const child = bindings.list_vector_get_child(v)
  const rows = d.children[0]!.children
  writeText(bindings.struct_vector_get_child(child, 0), rows[0] as Data<Utf8>, start, total)
  for (let f = 0; f < USAGE_FIELDS.length; f++)
    writeInt64(bindings.struct_vector_get_child(child, f + 1), rows[f + 1] as Data<Int64>, start, total)
}
