/**
 * Percentiles from log-spaced histograms (the DDSketch idea): a value v > 0 falls in bin
 * ceil(log_γ v), and the bin's representative 2γ^i/(γ+1) is within α of every value in it. Bins are
 * plain counts, so histograms add (and subtract) exactly: pre-aggregated hours, late corrections and
 * fresh data combine into one histogram per bucket.
 */
export const ALPHA = 0.0095
const GAMMA = (1 + ALPHA) / (1 - ALPHA)
const LN_GAMMA = Math.log(GAMMA)

/** The bin of x as SQL: 0 for 0; 1, 2, … for x ≥ 1 (x ≤ 1 share bin 1); mirrored below 0. */
export function binSql(x: string): string {
  return `(CASE WHEN ${x} > 0 THEN 1 + greatest(0, ceil(ln(${x}) / ${LN_GAMMA}))::INTEGER
    WHEN ${x} = 0 THEN 0 ELSE -(1 + greatest(0, ceil(ln(-(${x})) / ${LN_GAMMA}))::INTEGER) END)`
}

/** A value standing for bin k, within α of any value in it (values are whole numbers: bin 1 holds only 1). */
export function binValue(k: number): number {
  if (k === 0) return 0
  const i = Math.abs(k) - 1
  const v = i === 0 ? 1 : (2 * GAMMA ** i) / (GAMMA + 1)
  return k > 0 ? v : -v
}

/**
 * The p-th percentile (0–100) of a histogram, interpolated between the values at the neighbouring
 * ranks as DuckDB's quantile_cont does, so it is within α of the exact answer. `bins` sorted by k.
 */
export function percentile(bins: readonly (readonly [number, number])[], p: number): number | null {
  let total = 0
  for (const [, n] of bins) total += n
  if (total <= 0) return null
  const pos = (p / 100) * (total - 1)
  const lo = Math.floor(pos)
  const hi = Math.ceil(pos)
  const at = (rank: number): number => {
    let seen = 0
    for (const [k, n] of bins) {
      if (n <= 0) continue
      seen += n
      if (rank < seen) return binValue(k)
    }
    return binValue(bins[bins.length - 1]![0])
  }
  const a = at(lo)
  return lo === hi ? a : a + (pos - lo) * (at(hi) - a)
}

/** The same for a metric that is 1 for `ones` of `total` values and 0 for the rest (call and error counts). */
export function percentileOfFlags(total: number, ones: number, p: number): number | null {
  if (total <= 0) return null
  const pos = (p / 100) * (total - 1)
  const at = (rank: number) => (rank < total - ones ? 0 : 1)
  const lo = Math.floor(pos)
  const hi = Math.ceil(pos)
  return at(lo) + (pos - lo) * (at(hi) - at(lo))
}
