import { localTable, onCluster, table, type Layout } from './layout.js'
import { createTable, type TableSpec } from './schema.js'

/**
 * The statistics rollups on ClickHouse (docs/clickhouse.md, "Statistics from rollups"): tables fed
 * by materialized views from each insert into call_parts. A view sees one insert at a time, never
 * the call's other parts, so a rollup holds only what a single part states exactly: a part with
 * `started_at` (a start, or a batch's start and end folded into one) is the only part that carries
 * the call's start time, op and parent, so counting those parts per hour, op and root-or-not counts
 * every call once — unless the call has two such parts or is deleted. `stats_call_marks` finds those
 * calls, and the read corrects for them from their parts (stats-rollup-sql.ts).
 */

/** Start-bearing parts per (project, UTC hour in ms, op, root or not). */
export const STATS_CALLS_HOURLY: TableSpec = {
  name: 'stats_calls_hourly',
  columns: ['project_id String', 'hour Int64', 'op_name String', 'is_root Bool', 'n SimpleAggregateFunction(sum, UInt64)'],
  engine: 'AggregatingMergeTree',
  orderBy: '(project_id, hour, op_name, is_root)',
  shardBy: 'cityHash64(project_id, hour)',
}

/**
 * The same counts for the parts written before the views existed (a database upgraded to migration 4):
 * one row per group, replaced whole by a repeated backfill, so running the migration again changes nothing.
 */
export const STATS_CALLS_BACKFILL: TableSpec = {
  name: 'stats_calls_hourly_backfill',
  columns: ['project_id String', 'hour Int64', 'op_name String', 'is_root Bool', 'n UInt64'],
  engine: 'ReplacingMergeTree',
  orderBy: '(project_id, hour, op_name, is_root)',
  shardBy: 'cityHash64(project_id, hour)',
}

/** Per call, its start-bearing parts and delete parts: a call with more than one start, or any delete, is corrected at read. */
export const STATS_CALL_MARKS: TableSpec = {
  name: 'stats_call_marks',
  columns: [
    'project_id String',
    'id String',
    'starts SimpleAggregateFunction(sum, UInt64)',
    'deletes SimpleAggregateFunction(sum, UInt64)',
  ],
  engine: 'AggregatingMergeTree',
  orderBy: '(project_id, id)',
  shardBy: 'cityHash64(project_id, id)',
}

/** The marks of the parts written before the views existed, replaced whole by a repeated backfill. */
export const STATS_MARKS_BACKFILL: TableSpec = {
  name: 'stats_call_marks_backfill',
  columns: ['project_id String', 'id String', 'starts UInt64', 'deletes UInt64'],
  engine: 'ReplacingMergeTree',
  orderBy: '(project_id, id)',
  shardBy: 'cityHash64(project_id, id)',
}

/** When the views started counting (ClickHouse's clock, `call_parts.created_at`): the backfill takes what came before. */
const META = 'stats_rollup_meta'

/** The start hour (ms since the epoch, floored, before 1970 too) of a part's started_at. */
export const HOUR_OF =
  'toUnixTimestamp64Milli(assumeNotNull(started_at)) - positiveModulo(toUnixTimestamp64Milli(assumeNotNull(started_at)), 3600000)'

/** Start-bearing parts of `from` counted per project, hour, op, root or not, and the extra key columns `keys` (`, user_id, run_id`). */
export function hourlySelect(from: string, since: string, keys = ''): string {
  return `SELECT project_id, ${HOUR_OF} AS hour, ifNull(op_name, '') AS op_name, parent_id IS NULL AS is_root${keys}, count() AS n
  FROM ${from} WHERE started_at IS NOT NULL AND ${since}
  GROUP BY project_id, hour, op_name, is_root${keys}`
}

function marksSelect(from: string, since: string): string {
  return `SELECT project_id, id, countIf(started_at IS NOT NULL) AS starts, countIf(deleted_at IS NOT NULL) AS deletes
  FROM ${from} WHERE (started_at IS NOT NULL OR deleted_at IS NOT NULL) AND ${since}
  GROUP BY project_id, id`
}

/**
 * Migration 4's statements. The hourly view counts parts created at or after the recorded `since`
 * (nothing until it is recorded); the backfill counts those before it into a table a re-run replaces.
 * `since` is recorded once, after the view exists, so every part falls on exactly one side.
 */
export function statsRollupStatements(l: Layout): string[] {
  const meta = table(l, META)
  const metaLocal = l.cluster ? `ReplicatedMergeTree('/clickhouse/tables/all/{database}/{table}', '{replica}')` : 'MergeTree'
  const since = `(SELECT minOrNull(since) FROM ${meta})`
  return [
    `CREATE TABLE IF NOT EXISTS ${meta}${onCluster(l)} (since DateTime64(3, 'UTC')) ENGINE = ${metaLocal} ORDER BY tuple()`,
    ...[STATS_CALLS_HOURLY, STATS_CALLS_BACKFILL, STATS_CALL_MARKS, STATS_MARKS_BACKFILL].flatMap((t) => createTable(l, t)),
    `CREATE MATERIALIZED VIEW IF NOT EXISTS ${table(l, 'stats_calls_hourly_mv')}${onCluster(l)} TO ${localTable(l, 'stats_calls_hourly')} AS
  ${hourlySelect(localTable(l, 'call_parts'), `created_at >= ${since}`)}`,
    `CREATE MATERIALIZED VIEW IF NOT EXISTS ${table(l, 'stats_call_marks_mv')}${onCluster(l)} TO ${localTable(l, 'stats_call_marks')} AS
  ${marksSelect(localTable(l, 'call_parts'), `created_at >= ${since}`)}`,
    `INSERT INTO ${meta} (since) SELECT now64(3) WHERE (SELECT count() FROM ${meta}) = 0`,
    `INSERT INTO ${table(l, 'stats_calls_hourly_backfill')} ${hourlySelect(table(l, 'call_parts'), `created_at < ${since}`)}`,
    `INSERT INTO ${table(l, 'stats_call_marks_backfill')} ${marksSelect(table(l, 'call_parts'), `created_at < ${since}`)}`,
  ]
}
