import type { PriceSpan } from '../catalog/prices.js'
import { table, type Layout } from './layout.js'
import { costAggs, withPrices } from './stats-cost-sql.js'
import type { ChParams } from './query/params.js'
import { binOf, TOKEN_EXPRS, TOKEN_METRICS } from './stats-done-schema.js'
import { suspectsIn, type Suspects } from './stats-rollup-sql.js'
import type { Slots } from './stats-slots.js'
import { HOUR_OF } from './stats-schema.js'
import { keyList, TIERS } from './stats-tiers.js'
import { chLatestUsageSql, LN_GAMMA } from './stats-sql.js'

/**
 * Latency, errors and usage per bucket from the emitted-call rollups (stats-done-schema.ts). Each
 * statement's rows come in two kinds: `sub` 0, what adds up (the hourly rows, and the merged state of
 * the calls to correct), and `sub` 1, the corrected calls' emissions, which the caller takes back out.
 * Their extremes come back too: where one equals the bucket's reported minimum or maximum, the
 * rollup cannot say what is left, and the request is scanned (the embedded engine's `dirty`).
 */

/** The calls to correct (`ids`: the right side of an `IN`), merged, live and started, in the slots' hours: their hour, op, root, the tier's keys, latency (null unended), error, id. */
function mergedSuspects(l: Layout, s: Slots, lg: string, ids: string): string {
  const keys = TIERS[s.tier].keys.map((c) => `, max(${c}).2 AS ${c}`).join('')
  return `SELECT id, ${HOUR_OF} AS hour, ifNull(op_name, '') AS op_name, parent_id IS NULL AS is_root${keyList(s.tier)},
      toUnixTimestamp64Milli(ended_at) - toUnixTimestamp64Milli(started_at) AS lat, exception IS NOT NULL AS err,
      if(lat IS NULL, 0, ${binOf('assumeNotNull(lat)', lg)}) AS k
    FROM (SELECT id, max(started_at).2 AS started_at, max(ended_at).2 AS ended_at, max(exception).2 AS exception,
        max(op_name).2 AS op_name, max(parent_id).2 AS parent_id${keys}, max(deleted_at) AS deleted_at
      FROM ${table(l, 'calls_merged')} WHERE project_id = ${s.p} AND id IN ${ids} GROUP BY id)
    WHERE started_at IS NOT NULL AND deleted_at IS NULL AND ${s.inHours}`
}

/**
 * The corrected calls' emissions in the slots' hours (`FROM` onwards). The user tier reads each under
 * the user and run it was rolled up with: its own (`keyed`, migration 6's view), or for an emission from
 * before that migration the backfill's (stats_done_keys).
 */
function emissions(l: Layout, s: Slots, ids: string): string {
  const done = table(l, 'stats_call_done')
  if (s.tier === 'op') return `FROM ${done} WHERE project_id = ${s.p} AND ${s.inHours} AND id IN ${ids}`
  return `FROM (SELECT d.hour AS hour, d.op_name AS op_name, d.is_root AS is_root, d.lat AS lat, d.err AS err, d.usage AS usage,
        if(d.keyed, d.user_id, k.user_id) AS user_id, if(d.keyed, d.run_id, k.run_id) AS run_id
      FROM ${done} AS d
      LEFT JOIN (SELECT id, user_id, run_id FROM ${table(l, 'stats_done_keys')} FINAL WHERE project_id = ${s.p} AND id IN ${ids}) AS k ON k.id = d.id
      WHERE d.project_id = ${s.p} AND d.id IN ${ids})
    WHERE ${s.inHours}`
}

/** The tier's hourly rows (and its backfill's, read with FINAL) in the slots' hours, as `cols`. */
function hourly(l: Layout, s: Slots, table_: string, backfill: string | null, cols: string): string {
  const where = `WHERE project_id = ${s.p} AND ${s.inHours}`
  const rows = `SELECT ${cols} FROM ${table(l, table_)} ${where}`
  return backfill ? `${rows}\n    UNION ALL SELECT ${cols} FROM ${table(l, backfill)} FINAL ${where}` : rows
}

function bucketed(s: Slots, rows: string, groupBy: string, cols: string): string {
  const where = [s.inHours, ...s.dims].join(' AND ')
  return `SELECT ${s.bucketOf} AS bucket, sub, ${cols}
    FROM (${rows}) WHERE ${where}
    GROUP BY bucket, sub${groupBy}`
}

/** Per bucket and kind: errors, latency count, sum, extremes, and latency bins (`ks`, `ns`). */
export function chRollupDoneSql(l: Layout, s: Slots, params: ChParams, suspects: Suspects = { done: true }): string {
  const lg = params.add(LN_GAMMA, 'Float64')
  const t = TIERS[s.tier]
  const tierKeys = keyList(s.tier)
  const one = 'toInt64(1)'
  const ids = suspectsIn(l, s.p, suspects, params)
  let rows = hourly(
    l,
    s,
    t.done,
    t.doneBackfill,
    `hour, op_name, is_root${tierKeys}, 0 AS sub, err, n AS lat_n, lat_sum, lat_min, lat_max, bins`,
  )
  if (ids !== null)
    rows += `
    UNION ALL SELECT hour, op_name, is_root${tierKeys}, 1, toInt64(err), ${one}, lat, lat, lat, ([${binOf('lat', lg)}], [${one}])
      ${emissions(l, s, ids)}
    UNION ALL SELECT hour, op_name, is_root${tierKeys}, 0, toInt64(err), toInt64(lat IS NOT NULL), coalesce(lat, 0), assumeNotNull(lat), assumeNotNull(lat),
        ([k], [${one}])
      FROM (${mergedSuspects(l, s, lg, ids)}) WHERE lat IS NOT NULL
    UNION ALL SELECT hour, op_name, is_root${tierKeys}, 0, toInt64(err), 0, 0, NULL, NULL, (CAST([], 'Array(Int64)'), CAST([], 'Array(Int64)'))
      FROM (${mergedSuspects(l, s, lg, ids)}) WHERE lat IS NULL AND err`
  return bucketed(
    s,
    rows,
    '',
    `sum(err) AS err, sum(lat_n) AS lat_n, sum(lat_sum) AS lat_sum, min(lat_min) AS lat_min, max(lat_max) AS lat_max,
      sumMap(bins) AS bins`,
  )
}

/**
 * Per bucket, model and kind: usage rows, and each token metric's sum, count and extremes; with
 * `prices` (the request's spans, when it asks for costs), the cost metrics too (stats-cost-sql.ts).
 */
export function chRollupUsageSql(
  l: Layout,
  s: Slots,
  params: ChParams,
  suspects: Suspects = { done: true },
  prices: readonly PriceSpan[] | null = null,
): string {
  const lg = params.add(LN_GAMMA, 'Float64')
  const t = TIERS[s.tier]
  const tierKeys = keyList(s.tier)
  const metricCols = TOKEN_METRICS.flatMap((m) => [`${m}_sum`, `${m}_n`, `${m}_min`, `${m}_max`]).join(', ')
  const fromRow = Object.values(TOKEN_EXPRS)
    .map((e) => `toInt64(coalesce(${e}, 0)), toInt64(${e} IS NOT NULL), ${e}, ${e}`)
    .join(', ')
  const ids = suspectsIn(l, s.p, suspects, params)
  let rows = hourly(l, s, t.usage, t.usageBackfill, `hour, op_name, is_root${tierKeys}, model, 0 AS sub, n, ${metricCols}`)
  if (ids !== null) {
    const merged = mergedSuspects(l, s, lg, ids)
    // A bound list narrows the usage rows by itself; the subquery by the merged calls (evaluated once more).
    const usageOf = 'ids' in suspects ? ids : `(SELECT id FROM (${merged}))`
    rows += `
    UNION ALL SELECT hour, op_name, is_root${tierKeys}, u.model, 1, toInt64(1), ${fromRow}
      FROM (SELECT * ${emissions(l, s, ids)}) ARRAY JOIN usage AS u
    UNION ALL SELECT m.hour, m.op_name, m.is_root${keyList(s.tier, 'm.')}, u.model, 0, toInt64(1), ${fromRow}
      FROM (${merged}) AS m INNER JOIN (${chLatestUsageSql(l, s.p, usageOf)}) AS u ON u.id = m.id`
  }
  const aggs = TOKEN_METRICS.map(
    (m) => `sum(${m}_sum) AS ${m}_sum, sum(${m}_n) AS ${m}_n, min(${m}_min) AS ${m}_min, max(${m}_max) AS ${m}_max`,
  )
  if (prices) return bucketed(s, withPrices(rows, prices, params), ', model', `model, sum(n) AS n, ${aggs.join(', ')}, ${costAggs()}`)
  return bucketed(s, rows, ', model', `model, sum(n) AS n, ${aggs.join(', ')}`)
}
