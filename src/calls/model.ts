import type { CallsQueryReq } from '../schemas/calls-write.js'
import type { RawJson } from './ingest/raw-json.js'

export type { CallFilter } from '../schemas/common.js'

/**
 * One part of a call as it arrives: a start, an end, a display-name update or a delete. Parts are
 * appended, never changed; a call is the merge of its parts (docs/calls-and-storage.md). JSON-valued
 * fields are kept as JSON text (or, from the ingest fast path, as the bytes sent: RawJson);
 * timestamps as microseconds since the epoch.
 */
export interface CallPart {
  /** merged: several parts of one call folded into one (compaction; parts of a call sent in one batch). */
  kind: 'start' | 'end' | 'update' | 'delete' | 'merged'
  project_id: string
  id: string
  trace_id?: string | null
  parent_id?: string | null
  thread_id?: string | null
  turn_id?: string | null
  op_name?: string | null
  display_name?: string | null
  /** Microseconds since the epoch. */
  started_us?: string | number | null
  ended_us?: string | number | null
  deleted_us?: string | number | null
  attributes?: string | RawJson | null
  inputs?: string | RawJson | null
  output?: string | RawJson | null
  summary?: string | null
  exception?: string | null
  user_id?: string | null
  run_id?: string | null
  run_step?: number | null
  run_step_end?: number | null
  input_refs?: string[]
  output_refs?: string[]
  /** summary.usage as typed rows, one per model (see usageRows). */
  usage?: UsageRow[]
}

/** What a calls query takes of a /calls/query request. */
export type QueryOptions = Pick<CallsQueryReq, 'filter' | 'query' | 'sort_by' | 'limit' | 'offset'>

export type CallRecord = Record<string, unknown>

/** The token counters kept as typed columns, one row per (call, model). */
export const USAGE_FIELDS = [
  'requests',
  'prompt_tokens',
  'input_tokens',
  'completion_tokens',
  'output_tokens',
  'total_tokens',
  'cache_read_input_tokens',
  'cache_creation_input_tokens',
] as const
export type UsageRow = { model: string } & Partial<Record<(typeof USAGE_FIELDS)[number], number | null>>

/** A part as a DuckDB row: the tail table's and the segments' columns. */
export const PART_COLUMNS = `
  seq BIGINT NOT NULL, kind VARCHAR NOT NULL, project_id VARCHAR NOT NULL, id VARCHAR NOT NULL,
  trace_id VARCHAR, parent_id VARCHAR, thread_id VARCHAR, turn_id VARCHAR, op_name VARCHAR, display_name VARCHAR,
  started_at TIMESTAMP, ended_at TIMESTAMP, deleted_at TIMESTAMP,
  attributes VARCHAR, inputs VARCHAR, output VARCHAR, summary VARCHAR, exception VARCHAR,
  user_id VARCHAR, run_id VARCHAR, run_step BIGINT, run_step_end BIGINT,
  input_refs VARCHAR[], output_refs VARCHAR[],
  usage STRUCT(model VARCHAR, ${USAGE_FIELDS.map((f) => `${f} BIGINT`).join(', ')})[]`

/** An encoded part's fields (see encodeParts), by type: text, microseconds, integers. */
export const STRING_FIELDS = [
  'kind',
  'project_id',
  'id',
  'trace_id',
  'parent_id',
  'thread_id',
  'turn_id',
  'op_name',
  'display_name',
  'attributes',
  'inputs',
  'output',
  'summary',
  'exception',
  'user_id',
  'run_id',
] as const
export const MICROS_FIELDS = ['started_us', 'ended_us', 'deleted_us'] as const
export const INT_FIELDS = ['run_step', 'run_step_end'] as const

/** An Arrow parts batch's columns, in order (ingest/parts-batch.ts, arrow/append-parts.ts). */
export const PART_BATCH_FIELDS = [...STRING_FIELDS, ...MICROS_FIELDS, ...INT_FIELDS, 'input_refs', 'output_refs', 'usage'] as const

/** An encoded part's columns as DuckDB's read_json takes them (`columns = …`; see encodeParts and Tail). */
export const PART_READ_COLUMNS = `{${[
  ...STRING_FIELDS.map((f) => `${f}: 'VARCHAR'`),
  ...[...MICROS_FIELDS, ...INT_FIELDS].map((f) => `${f}: 'BIGINT'`),
  "input_refs: 'VARCHAR[]'",
  "output_refs: 'VARCHAR[]'",
  `usage: 'STRUCT(model VARCHAR, ${USAGE_FIELDS.map((f) => `${f} BIGINT`).join(', ')})[]'`,
].join(', ')}}`

/** Latest non-null value of each field over a call's parts, in arrival order. */
export const latest = (c: string) => `arg_max(${c}, seq) FILTER (WHERE ${c} IS NOT NULL) AS ${c}`
/** The fields a call takes from its parts (see latest); the ref lists and deleted_at merge otherwise. */
export const FOLDED = [
  'trace_id',
  'parent_id',
  'thread_id',
  'turn_id',
  'op_name',
  'display_name',
  'started_at',
  'ended_at',
  'attributes',
  'inputs',
  'output',
  'summary',
  'exception',
  'user_id',
  'run_id',
  'run_step',
  'run_step_end',
  'usage',
]
