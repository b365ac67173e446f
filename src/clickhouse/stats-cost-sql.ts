import type { PriceSpan } from '../catalog/prices.js'
import type { ChParams } from './query/params.js'
import { spansSql } from './stats-sql.js'

/**
 * Costs from the usage rollup, as the embedded engine computes them from its hour tiers (stats/sql.ts
 * usageStatement): a rollup row's tokens times the price in effect at its hour (rollupPlan splits a
 * range at every price change, so an hour holds one price), summed per bucket. A usage row has a cost
 * when its model has a price then; total_cost when both prices are known. The extremes of
 * total_cost are not the sum of two extremes: those requests are scanned.
 */

/** Cost metrics the rollup answers, with the token metric and price each multiplies. */
const COSTS: [string, string, string][] = [
  ['input_cost', 'input_tokens', 'pc'],
  ['output_cost', 'output_tokens', 'cc'],
]
export const COST_METRICS = ['input_cost', 'output_cost', 'total_cost']

/**
 * `rows` (with `hour`, `model`, `n` and the token columns) with each one's cost columns (`c_{metric}_sum`, …):
 * its tokens times the price of its model at its hour (none: NULL, and not counted).
 */
export function withPrices(rows: string, spans: readonly PriceSpan[], params: ChParams): string {
  const cols = COSTS.map(
    ([m, t, p]) =>
      `${t}_sum * ${p} AS c_${m}_sum, if(${p} IS NULL, 0, ${t}_n) AS c_${m}_n, ${t}_min * ${p} AS c_${m}_min, ${t}_max * ${p} AS c_${m}_max`,
  )
  cols.push('input_tokens_sum * pc + output_tokens_sum * cc AS c_total_cost_sum, if(pc IS NULL OR cc IS NULL, 0, n) AS c_total_cost_n')
  return `SELECT *, ${cols.join(', ')} FROM (
      SELECT r.*, if(si = 0, NULL, sp.pcs[si]) AS pc, if(si = 0, NULL, sp.ccs[si]) AS cc
      FROM (${rows}) AS r LEFT JOIN ${spansSql(spans, params)} AS sp ON sp.llm = r.model
      ARRAY JOIN [arrayFirstIndex((f, e) -> r.hour >= f AND r.hour < e, sp.fs, sp.tos)] AS si)`
}

/** The cost columns per group of withPrices' rows, as `{metric}_sum`, `_n`, `_min`, `_max` (total_cost's extremes NULL). */
export function costAggs(): string {
  const each = COSTS.map(
    ([m]) => `sum(c_${m}_sum) AS ${m}_sum, sum(c_${m}_n) AS ${m}_n, min(c_${m}_min) AS ${m}_min, max(c_${m}_max) AS ${m}_max`,
  )
  each.push('sum(c_total_cost_sum) AS total_cost_sum, sum(c_total_cost_n) AS total_cost_n')
  return each.join(', ')
}
