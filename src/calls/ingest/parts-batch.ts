import { Field, Int64, List, RecordBatch, Schema, Struct, Table, Utf8, makeData, tableToIPC, type Data, type DataType } from 'apache-arrow'
import { INT_FIELDS, MICROS_FIELDS, PART_BATCH_FIELDS, STRING_FIELDS, USAGE_FIELDS, type CallPart, type UsageRow } from '../model.js'
import { RawJson } from './raw-json.js'

/**
 * A batch of call parts as one Arrow record batch (IPC stream bytes), the form in which an ingest worker hands a
 * batch to the tail (see fillPartsChunk): text as UTF-8 with offsets, microseconds and counters as 64-bit
 * integers, the ref lists and the usage rows as lists. The tail copies these columns into DuckDB's vectors, where a
 * JSON batch had DuckDB's JSON reader parse every part again (the log keeps the JSON record: replays and the
 * ClickHouse backend read it). The columns hold exactly what that reader would have stored, or there is no batch
 * (null) and the JSON goes: a RawJson value that is not `exact` (DuckDB normalises its text), a number the reader
 * would treat otherwise than as a 64-bit integer.
 */
export function partsBatch(parts: readonly CallPart[]): Uint8Array | null {
  const n = parts.length
  const children: Data[] = []
  for (const f of STRING_FIELDS) {
    const col = textColumn(n, (i) => parts[i]![f])
    if (!col) return null
    children.push(col)
  }
  for (const f of [...MICROS_FIELDS, ...INT_FIELDS]) {
    const col = int64Column(n, (i) => parts[i]![f], MICROS_FIELDS.includes(f as (typeof MICROS_FIELDS)[number]))
    if (!col) return null
    children.push(col)
  }
  children.push(refsColumn(parts, 'input_refs'), refsColumn(parts, 'output_refs'))
  const usage = usageColumn(parts)
  if (!usage) return null
  children.push(usage)
  const batch = new RecordBatch(PARTS_SCHEMA, makeData({ type: new Struct(PARTS_SCHEMA.fields), length: n, nullCount: 0, children }))
  return tableToIPC(new Table([batch]), 'stream')
}

/**
 * The fewest parts an Arrow batch holds: its insert has a fixed cost per batch (decoding the IPC stream, DuckDB's
 * chunks; when batches were appended, also the appender's flush, ~2 ms) that JSON batches, grouped into one statement,
 * amortise better, and a JSON insert leaves the event loop nearly free. Through the store (bench/tail-insert, CPU per
 * 1,000 parts, median, Arrow against JSON): appended, 41 vs 24 ms at batches of 100, 32.6 vs 35.9 at 250, 26 vs 34 at
 * 500; inserted through the table function with text as string entries (2026-12-07; 100 and 250 with this bound set to
 * 1), 18 vs 17, 14 vs 18, 10 vs 18.
 */
export const ARROW_MIN_PARTS = 256

/**
 * The most parts an Arrow batch holds; a larger batch is logged as JSON, which DuckDB reads on its own threads. Set
 * when the tail appended a batch on the event loop (~10 µs a part, so ~10 ms a batch); its rows are now filled 512 at a
 * time (~1 µs a part) for an insert on DuckDB's thread, so the bound could rise, but batches past it are not measured.
 */
export const ARROW_MAX_PARTS = 1024

const USAGE_TYPE = new Struct([new Field('model', new Utf8(), true), ...USAGE_FIELDS.map((f) => new Field(f, new Int64(), true))])

/** The batch's columns (PART_BATCH_FIELDS; see fillPartsChunk). */
const PARTS_SCHEMA = new Schema([
  ...STRING_FIELDS.map((f) => new Field(f, new Utf8(), true)),
  ...[...MICROS_FIELDS, ...INT_FIELDS].map((f) => new Field(f, new Int64(), true)),
  new Field('input_refs', new List(new Field('item', new Utf8(), true)), true),
  new Field('output_refs', new List(new Field('item', new Utf8(), true)), true),
  new Field('usage', new List(new Field('item', USAGE_TYPE, true)), true),
])
if (PARTS_SCHEMA.fields.map((f) => f.name).join() !== PART_BATCH_FIELDS.join()) throw new Error('parts batch: columns out of order')

/** Validity bits (Arrow's order: bit i of byte i >> 3), set as values are written; null when every row has one. */
class Validity {
  private bits: Uint8Array | null = null
  nulls = 0
  constructor(private readonly n: number) {}
  unset(i: number): void {
    this.bits ??= new Uint8Array((this.n + 7) >> 3).fill(0xff)
    this.bits[i >> 3]! &= ~(1 << (i & 7))
    this.nulls++
  }
  get bitmap(): Uint8Array | undefined {
    return this.bits ?? undefined
  }
}

/**
 * A text column of n rows; null when a value is RawJson that is not exact (DuckDB would normalise its text). Written
 * into one buffer sized beforehand: a string takes at most 3 bytes per UTF-16 unit (a lone surrogate becomes U+FFFD,
 * 3 bytes, as toWellFormed and DuckDB's reader have it). The data is a view of that buffer (the IPC writer copies it).
 */
function textColumn(n: number, value: (i: number) => string | RawJson | null | undefined): Data<Utf8> | null {
  let size = 0
  for (let i = 0; i < n; i++) {
    const v = value(i)
    if (typeof v === 'string') size += v.length * 3
    else if (v instanceof RawJson) {
      if (!v.exact) return null
      size += v.bytes.length
    } else if (v !== undefined && v !== null) return null
  }
  const offsets = new Int32Array(n + 1)
  const valid = new Validity(n)
  const buf = Buffer.allocUnsafe(size)
  let at = 0
  for (let i = 0; i < n; i++) {
    const v = value(i)
    if (v === undefined || v === null) valid.unset(i)
    else if (typeof v === 'string') at += buf.write(v, at)
    else {
      const b = (v as RawJson).bytes
      buf.set(b, at)
      at += b.length
    }
    offsets[i + 1] = at
  }
  return makeData({
    type: new Utf8(),
    length: n,
    nullCount: valid.nulls,
    nullBitmap: valid.bitmap,
    valueOffsets: offsets,
    data: buf.subarray(0, at),
  })
}

/**
 * A 64-bit integer column; null when a value is not a safe integer (the JSON reader's handling of those is its own).
 * Microseconds go through Number as encodeParts writes them.
 */
function int64Column(n: number, value: (i: number) => unknown, micros: boolean): Data<Int64> | null {
  const data = new BigInt64Array(n)
  const valid = new Validity(n)
  for (let i = 0; i < n; i++) {
    const v = value(i)
    if (v === undefined || v === null) {
      valid.unset(i)
      continue
    }
    const x = micros ? Number(v) : v
    if (typeof x !== 'number' || !Number.isSafeInteger(x)) return null
    data[i] = BigInt(x)
  }
  return makeData({ type: new Int64(), length: n, nullCount: valid.nulls, nullBitmap: valid.bitmap, data })
}

/** A list column: a part without entries (or with an empty list) has none, as the JSON leaves the field out. */
function listData(type: DataType, n: number, counts: (i: number) => number, child: Data): Data<List> {
  const offsets = new Int32Array(n + 1)
  const valid = new Validity(n)
  for (let i = 0; i < n; i++) {
    const k = counts(i)
    if (k === 0) valid.unset(i)
    offsets[i + 1] = offsets[i]! + k
  }
  const list: List = new List(new Field('item', type, true))
  return makeData({ type: list, length: n, nullCount: valid.nulls, nullBitmap: valid.bitmap, valueOffsets: offsets, child })
}

function refsColumn(parts: readonly CallPart[], f: 'input_refs' | 'output_refs'): Data {
  const items = parts.flatMap((p) => p[f] ?? [])
  const child = textColumn(items.length, (i) => items[i])!
  return listData(new Utf8(), parts.length, (i) => parts[i]![f]?.length ?? 0, child)
}

function usageColumn(parts: readonly CallPart[]): Data | null {
  const rows: UsageRow[] = parts.flatMap((p) => p.usage ?? [])
  const children: Data[] = [textColumn(rows.length, (i) => rows[i]!.model)!]
  for (const f of USAGE_FIELDS) {
    const col = int64Column(rows.length, (i) => rows[i]![f], false)
    if (!col) return null
    children.push(col)
  }
  const child = makeData({ type: USAGE_TYPE, length: rows.length, nullCount: 0, children })
  return listData(USAGE_TYPE, parts.length, (i) => parts[i]!.usage?.length ?? 0, child)
}
