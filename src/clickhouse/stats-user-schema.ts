import { localTable, onCluster, table, type Layout } from './layout.js'
import { createTable, type TableSpec } from './schema.js'
import { addColumn } from './schema-catalog.js'
import {
  doneSelect,
  doneHourlySelect,
  STATS_CALL_DONE,
  STATS_DONE_HOURLY,
  STATS_USAGE_HOURLY,
  usageHourlySelect,
} from './stats-done-schema.js'
import { hourlySelect, STATS_CALLS_BACKFILL, STATS_CALLS_HOURLY } from './stats-schema.js'

/**
 * The user tier of the statistics rollups (migration 6; docs/clickhouse.md, "Statistics from
 * rollups"): the op tier's three rollups keyed by the call's user and run too, so a request filtered
 * on `svc_user_ids`/`svc_run_ids` reads rollups instead of merging every call. Only the start part
 * carries user and run, as it carries the op: the counts' view keys them from the part, and the
 * emitting view (re-created here) writes them into `stats_call_done` beside the hour and op it takes
 * from the same side. Parts and emissions from before this migration are backfilled into tables a
 * re-run replaces (ReplacingMergeTree, read with FINAL), as migration 4 does.
 *
 * User and run may be NULL (a run id usually is), and NULL must not match a listed '' — so the keys
 * are Nullable, which a sorting key allows only with `allow_nullable_key`.
 */

const KEYS = ['user_id Nullable(String)', 'run_id Nullable(String)']
const NULLABLE = 'allow_nullable_key = 1'
const K = ', user_id, run_id'

/** An op-tier table's spec keyed by user and run too, under `name` (`plain`: the backfill's engine and plain column types). */
function keyed(t: TableSpec, name: string, plain = false): TableSpec {
  const at = t.columns.findIndex((c) => c.startsWith('is_root '))
  const columns = [...t.columns.slice(0, at + 1), ...KEYS, ...t.columns.slice(at + 1)].map((c) =>
    plain ? c.replace(/SimpleAggregateFunction\(\w+, (.+)\)$/, '$1') : c,
  )
  const orderBy = t.orderBy.replace('is_root', 'is_root, user_id, run_id')
  return { ...t, name, columns, orderBy, settings: NULLABLE, ...(plain ? { engine: 'ReplacingMergeTree' as const } : {}) }
}

export const STATS_CALLS_USER_HOURLY = keyed(STATS_CALLS_HOURLY, 'stats_calls_user_hourly')
export const STATS_CALLS_USER_BACKFILL = keyed(STATS_CALLS_BACKFILL, 'stats_calls_user_backfill')
export const STATS_DONE_USER_HOURLY = keyed(STATS_DONE_HOURLY, 'stats_done_user_hourly')
export const STATS_DONE_USER_BACKFILL = keyed(STATS_DONE_HOURLY, 'stats_done_user_backfill', true)
export const STATS_USAGE_USER_HOURLY = keyed(STATS_USAGE_HOURLY, 'stats_usage_user_hourly')
export const STATS_USAGE_USER_BACKFILL = keyed(STATS_USAGE_HOURLY, 'stats_usage_user_backfill', true)

/**
 * The user and run each emission written before this migration is rolled up under (its rows in
 * stats_call_done have `keyed` false): those of the call's first start part before `since`, which no
 * later part changes, so a re-run finds the same. A call that needs it correct (a retried start) is
 * corrected at read, its emission taken out under these same keys.
 */
export const STATS_DONE_KEYS: TableSpec = {
  name: 'stats_done_keys',
  columns: ['project_id String', 'id String', ...KEYS],
  engine: 'ReplacingMergeTree',
  orderBy: '(project_id, id)',
  shardBy: 'cityHash64(project_id, id)',
}

/** Emissions from before the migration with the user and run STATS_DONE_KEYS gives them (`g`: GLOBAL on a cluster). */
function oldEmissions(l: Layout, g: string): string {
  return `(SELECT d.project_id AS project_id, d.hour AS hour, d.op_name AS op_name, d.is_root AS is_root, d.lat AS lat, d.err AS err,
      d.usage AS usage, k.user_id AS user_id, k.run_id AS run_id
    FROM ${table(l, 'stats_call_done')} AS d
    ${g}INNER JOIN (SELECT project_id, id, user_id, run_id FROM ${table(l, 'stats_done_keys')} FINAL) AS k
      ON k.project_id = d.project_id AND k.id = d.id
    WHERE NOT d.keyed)`
}

/**
 * Migration 6's statements, in an order that leaves every part and emission on exactly one side: the
 * tables and the new columns; the user tier's views on stats_call_done (which take only `keyed` rows);
 * the old emitting view dropped and the keyed one created (a call whose halves arrive in between is
 * emitted by neither, and its marks say so: it is corrected at read); the counts' view; `since`,
 * once; then the backfills of what came before.
 */
export function statsUserStatements(l: Layout): string[] {
  const meta = table(l, 'stats_user_meta')
  const metaLocal = l.cluster ? `ReplicatedMergeTree('/clickhouse/tables/all/{database}/{table}', '{replica}')` : 'MergeTree'
  const since = `(SELECT minOrNull(since) FROM ${meta})`
  const doneSince = `(SELECT minOrNull(since) FROM ${table(l, 'stats_done_meta')})`
  const mv = (name: string, to: string, select: string) =>
    `CREATE MATERIALIZED VIEW IF NOT EXISTS ${table(l, name)}${onCluster(l)} TO ${localTable(l, to)} AS\n  ${select}`
  const done = localTable(l, 'stats_call_done')
  const g = l.cluster ? 'GLOBAL ' : ''
  const tables = [
    STATS_CALLS_USER_HOURLY,
    STATS_CALLS_USER_BACKFILL,
    STATS_DONE_USER_HOURLY,
    STATS_DONE_USER_BACKFILL,
    STATS_USAGE_USER_HOURLY,
    STATS_USAGE_USER_BACKFILL,
    STATS_DONE_KEYS,
  ]
  return [
    `CREATE TABLE IF NOT EXISTS ${meta}${onCluster(l)} (since DateTime64(3, 'UTC')) ENGINE = ${metaLocal} ORDER BY tuple()`,
    ...tables.flatMap((t) => createTable(l, t)),
    ...[...KEYS, 'keyed Bool DEFAULT false'].flatMap((c) => addColumn(l, STATS_CALL_DONE, c)),
    mv('stats_done_user_hourly_mv', 'stats_done_user_hourly', doneHourlySelect(done, K, ' WHERE keyed')),
    mv('stats_usage_user_hourly_mv', 'stats_usage_user_hourly', usageHourlySelect(done, K, ' WHERE keyed')),
    `DROP VIEW IF EXISTS ${table(l, 'stats_call_done_mv')}${onCluster(l)}`,
    mv('stats_call_done_keyed_mv', 'stats_call_done', doneSelect(l, doneSince, true)),
    mv('stats_calls_user_hourly_mv', 'stats_calls_user_hourly', hourlySelect(localTable(l, 'call_parts'), `created_at >= ${since}`, K)),
    `INSERT INTO ${meta} (since) SELECT now64(3) WHERE (SELECT count() FROM ${meta}) = 0`,
    `INSERT INTO ${table(l, 'stats_calls_user_backfill')} ${hourlySelect(table(l, 'call_parts'), `created_at < ${since}`, K)}`,
    `INSERT INTO ${table(l, 'stats_done_keys')}
  SELECT project_id, id, argMin(tuple(user_id, run_id), seq).1, argMin(tuple(user_id, run_id), seq).2
  FROM ${table(l, 'call_parts')}
  WHERE started_at IS NOT NULL AND created_at < ${since}
    AND (project_id, id) ${g}IN (SELECT project_id, id FROM ${table(l, 'stats_call_done')} WHERE NOT keyed)
  GROUP BY project_id, id`,
    `INSERT INTO ${table(l, 'stats_done_user_backfill')} ${doneHourlySelect(oldEmissions(l, g), K)}`,
    `INSERT INTO ${table(l, 'stats_usage_user_backfill')} ${usageHourlySelect(oldEmissions(l, g), K)}`,
  ]
}
