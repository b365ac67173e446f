import {
  Float64,
  RecordBatch,
  Int64,
  Schema,
  Table,
  TimeUnit,
  Timestamp,
  Utf8,
  makeData,
  makeVector,
  vectorFromArray,
  type Vector,
} from 'apache-arrow'

type Bucket = Record<string, unknown>
const FIXED = new Set(['timestamp', 'model', 'count'])

/** Timestamps as Timestamp(µs, UTC) from the answer's ISO strings. */
function timestamps(values: string[]): Vector {
  const data = BigInt64Array.from(values, (v) => BigInt(Date.parse(v)) * 1000n)
  return makeVector(makeData({ type: new Timestamp(TimeUnit.MICROSECOND, 'UTC'), length: values.length, nullCount: 0, data }))
}

/**
 * A /calls/stats answer as one Arrow table (docs/statistics.md, `/calls/stats`): a row per call bucket
 * (`kind` = `call`, `model` null) and per usage bucket (`kind` = `usage`), in the JSON answer's
 * order, call buckets first; `timestamp` as Timestamp(µs, UTC), `count` Int64, every metric column
 * Float64 (null where the JSON has null or the row's kind has no such metric). The answer's start,
 * end, granularity and timezone are the schema's metadata. The buckets are few (at most 10,000 per
 * model), so they are built from the assembled answer rather than from DuckDB chunks.
 */
export function statsTable(result: Record<string, unknown>): Table {
  const calls = (result.call_buckets as Bucket[]) ?? []
  const usage = (result.usage_buckets as Bucket[]) ?? []
  const rows = [...calls, ...usage]
  const metrics: string[] = []
  for (const b of [calls[0], usage[0]]) for (const k of Object.keys(b ?? {})) if (!FIXED.has(k) && !metrics.includes(k)) metrics.push(k)
  const num = (v: unknown) => (v === null || v === undefined ? null : Number(v))
  const columns: Record<string, Vector> = {
    kind: vectorFromArray([...calls.map(() => 'call'), ...usage.map(() => 'usage')], new Utf8()),
    timestamp: timestamps(rows.map((b) => String(b.timestamp))),
    model: vectorFromArray(
      rows.map((b) => (b.model === undefined ? null : String(b.model))),
      new Utf8(),
    ),
    count: vectorFromArray(
      rows.map((b) => BigInt(Number(b.count ?? 0))),
      new Int64(),
    ),
  }
  for (const m of metrics)
    columns[m] = vectorFromArray(
      rows.map((b) => num(b[m])),
      new Float64(),
    )
  const table = new Table(columns)
  const metadata = new Map(['start', 'end', 'granularity', 'timezone'].map((k) => [k, String(result[k])]))
  const schema = new Schema(table.schema.fields, metadata)
  return new Table(
    schema,
    table.batches.map((b) => new RecordBatch(schema, b.data)),
  )
}
