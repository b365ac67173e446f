import { USAGE_FIELDS } from '../calls/model.js'
import { ALPHA } from '../stats/sketch.js'
import { localTable, onCluster, table, type Layout } from './layout.js'
import { createTable, type TableSpec } from './schema.js'
import { addColumn } from './schema-catalog.js'
import { HOUR_OF, STATS_CALL_MARKS } from './stats-schema.js'

/**
 * Latency, errors and usage from rollups on ClickHouse (docs/clickhouse.md, "Statistics from
 * rollups"). They need a call's two halves together — the start's hour, op and parent, the end's
 * `ended_at`, exception and usage — and a view sees one insert. So the view joins each inserted half
 * to the other half already stored (calls_merged, call_usage) and emits the completed call into
 * `stats_call_done` only when that other half came from an earlier part (a lower `seq`): a call whose
 * halves come in order is emitted once, by the later one, or by the one part carrying both. Whatever
 * the order or concurrency of inserts, a call is never emitted twice by that rule, only not at all
 * (the other half not yet visible); `stats_call_marks` counts its halves and emissions, and the read
 * corrects every call whose counts do not say "one start, one end, one emission" from its merged
 * state (stats-rollup-sql.ts). Views on `stats_call_done` roll the emissions up per hour.
 */

/** One row per emitted call: the merged state of a call whose two halves both had arrived. */
export const STATS_CALL_DONE: TableSpec = {
  name: 'stats_call_done',
  columns: [
    'project_id String',
    'id String',
    'hour Int64',
    'op_name String',
    'is_root Bool',
    'lat Int64',
    'err Bool',
    `usage Array(Tuple(model String, ${USAGE_FIELDS.map((f) => `${f} Nullable(Int64)`).join(', ')}))`,
  ],
  engine: 'MergeTree',
  orderBy: '(project_id, id)',
  shardBy: 'cityHash64(project_id, id)',
}

/** Emitted calls per (project, UTC hour, op, root or not): errors, latency sums and extremes, and latency bins (stats/sketch.ts). */
export const STATS_DONE_HOURLY: TableSpec = {
  name: 'stats_done_hourly',
  columns: [
    'project_id String',
    'hour Int64',
    'op_name String',
    'is_root Bool',
    'n SimpleAggregateFunction(sum, Int64)',
    'err SimpleAggregateFunction(sum, Int64)',
    'lat_sum SimpleAggregateFunction(sum, Int64)',
    'lat_min SimpleAggregateFunction(min, Int64)',
    'lat_max SimpleAggregateFunction(max, Int64)',
    'bins SimpleAggregateFunction(sumMap, Tuple(Array(Int64), Array(Int64)))',
  ],
  engine: 'AggregatingMergeTree',
  orderBy: '(project_id, hour, op_name, is_root)',
  shardBy: 'cityHash64(project_id, hour)',
}

/** Token metrics as the statistics scan computes them from a usage row `u` (stats-sql.ts). */
export const TOKEN_EXPRS: Record<string, string> = {
  input_tokens: 'coalesce(u.prompt_tokens, 0) + coalesce(u.input_tokens, 0)',
  output_tokens: 'coalesce(u.completion_tokens, 0) + coalesce(u.output_tokens, 0)',
  total_tokens: 'u.total_tokens',
  cache_read_input_tokens: 'u.cache_read_input_tokens',
  cache_creation_input_tokens: 'u.cache_creation_input_tokens',
}
export const TOKEN_METRICS = Object.keys(TOKEN_EXPRS)

/** Emitted calls' usage rows per (project, hour, op, root or not, model): per metric sum, count, min, max. */
export const STATS_USAGE_HOURLY: TableSpec = {
  name: 'stats_usage_hourly',
  columns: [
    'project_id String',
    'hour Int64',
    'op_name String',
    'is_root Bool',
    'model String',
    'n SimpleAggregateFunction(sum, Int64)',
    ...TOKEN_METRICS.flatMap((m) => [
      `${m}_sum SimpleAggregateFunction(sum, Int64)`,
      `${m}_n SimpleAggregateFunction(sum, Int64)`,
      `${m}_min SimpleAggregateFunction(min, Nullable(Int64))`,
      `${m}_max SimpleAggregateFunction(max, Nullable(Int64))`,
    ]),
  ],
  engine: 'AggregatingMergeTree',
  orderBy: '(project_id, hour, op_name, is_root, model)',
  shardBy: 'cityHash64(project_id, hour)',
}

/**
 * Calls with an end-side part written before migration 5's views existed: their halves were never
 * counted, so the read corrects them from their merged state (a re-run replaces the rows).
 */
export const STATS_DONE_BACKFILL: TableSpec = {
  name: 'stats_done_backfill',
  columns: ['project_id String', 'id String'],
  engine: 'ReplacingMergeTree',
  orderBy: '(project_id, id)',
  shardBy: 'cityHash64(project_id, id)',
}

/** The counts migration 5 adds to stats_call_marks (per call, summed). */
const MARK_COLUMNS = ['ends', 'extras', 'emits', 'usage_in', 'usage_out'].map((c) => `${c} SimpleAggregateFunction(sum, UInt64)`)

/** A part's end side: it carries `ended_at` (an end, or a start and end folded into one part). */
const END = 'ended_at IS NOT NULL'
/** A part that carries an exception or usage without `ended_at`: its call is always corrected. */
const EXTRA = 'ended_at IS NULL AND (exception IS NOT NULL OR notEmpty(usage))'

/** The sketch bin of a latency `lat`, as stats-sql.ts computes it (sketch.ts binSql), with ln γ as a literal. */
export function binOf(lat: string, lnGamma: string): string {
  return `sign(${lat}) * (1 + greatest(0, toInt64(ceil(log(greatest(abs(${lat}), 1)) / ${lnGamma}))))`
}
const LN_GAMMA = String(Math.log((1 + ALPHA) / (1 - ALPHA)))

const USAGE_TYPE = `Array(Tuple(model String, ${USAGE_FIELDS.map((f) => `${f} Nullable(Int64)`).join(', ')}))`

/**
 * The emitting view's SELECT over an insert into call_parts (`p`): each part with a start or an end
 * joined to its call's other half as stored (`m`: the latest start and end with the seq of the part
 * that carried them, and that end part's usage rows). `keyed` (migration 6, stats-user-schema.ts): the
 * call's user and run too, from the start's side as its hour and op, and `keyed` set.
 */
export function doneSelect(l: Layout, since: string, keyed = false): string {
  const parts = localTable(l, 'call_parts')
  const usage = USAGE_FIELDS.join(', ')
  const other = `SELECT c.project_id AS project_id, c.id AS id, max(c.started_at) AS s, max(c.ended_at) AS e,
        max(c.exception).2 AS x, max(c.op_name).2 AS o, max(c.parent_id).2 AS par${keyed ? ', max(c.user_id).2 AS uid, max(c.run_id).2 AS rid' : ''}
      FROM ${localTable(l, 'calls_merged')} AS c
      WHERE (c.project_id, c.id) IN (SELECT project_id, id FROM ${parts})
      GROUP BY c.project_id, c.id`
  const used = `SELECT project_id, id, seq, CAST(groupArray(tuple(model, ${usage})), '${USAGE_TYPE}') AS us
      FROM ${localTable(l, 'call_usage')}
      WHERE (project_id, id) IN (SELECT project_id, id FROM ${parts})
      GROUP BY project_id, id, seq`
  const S = 'p.started_at IS NOT NULL'
  const E = 'p.ended_at IS NOT NULL'
  const st = `if(${S}, p.started_at, tupleElement(m.s, 2))`
  return `SELECT p.project_id AS project_id, p.id AS id,
    ${HOUR_OF.replaceAll('started_at', st)} AS hour,
    if(${S}, ifNull(p.op_name, ''), ifNull(m.o, '')) AS op_name,
    if(${S}, p.parent_id IS NULL, m.par IS NULL) AS is_root,
    toUnixTimestamp64Milli(assumeNotNull(if(${E}, p.ended_at, tupleElement(m.e, 2)))) - toUnixTimestamp64Milli(assumeNotNull(${st})) AS lat,
    if(${E}, p.exception, m.x) IS NOT NULL AS err,
    if(${E}, p.usage, u.us) AS usage${
      keyed
        ? `,
    if(${S}, p.user_id, m.uid) AS user_id, if(${S}, p.run_id, m.rid) AS run_id, true AS keyed`
        : ''
    }
  FROM ${parts} AS p
  LEFT JOIN (${other}) AS m ON m.project_id = p.project_id AND m.id = p.id
  LEFT JOIN (${used}) AS u ON u.project_id = p.project_id AND u.id = p.id AND u.seq = tupleElement(m.e, 1)
  WHERE p.created_at >= ${since} AND (
    (${S} AND ${E})
    OR (${E} AND NOT ${S} AND tupleElement(m.s, 1) > 0 AND tupleElement(m.s, 1) < p.seq)
    OR (${S} AND NOT ${E} AND tupleElement(m.e, 1) > 0 AND tupleElement(m.e, 1) < p.seq))`
}

/**
 * Emitted calls (rows of `from`, a stats_call_done shape) rolled up per project, hour, op, root or not,
 * and the extra key columns `keys` (`, user_id, run_id` for migration 6's tier; `where`: which rows).
 */
export function doneHourlySelect(from: string, keys = '', where = ''): string {
  return `SELECT project_id, hour, op_name, is_root${keys}, toInt64(count()) AS n, toInt64(countIf(err)) AS err, sum(lat) AS lat_sum,
    min(lat) AS lat_min, max(lat) AS lat_max, sumMap([${binOf('lat', LN_GAMMA)}], [toInt64(1)]) AS bins
  FROM ${from}${where} GROUP BY project_id, hour, op_name, is_root${keys}`
}

/** Emitted calls' usage rows per the same keys and the model (doneHourlySelect's arguments). */
export function usageHourlySelect(from: string, keys = '', where = ''): string {
  const aggs = Object.entries(TOKEN_EXPRS).map(
    ([m, e]) => `toInt64(coalesce(sum(${e}), 0)) AS ${m}_sum, toInt64(count(${e})) AS ${m}_n, min(${e}) AS ${m}_min, max(${e}) AS ${m}_max`,
  )
  return `SELECT project_id, hour, op_name, is_root${keys}, u.model AS model, toInt64(count()) AS n, ${aggs.join(', ')}
  FROM ${from} ARRAY JOIN usage AS u${where} GROUP BY project_id, hour, op_name, is_root${keys}, model`
}

/**
 * Migration 5's statements: the tables, the new mark counts, `since` (recorded once, as migration 4
 * does), the views (counting parts created at or after it), and the backfill of the calls before it.
 */
export function statsDoneStatements(l: Layout): string[] {
  const meta = table(l, 'stats_done_meta')
  const metaLocal = l.cluster ? `ReplicatedMergeTree('/clickhouse/tables/all/{database}/{table}', '{replica}')` : 'MergeTree'
  const since = `(SELECT minOrNull(since) FROM ${meta})`
  const mv = (name: string, to: string, select: string) =>
    `CREATE MATERIALIZED VIEW IF NOT EXISTS ${table(l, name)}${onCluster(l)} TO ${localTable(l, to)} AS\n  ${select}`
  const parts = localTable(l, 'call_parts')
  return [
    `CREATE TABLE IF NOT EXISTS ${meta}${onCluster(l)} (since DateTime64(3, 'UTC')) ENGINE = ${metaLocal} ORDER BY tuple()`,
    ...[STATS_CALL_DONE, STATS_DONE_HOURLY, STATS_USAGE_HOURLY, STATS_DONE_BACKFILL].flatMap((t) => createTable(l, t)),
    ...MARK_COLUMNS.flatMap((c) => addColumn(l, STATS_CALL_MARKS, c)),
    // The views on stats_call_done first: the emitting view's rows must reach them.
    mv('stats_done_hourly_mv', 'stats_done_hourly', doneHourlySelect(localTable(l, 'stats_call_done'))),
    mv('stats_usage_hourly_mv', 'stats_usage_hourly', usageHourlySelect(localTable(l, 'stats_call_done'))),
    mv(
      'stats_done_emits_mv',
      'stats_call_marks',
      `SELECT project_id, id, count() AS emits, sum(length(usage)) AS usage_out FROM ${localTable(l, 'stats_call_done')} GROUP BY project_id, id`,
    ),
    mv(
      'stats_done_marks_mv',
      'stats_call_marks',
      `SELECT project_id, id, countIf(${END}) AS ends, countIf(${EXTRA}) AS extras, sumIf(length(usage), ${END}) AS usage_in
  FROM ${parts} WHERE (${END} OR ${EXTRA}) AND created_at >= ${since} GROUP BY project_id, id`,
    ),
    mv('stats_call_done_mv', 'stats_call_done', doneSelect(l, since)),
    `INSERT INTO ${meta} (since) SELECT now64(3) WHERE (SELECT count() FROM ${meta}) = 0`,
    `INSERT INTO ${table(l, 'stats_done_backfill')} SELECT DISTINCT project_id, id FROM ${table(l, 'call_parts')}
  WHERE (${END} OR ${EXTRA}) AND created_at < ${since}`,
  ]
}
