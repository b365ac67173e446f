import {
  DuckDBTypeId,
  JsonDuckDBValueConverter,
  type DuckDBDataChunk,
  type DuckDBType,
  type DuckDBVector,
  type DuckDBValue,
} from '@duckdb/node-api'
import {
  Bool,
  Field,
  Float64,
  Int64,
  RecordBatch,
  Schema,
  Struct,
  TimeUnit,
  Timestamp,
  Utf8,
  makeData,
  type DataType,
  type Data,
} from 'apache-arrow'
import { rawUtf8, rawValidity, rawWords } from './raw-columns.js'

/**
 * DuckDB column chunks → Arrow record batches, a column at a time (no JS row objects). The mapping
 * (docs/calls-and-storage.md#arrow-answers): text → Utf8; every integer type → Int64; floating and
 * decimal numbers → Float64; booleans → Bool; timestamps → Timestamp(µs, UTC); anything nested (lists,
 * structs, maps) → Utf8 holding its JSON text. JSON columns are text in DuckDB and stay JSON text.
 */
type Kind = 'utf8' | 'int64' | 'float64' | 'bool' | 'timestamp' | 'json'

const INTEGERS = new Set([
  DuckDBTypeId.TINYINT,
  DuckDBTypeId.SMALLINT,
  DuckDBTypeId.INTEGER,
  DuckDBTypeId.BIGINT,
  DuckDBTypeId.UTINYINT,
  DuckDBTypeId.USMALLINT,
  DuckDBTypeId.UINTEGER,
  DuckDBTypeId.UBIGINT,
  DuckDBTypeId.HUGEINT,
  DuckDBTypeId.UHUGEINT,
])
const FLOATS = new Set([DuckDBTypeId.FLOAT, DuckDBTypeId.DOUBLE, DuckDBTypeId.DECIMAL])
const TIMESTAMPS = new Set([DuckDBTypeId.TIMESTAMP, DuckDBTypeId.TIMESTAMP_TZ])

function kindOf(t: DuckDBType): Kind {
  if (t.typeId === DuckDBTypeId.VARCHAR || t.typeId === DuckDBTypeId.UUID || t.typeId === DuckDBTypeId.ENUM) return 'utf8'
  if (INTEGERS.has(t.typeId)) return 'int64'
  if (FLOATS.has(t.typeId)) return 'float64'
  if (t.typeId === DuckDBTypeId.BOOLEAN) return 'bool'
  if (TIMESTAMPS.has(t.typeId)) return 'timestamp'
  return 'json'
}

const ARROW: Record<Kind, () => DataType> = {
  utf8: () => new Utf8(),
  json: () => new Utf8(),
  int64: () => new Int64(),
  float64: () => new Float64(),
  bool: () => new Bool(),
  timestamp: () => new Timestamp(TimeUnit.MICROSECOND, 'UTC'),
}

/** How a result's columns become Arrow: the schema, and each column's conversion. */
export interface ArrowPlan {
  schema: Schema
  kinds: Kind[]
  /** DuckDB's type of each column: VARCHAR, BIGINT, DOUBLE and timestamps are read from its memory in bulk (raw-columns.ts). */
  typeIds: DuckDBTypeId[]
}

export function arrowPlan(names: readonly string[], types: readonly DuckDBType[]): ArrowPlan {
  const kinds = types.map(kindOf)
  return { schema: new Schema(names.map((n, i) => new Field(n, ARROW[kinds[i]!](), true))), kinds, typeIds: types.map((t) => t.typeId) }
}

/** Columns whose DuckDB layout is Arrow's, or a copy away from it: their vectors are read whole. */
const RAW_WORDS = new Set([DuckDBTypeId.BIGINT, DuckDBTypeId.DOUBLE, DuckDBTypeId.TIMESTAMP, DuckDBTypeId.TIMESTAMP_TZ])

function rawColumn(chunk: DuckDBDataChunk, col: number, typeId: DuckDBTypeId, kind: Kind): Data | null {
  const n = chunk.rowCount
  if (typeId === DuckDBTypeId.VARCHAR) {
    const v = rawValidity(chunk, col, n)
    const { valueOffsets, data } = rawUtf8(chunk, col, n, v)
    return makeData({ type: new Utf8(), length: n, nullCount: v.nullCount, nullBitmap: v.nullBitmap, valueOffsets, data })
  }
  if (!RAW_WORDS.has(typeId)) return null
  const v = rawValidity(chunk, col, n)
  const words = rawWords(chunk, col, n, v)
  const base = { length: n, nullCount: v.nullCount, nullBitmap: v.nullBitmap }
  if (kind === 'float64') return makeData({ ...base, type: new Float64(), data: new Float64Array(words) })
  if (kind === 'timestamp') return makeData({ ...base, type: new Timestamp(TimeUnit.MICROSECOND, 'UTC'), data: new BigInt64Array(words) })
  return makeData({ ...base, type: new Int64(), data: new BigInt64Array(words) })
}

/** The validity bitmap (bit set: a value) and null count of n values, from a per-row null test. */
function validity(n: number, isNull: (i: number) => boolean): { nullBitmap: Uint8Array; nullCount: number } {
  const nullBitmap = new Uint8Array(((n + 63) >> 6) << 3)
  let nullCount = 0
  for (let i = 0; i < n; i++) {
    if (isNull(i)) nullCount++
    else nullBitmap[i >> 3]! |= 1 << (i & 7)
  }
  return { nullBitmap, nullCount }
}

/** Strings into one UTF-8 buffer with offsets, as Arrow's Utf8 layout wants. */
function utf8Data(values: readonly (string | null)[]): Data {
  const n = values.length
  const valueOffsets = new Int32Array(n + 1)
  let bytes = 0
  for (let i = 0; i < n; i++) {
    const v = values[i]
    if (v !== null && v !== undefined) bytes += Buffer.byteLength(v)
    valueOffsets[i + 1] = bytes
  }
  const data = Buffer.allocUnsafe(bytes)
  for (let i = 0; i < n; i++) {
    const v = values[i]
    if (v !== null && v !== undefined) data.write(v, valueOffsets[i]!)
  }
  const { nullBitmap, nullCount } = validity(n, (i) => values[i] === null || values[i] === undefined)
  return makeData({ type: new Utf8(), length: n, nullCount, nullBitmap, valueOffsets, data })
}

function items(v: DuckDBVector, n: number): (DuckDBValue | null)[] {
  const out = new Array<DuckDBValue | null>(n)
  for (let i = 0; i < n; i++) out[i] = v.getItem(i)
  return out
}

function columnData(chunk: DuckDBDataChunk, col: number, kind: Kind): Data {
  const n = chunk.rowCount
  if (kind === 'json') {
    const values = chunk.convertColumnValues(col, JsonDuckDBValueConverter).map((v) => (v === null ? null : JSON.stringify(v)))
    return utf8Data(values)
  }
  const vals = items(chunk.getColumnVector(col), n)
  if (kind === 'utf8') return utf8Data(vals.map((v) => (v === null ? null : String(v))))
  const { nullBitmap, nullCount } = validity(n, (i) => vals[i] === null)
  if (kind === 'int64') {
    const data = new BigInt64Array(n)
    for (let i = 0; i < n; i++) if (vals[i] !== null) data[i] = BigInt(vals[i] as bigint | number)
    return makeData({ type: new Int64(), length: n, nullCount, nullBitmap, data })
  }
  if (kind === 'float64') {
    const data = new Float64Array(n)
    for (let i = 0; i < n; i++) if (vals[i] !== null) data[i] = Number(vals[i])
    return makeData({ type: new Float64(), length: n, nullCount, nullBitmap, data })
  }
  // Timestamps (TIMESTAMP, TIMESTAMP_TZ) are always read whole by rawColumn.
  if (kind === 'timestamp') throw new Error('timestamp columns are converted by rawColumn')
  const data = new Uint8Array(((n + 63) >> 6) << 3)
  for (let i = 0; i < n; i++) if (vals[i] === true) data[i >> 3]! |= 1 << (i & 7)
  return makeData({ type: new Bool(), length: n, nullCount, nullBitmap, data })
}

/** One DuckDB chunk (~2,048 rows) as one Arrow record batch of the plan's schema. */
export function chunkToBatch(plan: ArrowPlan, chunk: DuckDBDataChunk): RecordBatch {
  const children = plan.kinds.map((k, col) => rawColumn(chunk, col, plan.typeIds[col]!, k) ?? columnData(chunk, col, k))
  const data = makeData({ type: new Struct(plan.schema.fields), length: chunk.rowCount, nullCount: 0, children })
  return new RecordBatch(plan.schema, data)
}
