import { USAGE_FIELDS } from '../calls/model.js'
import { ident } from './executor.js'
import { localTable, onCluster, table, type Layout } from './layout.js'

/**
 * The backend's tables, modelled on Weave's ClickHouse schema (docs/clickhouse.md says where and why
 * they differ). Generated per Layout: the same definitions give single-node and cluster DDL.
 */
export interface TableSpec {
  name: string
  columns: string[]
  engine: 'MergeTree' | 'AggregatingMergeTree' | 'ReplacingMergeTree'
  /** ReplacingMergeTree's version column: the row with the highest one is kept. */
  version?: string
  orderBy: string
  /** Which shard a row goes to on a cluster (Distributed's sharding key). */
  shardBy: string
  settings?: string
}

const TS = "DateTime64(6, 'UTC')"
const TEXT = 'Nullable(String) CODEC(ZSTD(1))'

/** A call's fields, by type, as its parts carry them (calls/model.ts FOLDED, but usage). */
export const CALL_FIELDS: [string, string][] = [
  ...['trace_id', 'parent_id', 'thread_id', 'turn_id', 'op_name', 'display_name'].map((c): [string, string] => [c, 'Nullable(String)']),
  ['started_at', `Nullable(${TS})`],
  ['ended_at', `Nullable(${TS})`],
  ...['attributes', 'inputs', 'output', 'summary'].map((c): [string, string] => [c, 'Nullable(String)']),
  ['exception', 'Nullable(String)'],
  ['user_id', 'Nullable(String)'],
  ['run_id', 'Nullable(String)'],
  ['run_step', 'Nullable(Int64)'],
  ['run_step_end', 'Nullable(Int64)'],
]
const HEAVY = new Set(['attributes', 'inputs', 'output', 'summary', 'exception'])

const USAGE_TUPLE = `Tuple(model String, ${USAGE_FIELDS.map((f) => `${f} Nullable(Int64)`).join(', ')})`

export const CALL_PARTS: TableSpec = {
  name: 'call_parts',
  columns: [
    'project_id String',
    'id String',
    // Arrival order, given by the writer (calls.ts): a later part's non-null value wins in calls_merged.
    'seq UInt64',
    'kind LowCardinality(String)',
    ...CALL_FIELDS.map(([c, t]) => `${c} ${HEAVY.has(c) ? TEXT : t}`),
    `deleted_at Nullable(${TS})`,
    'input_refs Array(String)',
    'output_refs Array(String)',
    `usage Array(${USAGE_TUPLE})`,
    "created_at DateTime64(3, 'UTC') DEFAULT now64(3)",
  ],
  engine: 'MergeTree',
  orderBy: '(project_id, id)',
  shardBy: 'cityHash64(project_id, id)',
}

/**
 * One row per call once ClickHouse has merged it (queries still GROUP BY, for parts not merged yet).
 * Each field is the max of (seq, value) with seq 0 for a part that lacks the field: the latest
 * non-null value, with no -State/-Merge functions — every column a SimpleAggregateFunction.
 */
export const CALLS_MERGED: TableSpec = {
  name: 'calls_merged',
  columns: [
    'project_id String',
    'id String',
    ...CALL_FIELDS.map(([c, t]) => `${c} SimpleAggregateFunction(max, Tuple(UInt64, ${t}))${HEAVY.has(c) ? ' CODEC(ZSTD(1))' : ''}`),
    `deleted_at SimpleAggregateFunction(max, Nullable(${TS}))`,
    'input_refs SimpleAggregateFunction(groupUniqArrayArray, Array(String))',
    'output_refs SimpleAggregateFunction(groupUniqArrayArray, Array(String))',
    "updated_at SimpleAggregateFunction(max, DateTime64(3, 'UTC'))",
    // Skip indexes for the common filters: id order is time order for UUIDv7 ids, these cover the rest.
    'INDEX idx_trace tupleElement(trace_id, 2) TYPE bloom_filter GRANULARITY 4',
    'INDEX idx_parent tupleElement(parent_id, 2) TYPE bloom_filter GRANULARITY 4',
    'INDEX idx_op tupleElement(op_name, 2) TYPE set(256) GRANULARITY 4',
    'INDEX idx_started tupleElement(started_at, 2) TYPE minmax GRANULARITY 4',
  ],
  engine: 'AggregatingMergeTree',
  orderBy: '(project_id, id)',
  shardBy: 'cityHash64(project_id, id)',
}

/** summary.usage as typed rows, one per (call, model): statistics sum columns, never parse JSON. */
export const CALL_USAGE: TableSpec = {
  name: 'call_usage',
  columns: ['project_id String', 'id String', 'model String', 'seq UInt64', ...USAGE_FIELDS.map((f) => `${f} Nullable(Int64)`)],
  engine: 'ReplacingMergeTree',
  version: 'seq',
  orderBy: '(project_id, id, model)',
  shardBy: 'cityHash64(project_id, id)',
}

/**
 * Which calls a trace holds, in trace order: what `trace_ids` filters (a trace's calls, `/calls/usage`,
 * `/trace/usage`) look up instead of reading every call's trace_id in calls_merged (ordered by id, so a
 * trace's calls sit in every granule and its bloom filter prunes nothing). A superset is harmless, as
 * queries check the merged call's trace_id again: rows are never removed, and duplicates collapse.
 * Sharded by call, as calls_merged is, so the lookup stays shard-local.
 */
export const CALL_TRACES: TableSpec = {
  name: 'call_traces',
  columns: ['project_id String', 'trace_id String', 'id String'],
  engine: 'ReplacingMergeTree',
  orderBy: '(project_id, trace_id, id)',
  shardBy: 'cityHash64(project_id, id)',
}

/**
 * Migration 7: call_traces, its view, then the calls written before it. The view exists before the
 * backfill reads, so a part written meanwhile is in both (a duplicate, collapsed) rather than in neither;
 * a start that dies half way runs it all again, to the same effect.
 */
export function callTracesStatements(l: Layout): string[] {
  // Not `assumeNotNull(trace_id) AS trace_id … WHERE trace_id IS NOT NULL`: ClickHouse resolves the WHERE's name
  // to the alias, which is never null, and every traceless part would come in with trace ''.
  const rows = (from: string) =>
    `SELECT project_id, assumeNotNull(t) AS trace_id, id FROM (SELECT project_id, trace_id AS t, id FROM ${from} WHERE t IS NOT NULL)`
  return [
    ...createTable(l, CALL_TRACES),
    `CREATE MATERIALIZED VIEW IF NOT EXISTS ${table(l, 'call_traces_mv')}${onCluster(l)} TO ${localTable(l, 'call_traces')} AS
  ${rows(localTable(l, 'call_parts'))}`,
    // On a cluster through the Distributed tables: each row lands on its call's shard (shardBy).
    `INSERT INTO ${table(l, 'call_traces')} ${rows(table(l, 'call_parts'))}`,
  ]
}

/** The materialized views that feed calls_merged and call_usage from each insert into call_parts. */
export function callViews(l: Layout): string[] {
  const fields = CALL_FIELDS.map(([c]) => `(if(isNull(${c}), 0, seq), ${c}) AS ${c}`).join(',\n    ')
  const usage = USAGE_FIELDS.map((f) => `u.${f} AS ${f}`).join(', ')
  return [
    `CREATE MATERIALIZED VIEW IF NOT EXISTS ${table(l, 'calls_merged_mv')}${onCluster(l)} TO ${localTable(l, 'calls_merged')} AS
  SELECT project_id, id,
    ${fields},
    deleted_at, input_refs, output_refs, created_at AS updated_at
  FROM ${localTable(l, 'call_parts')}`,
    `CREATE MATERIALIZED VIEW IF NOT EXISTS ${table(l, 'call_usage_mv')}${onCluster(l)} TO ${localTable(l, 'call_usage')} AS
  SELECT project_id, id, u.model AS model, seq, ${usage}
  FROM ${localTable(l, 'call_parts')} ARRAY JOIN usage AS u`,
  ]
}

/** CREATE TABLE for a spec: the table itself, or on a cluster its Replicated local table and a Distributed one. */
export function createTable(l: Layout, t: TableSpec): string[] {
  const version = t.version ? `, ${t.version}` : ''
  const engine = l.cluster
    ? `Replicated${t.engine}('/clickhouse/tables/{shard}/{database}/{table}', '{replica}'${version})`
    : `${t.engine}(${t.version ?? ''})`
  const local = `CREATE TABLE IF NOT EXISTS ${localTable(l, t.name)}${onCluster(l)} (\n  ${t.columns.join(',\n  ')}\n)
ENGINE = ${engine}
ORDER BY ${t.orderBy}${t.settings ? `\nSETTINGS ${t.settings}` : ''}`
  if (!l.cluster) return [local]
  const dist = `CREATE TABLE IF NOT EXISTS ${table(l, t.name)}${onCluster(l)} AS ${localTable(l, t.name)}
ENGINE = Distributed(${ident(l.cluster)}, ${ident(l.database)}, ${ident(t.name + '_local')}, ${t.shardBy})`
  return [local, dist]
}
