import { binSql } from './sketch.js'
import { TIER_DIMS, TOKEN_NAMES, type Table, type Tier, type TokenMetric } from './rollups.js'

/** The aggregates kept per metric (`{metric}_{part}` columns: latency, tokens); a request reads only those its columns need. */
export const TOKEN_PARTS = ['sum', 'n', 'min', 'max'] as const
export type TokenPart = (typeof TOKEN_PARTS)[number]

/** Each part of a token metric `m` from the call tier's signed rows. */
const TOKEN_PART_SQL: Record<TokenPart, (m: string) => string> = {
  sum: (m) => `coalesce(n * ${m}, 0)::DOUBLE AS ${m}_sum`,
  n: (m) => `(CASE WHEN ${m} IS NULL THEN 0 ELSE n END)::DOUBLE AS ${m}_n`,
  min: (m) => `CASE WHEN n > 0 THEN ${m} END AS ${m}_min`,
  max: (m) => `CASE WHEN n > 0 THEN ${m} END AS ${m}_max`,
}

/**
 * The call tier's rows of `table` in the aggregated tiers' columns, as a select list over the stored rows (see
 * storedAs) and the condition they need (latency: only calls with one): sums and counts weighted by the sign (as
 * DOUBLE: summing many rows in 128-bit integers costs several times more, and these stay far below 2^53), minimum
 * and maximum from added rows only, a subtracted row dirty as in contribution. `tokens`: the token metrics to shape
 * (usage); `parts`: which of each metric's sum, count, minimum and maximum (the latency's for calls, each token
 * metric's for usage). Without the dimensions: sql.ts selects it straight from a table where it can (a shorter statement to plan).
 */
export function shapedSelect(
  table: Table,
  tokens: readonly TokenMetric[] = TOKEN_NAMES,
  parts: readonly TokenPart[] = TOKEN_PARTS,
): { cols: string; cond: string | null } {
  switch (table) {
    case 'calls':
      return {
        cols: [
          'n::DOUBLE AS n',
          ...parts.map((part) => TOKEN_PART_SQL[part]('lat')),
          '(n * err)::DOUBLE AS err',
          'n < 0 AND lat IS NOT NULL AS dirty',
        ].join(', '),
        cond: null,
      }
    case 'latency':
      return { cols: `${binSql('lat')} AS k, n::DOUBLE AS n`, cond: 'lat IS NOT NULL' }
    case 'usage':
      return {
        cols: ['model', 'n::DOUBLE AS n', ...tokens.flatMap((m) => parts.map((part) => TOKEN_PART_SQL[part](m))), 'n < 0 AS dirty'].join(
          ', ',
        ),
        cond: null,
      }
  }
}

/** Rows of a tier's `table` (SQL over its stored rows) in the aggregated tiers' columns, dimensions first (see shapedSelect). */
export function shaped(
  rows: string,
  table: Table,
  tier: Tier,
  tokens: readonly TokenMetric[] = TOKEN_NAMES,
  parts: readonly TokenPart[] = TOKEN_PARTS,
): string {
  if (tier !== 'call') return rows
  const { cols, cond } = shapedSelect(table, tokens, parts)
  const dims = TIER_DIMS.call.join(', ')
  const where = cond ? ` WHERE ${cond}` : ''
  return `SELECT ${dims}, ${cols} FROM (${rows})${where}`
}
