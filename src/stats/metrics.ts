import { DomainError } from '../core/errors.js'

export type CallMetric = 'latency_ms' | 'call_count' | 'error_count'
export type UsageMetric =
  | 'input_tokens'
  | 'output_tokens'
  | 'total_tokens'
  | 'cache_read_input_tokens'
  | 'cache_creation_input_tokens'
  | 'input_cost'
  | 'output_cost'
  | 'total_cost'
export type Agg = 'sum' | 'avg' | 'min' | 'max' | 'count'

export interface MetricSpec<M extends string> {
  metric: M
  aggregations?: string[]
  percentiles?: number[]
}

/** One output column of a bucket: `{agg}_{metric}` or `p{p}_{metric}`. */
export interface Column<M extends string> {
  name: string
  metric: M
  agg?: Agg
  /** Percentile in [0, 100]. */
  p?: number
}

const SUPPORTED: readonly string[] = ['sum', 'avg', 'min', 'max', 'count']

/** `p95`, `p99.9`: an integral percentile prints without decimals (reference §3.9). */
export function percentileName(p: number): string {
  return `p${Number.isInteger(p) ? String(p) : String(p)}`
}

/** The columns a list of metric specs asks for; `[sum]` when a spec names neither aggregations nor percentiles. */
export function columnsOf<M extends string>(specs: readonly MetricSpec<M>[] | null | undefined): Column<M>[] {
  const out: Column<M>[] = []
  const seen = new Set<string>()
  for (const s of specs ?? []) {
    const aggs = s.aggregations ?? []
    const pcts = s.percentiles ?? []
    for (const a of aggs.length === 0 && pcts.length === 0 ? ['sum'] : aggs) {
      if (!SUPPORTED.includes(a))
        throw new DomainError(400, `Aggregation ${JSON.stringify(a)} is not supported for ${s.metric}; use one of ${SUPPORTED.join(', ')}`)
      const name = `${a}_${s.metric}`
      if (!seen.has(name)) out.push({ name, metric: s.metric, agg: a as Agg })
      seen.add(name)
    }
    for (const p of pcts) {
      if (typeof p !== 'number' || !Number.isFinite(p) || p < 0 || p > 100)
        throw new DomainError(400, `Percentile ${JSON.stringify(p)} of ${s.metric} is outside [0, 100]`)
      const name = `${percentileName(p)}_${s.metric}`
      if (!seen.has(name)) out.push({ name, metric: s.metric, p })
      seen.add(name)
    }
  }
  return out
}

/** Empty buckets: sums, counts and averages are 0; minimum, maximum and percentiles are null (reference §3.9). */
export function emptyValue(c: Column<string>): number | null {
  return c.agg === 'sum' || c.agg === 'count' || c.agg === 'avg' ? 0 : null
}
