/**
 * Summary statistics as numpy computes them, so results compare with vLLM's: `np.percentile` with linear
 * interpolation, `np.std` over the population (ddof 0), and 0 for an empty list (vLLM passes `x or 0`).
 */
export function percentile(xs: readonly number[], p: number): number {
  if (xs.length === 0) return 0
  const s = [...xs].sort((a, b) => a - b)
  const rank = (p / 100) * (s.length - 1)
  const lo = Math.floor(rank)
  const hi = Math.min(lo + 1, s.length - 1)
  return s[lo]! + (s[hi]! - s[lo]!) * (rank - lo)
}

export function mean(xs: readonly number[]): number {
  return xs.length === 0 ? 0 : xs.reduce((a, b) => a + b, 0) / xs.length
}

export function std(xs: readonly number[]): number {
  if (xs.length === 0) return 0
  const m = mean(xs)
  return Math.sqrt(xs.reduce((a, x) => a + (x - m) ** 2, 0) / xs.length)
}

/** vLLM's key for a percentile: `p99`, `p99.9` (JavaScript prints numbers as Python's `str(int(p))` / `str(p)` do). */
export const percentileWord = (p: number) => `p${p}`

/** `mean_<name>_ms`, `median_<name>_ms`, `std_<name>_ms` and `p<P>_<name>_ms` of values in seconds. */
export function summarize(name: string, seconds: readonly number[], percentiles: readonly number[]): Record<string, number> {
  const ms = seconds.map((s) => s * 1000)
  const out: Record<string, number> = {
    [`mean_${name}_ms`]: mean(ms),
    [`median_${name}_ms`]: percentile(ms, 50),
    [`std_${name}_ms`]: std(ms),
  }
  for (const p of percentiles) out[`${percentileWord(p)}_${name}_ms`] = percentile(ms, p)
  return out
}
