import { DomainError } from '../core/errors.js'
import type { CallMetricSpec, UsageMetricSpec } from '../schemas/calls.js'

export type CallMetric = CallMetricSpec['metric']
export type UsageMetric = UsageMetricSpec['metric']

/** The aggregations `/calls/stats` implements (the schema names more; those answer 400). */
const SUPPORTED = ['sum', 'avg', 'min', 'max', 'count'] as const
export type Agg = (typeof SUPPORTED)[number]

/** One output column of a bucket: `{agg}_{metric}` or `p{p}_{metric}`. */
export interface Column<M extends string> {
  name: string
  metric: M
  agg?: Agg
  /** Percentile in [0, 100]. */
  p?: number
}

/** `p95`, `p99.9`: an integral percentile prints without decimals (docs/statistics.md). */
export function percentileName(p: number): string {
  return `p${Number.isInteger(p) ? String(p) : String(p)}`
}

/** The columns a list of metric specs asks for; `[sum]` when a spec names neither aggregations nor percentiles. */
export function columnsOf<S extends CallMetricSpec | UsageMetricSpec>(specs: readonly S[] | null | undefined): Column<S['metric']>[] {
  const out: Column<S['metric']>[] = []
  const seen = new Set<string>()
  for (const s of specs ?? []) {
    const aggs = s.aggregations ?? []
    const pcts = s.percentiles ?? []
    for (const a of aggs.length === 0 && pcts.length === 0 ? ['sum'] : aggs) {
      if (!(SUPPORTED as readonly string[]).includes(a))
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

/** Empty buckets: sums, counts and averages are 0; minimum, maximum and percentiles are null (docs/statistics.md). */
export function emptyValue(c: Column<string>): number | null {
  return c.agg === 'sum' || c.agg === 'count' || c.agg === 'avg' ? 0 : null
}
