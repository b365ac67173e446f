import { USAGE_FIELDS } from '../calls/model.js'
import type { PriceSpan } from '../catalog/prices.js'
import { ALPHA } from '../stats/sketch.js'
import type { Column, UsageMetric } from '../stats/metrics.js'
import type { StatsContext } from '../stats/plan.js'
import { chMatching } from './calls-sql.js'
import { table, type Layout } from './layout.js'
import { TOKEN_EXPRS, TOKEN_METRICS } from './stats-done-schema.js'
import type { ChParams } from './query/params.js'

/**
 * `/calls/stats` on ClickHouse: the embedded engine's scan (stats/sql.ts scanWindowStatement) as
 * ClickHouse SQL — the same bucket assignment, latency bins, token sums and price spans — over the
 * merged calls (calls-sql.ts) and their typed usage rows (call_usage). The rows come out in the
 * shapes stats/assemble.ts adds up, so both backends assemble one answer the same way.
 */

/** ln γ of stats/sketch.ts's bins, computed the same way so a latency falls in the same bin on both backends. */
export const LN_GAMMA = Math.log((1 + ALPHA) / (1 - ALPHA))

/** `windows` as a condition on a millisecond time `t` (bound arrays: its size does not grow with the list). */
function inWindows(t: string, windows: readonly [number, number][], params: ChParams): string {
  const los = params.add(
    windows.map(([a]) => a),
    'Array(Int64)',
  )
  const his = params.add(
    windows.map(([, b]) => b),
    'Array(Int64)',
  )
  return `arrayExists((a, b) -> ${t} >= a AND ${t} < b, ${los}, ${his})`
}

/**
 * The merged, live, matching calls started in [start, end) — or, given `windows`, in one of them:
 * `(…) AS m WHERE …`. Only calls with a row started there are merged (a merged start time is one of
 * its rows'), which the min-max index on started_at keeps to the range's parts.
 */
function callsInRange(l: Layout, ctx: StatsContext, params: ChParams, windows?: readonly [number, number][]): { sql: string; ids: string } {
  const lo = params.add(ctx.start, 'Int64')
  const hi = params.add(ctx.end, 'Int64')
  // Milliseconds compare as the embedded engine's microsecond timestamps do: t_us >= b*1000 ⇔ floor(t_us/1000) >= b.
  const t = 'toUnixTimestamp64Milli(m.started_at)'
  const row = 'tupleElement(started_at, 2)'
  const conds = [`${row} >= fromUnixTimestamp64Milli(${lo})`, `${row} < fromUnixTimestamp64Milli(${hi})`]
  if (windows) conds.push(inWindows(`toUnixTimestamp64Milli(${row})`, windows, params))
  // The ids of the calls with a row started there: a superset of the calls merged, for other tables to narrow by.
  const ids = `SELECT id FROM ${table(l, 'calls_merged')} WHERE project_id = ${params.add(ctx.project_id, 'String')} AND ${conds.join(' AND ')}`
  const sql = `${chMatching(l, ctx.project_id, { filter: ctx.filter }, params, [`c.id IN (${ids})`], ['ended_at', 'exception'])} AND ${t} >= ${lo} AND ${t} < ${hi}`
  return { sql: windows ? `${sql} AND ${inWindows(t, windows, params)}` : sql, ids }
}

/** Each row of `rows` (with `t` ms and `z` = 0) given its bucket: the last bucket start at or before t. */
function bucketed(rows: string, ctx: StatsContext, params: ChParams): string {
  const starts = params.add(ctx.starts, 'Array(Int64)')
  // ASOF JOIN wants an equality besides the inequality: z is a constant on both sides.
  return `(${rows}) AS r ASOF JOIN (SELECT arrayJoin(${starts}) AS ts, toUInt8(0) AS z) AS b ON r.z = b.z AND r.t >= b.ts`
}

/**
 * Calls per bucket and latency bin `k` (null for calls without an end): counts, latency sums,
 * extremes and errors. A bucket's totals are the sum over its bins; assemble.ts takes both.
 */
export function chCallGroupsSql(l: Layout, ctx: StatsContext, params: ChParams, windows?: readonly [number, number][]): string {
  const lg = params.add(LN_GAMMA, 'Float64')
  // sketch.ts binSql: 0 for 0, 1 + ceil(ln |x| / ln γ) (at least 1) with x's sign otherwise.
  const bin = `sign(lat) * (1 + greatest(0, toInt64(ceil(log(greatest(abs(lat), 1)) / ${lg}))))`
  const rows = `SELECT t, z, lat, err, ${bin} AS k FROM (
      SELECT toUnixTimestamp64Milli(m.started_at) AS t, toUInt8(0) AS z,
        toUnixTimestamp64Milli(m.ended_at) - toUnixTimestamp64Milli(m.started_at) AS lat, m.exception IS NOT NULL AS err
      FROM ${callsInRange(l, ctx, params, windows).sql})`
  return `SELECT b.ts AS bucket, r.k AS k, count() AS n, count(r.lat) AS lat_n, coalesce(sum(r.lat), 0) AS lat_sum,
      min(r.lat) AS lat_min, max(r.lat) AS lat_max, countIf(r.err) AS err
    FROM ${bucketed(rows, ctx, params)}
    GROUP BY bucket, k`
}

/**
 * Each call's usage as the embedded store merges it: the latest part that carried a usage list
 * wins whole (calls/model.ts `latest`), so of a call's call_usage rows only those with its highest
 * seq count. A tuple keeps each row's fields together (argMax skips NULLs of a Nullable argument).
 */
export function chLatestUsageSql(l: Layout, p: string, inIds: string): string {
  const tuple = `tuple(${USAGE_FIELDS.join(', ')})`
  const fields = USAGE_FIELDS.map((f, i) => `v.${i + 1} AS ${f}`).join(', ')
  return `SELECT id, model, ${fields} FROM (
      SELECT id, model, argMax(${tuple}, seq) AS v, max(seq) AS s, max(max(seq)) OVER (PARTITION BY id) AS top
      FROM ${table(l, 'call_usage')} WHERE project_id = ${p} AND id IN ${inIds}
      GROUP BY id, model)
    WHERE s = top`
}

/** The price spans (catalog/prices.ts priceSpans) per model as arrays, joined to usage rows by model. */
export function spansSql(spans: readonly PriceSpan[], params: ChParams): string {
  const col = (f: (s: PriceSpan) => unknown, type: string) => params.add(spans.map(f), `Array(${type})`)
  const zip = [
    col((s) => s.llm_id, 'String'),
    col((s) => s.from_ms, 'Int64'),
    col((s) => s.to_ms, 'Int64'),
    col((s) => s.row.prompt_token_cost, 'Float64'),
    col((s) => s.row.completion_token_cost, 'Float64'),
  ].join(', ')
  return `(SELECT x.1 AS llm, groupArray(x.2) AS fs, groupArray(x.3) AS tos, groupArray(x.4) AS pcs, groupArray(x.5) AS ccs
    FROM (SELECT arrayJoin(arrayZip(${zip})) AS x) GROUP BY llm)`
}

/**
 * Usage per bucket and model: for each metric its sum, count, min and max (`{m}_sum`, …), and the
 * percentiles asked for as `p0`, `p1`, … — exact and interpolated between ranks (R7, as DuckDB's
 * quantile_cont in the embedded scan). Costs join each usage row to the price in effect at its start.
 */
export function chUsageGroupsSql(
  l: Layout,
  ctx: StatsContext,
  pcts: Column<UsageMetric>[],
  params: ChParams,
  windows?: readonly [number, number][],
): string {
  const costs = ctx.usageCols.some((c) => c.metric.endsWith('_cost'))
  const metrics = [...TOKEN_METRICS, ...(costs ? ['input_cost', 'output_cost', 'total_cost'] : [])]
  const p = params.add(ctx.project_id, 'String')
  const inRange = callsInRange(l, ctx, params, windows)
  const calls = `SELECT m.id AS id, toUnixTimestamp64Milli(m.started_at) AS t FROM ${inRange.sql}`
  const spans = costs ? spansSql(ctx.spans, params) : ''
  const price = costs
    ? `LEFT JOIN ${spans} AS sp ON sp.llm = u.model
       ARRAY JOIN [arrayFirstIndex((f, e) -> c.t >= f AND c.t < e, sp.fs, sp.tos)] AS si`
    : ''
  const costCols = costs
    ? `, if(si = 0, NULL, sp.pcs[si]) AS pc, if(si = 0, NULL, sp.ccs[si]) AS cc,
       input_tokens * pc AS input_cost, output_tokens * cc AS output_cost, input_tokens * pc + output_tokens * cc AS total_cost`
    : ''
  const tokens = Object.entries(TOKEN_EXPRS)
    .map(([m, e]) => `${e} AS ${m}`)
    .join(', ')
  const rows = `SELECT c.t AS t, toUInt8(0) AS z, u.model AS model, ${tokens}${costCols}
      FROM (${calls}) AS c
      INNER JOIN (${chLatestUsageSql(l, p, `(${inRange.ids})`)}) AS u ON u.id = c.id
      ${price}`
  const aggs = metrics.map((m) => `sum(r.${m}) AS ${m}_sum, count(r.${m}) AS ${m}_n, min(r.${m}) AS ${m}_min, max(r.${m}) AS ${m}_max`)
  const quantiles = pcts.map((c, i) => `quantileExactInclusive(${params.add(c.p! / 100, 'Float64')})(r.${c.metric}) AS p${i}`)
  const cols = [...aggs, ...quantiles].join(', ')
  return `SELECT b.ts AS bucket, r.model AS model, count() AS n, ${cols}
    FROM ${bucketed(rows, ctx, params)}
    GROUP BY bucket, model`
}
