import type { PriceSpan } from '../catalog/prices.js'
import { table, type Layout } from './layout.js'
import { costAggs, withPrices } from './stats-cost-sql.js'
import type { ChParams } from './query/params.js'
import { binOf, TOKEN_EXPRS, TOKEN_METRICS } from './stats-done-schema.js'
import { suspectsIn, type Suspects } from './stats-rollup-sql.js'
import type { Slots } from './stats-slots.js'
import { HOUR_OF } from './stats-schema.js'
import { chLatestUsageSql, LN_GAMMA } from './stats-sql.js'

/**
 * Latency, errors and usage per bucket from the emitted-call rollups (stats-done-schema.ts). Each
 * statement's rows come in two kinds: `sub` 0, what adds up (the hourly rows, and the merged state of
 * the calls to correct), and `sub` 1, the corrected calls' emissions, which the caller takes back out.
 * Their extremes come back too: where one equals the bucket's reported minimum or maximum, the
 * rollup cannot say what is left, and the request is scanned (the embedded engine's `dirty`).
 */

/** The calls to correct (`ids`: the right side of an `IN`), merged, live and started, in the slots' hours: their hour, op, root, latency (null unended), error, id. */
function mergedSuspects(l: Layout, s: Slots, lg: string, ids: string): string {
  return `SELECT id, ${HOUR_OF} AS hour, ifNull(op_name, '') AS op_name, parent_id IS NULL AS is_root,
      toUnixTimestamp64Milli(ended_at) - toUnixTimestamp64Milli(started_at) AS lat, exception IS NOT NULL AS err,
      if(lat IS NULL, 0, ${binOf('assumeNotNull(lat)', lg)}) AS k
    FROM (SELECT id, max(started_at).2 AS started_at, max(ended_at).2 AS ended_at, max(exception).2 AS exception,
        max(op_name).2 AS op_name, max(parent_id).2 AS parent_id, max(deleted_at) AS deleted_at
      FROM ${table(l, 'calls_merged')} WHERE project_id = ${s.p} AND id IN ${ids} GROUP BY id)
    WHERE started_at IS NOT NULL AND deleted_at IS NULL AND ${s.inHours}`
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
  const inHours = `project_id = ${s.p} AND ${s.inHours}`
  const one = 'toInt64(1)'
  const ids = suspectsIn(l, s.p, suspects, params)
  let rows = `SELECT hour, op_name, is_root, 0 AS sub, err, n AS lat_n, lat_sum, lat_min, lat_max, bins
      FROM ${table(l, 'stats_done_hourly')} WHERE ${inHours}`
  if (ids !== null)
    rows += `
    UNION ALL SELECT hour, op_name, is_root, 1, toInt64(err), ${one}, lat, lat, lat, ([${binOf('lat', lg)}], [${one}])
      FROM ${table(l, 'stats_call_done')} WHERE ${inHours} AND id IN ${ids}
    UNION ALL SELECT hour, op_name, is_root, 0, toInt64(err), toInt64(lat IS NOT NULL), coalesce(lat, 0), assumeNotNull(lat), assumeNotNull(lat),
        ([k], [${one}])
      FROM (${mergedSuspects(l, s, lg, ids)}) WHERE lat IS NOT NULL
    UNION ALL SELECT hour, op_name, is_root, 0, toInt64(err), 0, 0, NULL, NULL, (CAST([], 'Array(Int64)'), CAST([], 'Array(Int64)'))
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
  const inHours = `project_id = ${s.p} AND ${s.inHours}`
  const metricCols = TOKEN_METRICS.flatMap((m) => [`${m}_sum`, `${m}_n`, `${m}_min`, `${m}_max`]).join(', ')
  const fromRow = Object.values(TOKEN_EXPRS)
    .map((e) => `toInt64(coalesce(${e}, 0)), toInt64(${e} IS NOT NULL), ${e}, ${e}`)
    .join(', ')
  const ids = suspectsIn(l, s.p, suspects, params)
  let rows = `SELECT hour, op_name, is_root, model, 0 AS sub, n, ${metricCols}
      FROM ${table(l, 'stats_usage_hourly')} WHERE ${inHours}`
  if (ids !== null) {
    const merged = mergedSuspects(l, s, lg, ids)
    // A bound list narrows the usage rows by itself; the subquery by the merged calls (evaluated once more).
    const usageOf = 'ids' in suspects ? ids : `(SELECT id FROM (${merged}))`
    rows += `
    UNION ALL SELECT hour, op_name, is_root, u.model, 1, toInt64(1), ${fromRow}
      FROM ${table(l, 'stats_call_done')} ARRAY JOIN usage AS u WHERE ${inHours} AND id IN ${ids}
    UNION ALL SELECT m.hour, m.op_name, m.is_root, u.model, 0, toInt64(1), ${fromRow}
      FROM (${merged}) AS m INNER JOIN (${chLatestUsageSql(l, s.p, usageOf)}) AS u ON u.id = m.id`
  }
  const aggs = TOKEN_METRICS.map(
    (m) => `sum(${m}_sum) AS ${m}_sum, sum(${m}_n) AS ${m}_n, min(${m}_min) AS ${m}_min, max(${m}_max) AS ${m}_max`,
  )
  if (prices) return bucketed(s, withPrices(rows, prices, params), ', model', `model, sum(n) AS n, ${aggs.join(', ')}, ${costAggs()}`)
  return bucketed(s, rows, ', model', `model, sum(n) AS n, ${aggs.join(', ')}`)
}
