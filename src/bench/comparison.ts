/** What `weft bench compare` computes, shared by the comparison and its formats. */
export type Better = 'higher' | 'lower'
export type Kind = 'serve' | 'trace'

/** One metric across the runs: values in file order; ratio and change of each run against the first (the baseline). */
export interface MetricRow {
  metric: string
  better: Better
  values: (number | null)[]
  /** value ÷ baseline (null for the baseline itself, a missing value or a zero baseline). */
  ratio: (number | null)[]
  change_percent: (number | null)[]
  /** Per run: better, worse or same as the baseline (null for the baseline or a missing value). */
  verdict: ('better' | 'worse' | 'same' | null)[]
}

export interface Comparison {
  kind: Kind
  files: string[]
  /** A few of each run's settings, so a reader sees what was compared. */
  runs: Record<string, unknown>[]
  metrics: MetricRow[]
}
