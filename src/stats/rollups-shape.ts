import { binSql } from './sketch.js'
import { TIER_DIMS, TOKEN_NAMES, type Table, type Tier, type TokenMetric } from './rollups.js'

/**
 * Rows of a tier's `table` (SQL over its stored rows, see storedAs) in the aggregated tiers' columns. For
 * the call tier: sums and counts weighted by the sign (as DOUBLE: summing many rows in 128-bit
 * integers costs several times more, and these stay far below 2^53), minimum and maximum from
 * added rows only, a subtracted row dirty as in contribution. `tokens`: the token metrics to shape (usage).
 */
export function shaped(rows: string, table: Table, tier: Tier, tokens: readonly TokenMetric[] = TOKEN_NAMES): string {
  if (tier !== 'call') return rows
  const dims = TIER_DIMS.call.join(', ')
  switch (table) {
    case 'calls':
      return `SELECT ${dims}, n::DOUBLE AS n, (CASE WHEN lat IS NULL THEN 0 ELSE n END)::DOUBLE AS lat_n, coalesce(n * lat, 0)::DOUBLE AS lat_sum,
        CASE WHEN n > 0 THEN lat END AS lat_min, CASE WHEN n > 0 THEN lat END AS lat_max, (n * err)::DOUBLE AS err, n < 0 AND lat IS NOT NULL AS dirty FROM (${rows})`
    case 'latency':
      return `SELECT ${dims}, ${binSql('lat')} AS k, n::DOUBLE AS n FROM (${rows}) WHERE lat IS NOT NULL`
    case 'usage':
      return `SELECT ${dims}, model, n::DOUBLE AS n, ${tokens
        .map(
          (m) => `coalesce(n * ${m}, 0)::DOUBLE AS ${m}_sum, (CASE WHEN ${m} IS NULL THEN 0 ELSE n END)::DOUBLE AS ${m}_n,
        CASE WHEN n > 0 THEN ${m} END AS ${m}_min, CASE WHEN n > 0 THEN ${m} END AS ${m}_max`,
        )
        .join(', ')}, n < 0 AS dirty FROM (${rows})`
  }
}
