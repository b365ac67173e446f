import { Field, Int64, RecordBatch, Schema, Struct, TimeUnit, Timestamp, Utf8, makeData, vectorFromArray, type Data } from 'apache-arrow'
import { ARROW_CALL_COLUMNS, keptColumns, type CallArrowKind } from '../calls/arrow/calls.js'
import type { CallRecord } from '../calls/model.js'
import { toCall } from '../calls/read/to-call.js'
import type { Row } from './executor.js'

/**
 * Arrow answers of the call routes on ClickHouse: the embedded store's columns, names, order and types
 * (calls/arrow/calls.ts; docs/calls-and-storage.md#arrow-answers), built from the rows ClickHouse
 * streams. Each row is shaped by toCall, as the JSON answer is, so both answers carry the same values:
 * timestamps stay microseconds, run steps 64-bit integers, JSON fields their JSON text.
 */
type Kind = CallArrowKind

/** The row's microsecond and 64-bit columns behind the timestamp and integer fields (they bypass toCall's strings). */
const TIMESTAMPS: Record<string, string | null> = { started_at: 'started_us', ended_at: 'ended_us', deleted_at: null }
const INTEGERS: Record<string, string> = { svc_run_step: 'run_step', svc_run_step_end: 'run_step_end' }

const TYPES: Record<Kind, () => Utf8 | Int64 | Timestamp> = {
  utf8: () => new Utf8(),
  json: () => new Utf8(),
  int64: () => new Int64(),
  timestamp: () => new Timestamp(TimeUnit.MICROSECOND, 'UTC'),
}

/** The columns of an answer (all when `columns` is empty) and its schema. */
export interface ChArrowPlan {
  schema: Schema
  names: string[]
  kinds: Kind[]
}

export function chArrowPlan(columns: readonly string[] | null | undefined): ChArrowPlan {
  const keep = keptColumns(columns)
  const kept = ARROW_CALL_COLUMNS.filter(([n]) => !keep || keep.has(n))
  const names = kept.map(([n]) => n)
  const kinds = kept.map(([, , kind]) => kind)
  return { names, kinds, schema: new Schema(names.map((n, i) => new Field(n, TYPES[kinds[i]!](), true))) }
}

/** 64-bit values (a column of a ClickHouse row, quoted by output_format_json_quote_64bit_integers) as Arrow data. */
function int64Data(type: Int64 | Timestamp, values: unknown[]): Data {
  const n = values.length
  const data = new BigInt64Array(n)
  const nullBitmap = new Uint8Array(((n + 63) >> 6) << 3)
  let nullCount = 0
  values.forEach((v, i) => {
    if (v === null || v === undefined) nullCount++
    else {
      data[i] = BigInt(v as string)
      nullBitmap[i >> 3]! |= 1 << (i & 7)
    }
  })
  const props = { length: n, nullCount, nullBitmap, data }
  return type instanceof Timestamp ? makeData({ type, ...props }) : makeData({ type, ...props })
}

function columnData(name: string, kind: Kind, rows: Row[], calls: CallRecord[]): Data {
  if (kind === 'timestamp') {
    const source = TIMESTAMPS[name]
    return int64Data(TYPES.timestamp() as Timestamp, source ? rows.map((r) => r[source]) : rows.map(() => null))
  }
  if (kind === 'int64')
    return int64Data(
      new Int64(),
      rows.map((r) => r[INTEGERS[name]!]),
    )
  const values = calls.map((c) => {
    const v = c[name]
    if (v === null || v === undefined) return null
    return kind === 'json' ? JSON.stringify(v) : String(v)
  })
  return vectorFromArray(values, new Utf8()).data[0]!
}

/** One batch of rows (calls-sql.ts CH_SELECT_OUT) as one record batch of the plan's schema. */
export function rowsToBatch(plan: ChArrowPlan, rows: Row[]): RecordBatch {
  const calls = rows.map(toCall)
  const children = plan.names.map((n, i) => columnData(n, plan.kinds[i]!, rows, calls))
  const data = makeData({ type: new Struct(plan.schema.fields), length: rows.length, nullCount: 0, children })
  return new RecordBatch(plan.schema, data)
}
