/** The soak's figures: per-route latency and statuses, trends of RSS and descriptors, the targets, and the plot. */
import { linePanel, panelsSvg, type Series } from '../src/bench/line-chart.js'
import { percentile } from '../src/bench/stats.js'
import { ackRate } from '../src/bench/trace-chart.js'
import { INTENDED, type RouteLog } from './soak-traffic.js'

export interface Sample {
  t: number
  rss_mib: number
  fds: number
  tail_mib: number
  tail_parts: number
  wal_mib: number
  segments: number
  eld_p99_ms: number
  eld_max_ms: number
  load_avg_1m: number
  /** DuckDB's own figures (/admin/stats memory.duckdb): what of the RSS the calls store and the catalog hold, and spill. */
  duckdb_calls_mib?: number
  duckdb_catalog_mib?: number
  spilled_mib?: number
  heap_mib?: number
  tail_oom_retries?: number
  compaction_failures?: number
  compaction_resplits?: number
  calls_timings_ms?: Record<string, { count: number; total_ms: number; max_ms: number }> | null
  duckdb_calls_tags_mib?: Record<string, number>
  rollup_catch_ups?: { count: number; total_ms: number; max_ms: number } | null
  rollup_timings_ms?: Record<string, { count: number; total_ms: number; max_ms: number }> | null
  parts_past_x?: number | null
}

/** Flat: a least-squares slope after the warm-up at or under these (per minute). Over 30 minutes: ≤ 150 MiB, ≤ 15 fds. */
export const RSS_SLOPE_MIB_PER_MIN = 5
export const FDS_SLOPE_PER_MIN = 0.5
export const READ_P99_MS = 250
export const READS = ['calls/stream_query', 'calls/query_stats', 'calls/stats', 'obj/read', 'table/query']

/** Least-squares slope of y over x. */
export function slope(xs: number[], ys: number[]): number {
  const n = xs.length
  if (n < 2) return 0
  const mx = xs.reduce((a, b) => a + b, 0) / n
  const my = ys.reduce((a, b) => a + b, 0) / n
  let num = 0
  let den = 0
  for (let i = 0; i < n; i++) {
    num += (xs[i]! - mx) * (ys[i]! - my)
    den += (xs[i]! - mx) ** 2
  }
  return den === 0 ? 0 : num / den
}

const ok = (status: string) => /^[23]\d\d$/.test(status)

export function routeSummary(l: RouteLog) {
  const intended = Object.entries(l.statuses).filter(([s]) => INTENDED.has(Number(s)))
  const unintended = Object.entries(l.statuses).filter(([s]) => !ok(s) && !INTENDED.has(Number(s)))
  return {
    requests: l.ms.length,
    p50_ms: percentile(l.ms, 50),
    p99_ms: percentile(l.ms, 99),
    max_ms: l.ms.length ? Math.max(...l.ms) : 0,
    statuses: l.statuses,
    intended_errors: intended.reduce((a, [, n]) => a + n, 0),
    unintended_errors: unintended.reduce((a, [, n]) => a + n, 0),
    error_samples: l.samples,
    ...(Object.keys(l.statsPaths).length ? { stats_paths: l.statsPaths } : {}),
  }
}

export type RouteSummary = ReturnType<typeof routeSummary>

/** The targets, each with the measured figure and whether it is met. */
export function targets(routes: Record<string, RouteSummary>, samples: Sample[], warmupS: number) {
  const after = samples.filter((s) => s.t >= warmupS)
  const mins = after.map((s) => s.t / 60)
  const rssSlope = slope(
    mins,
    after.map((s) => s.rss_mib),
  )
  const fdSlope = slope(
    mins,
    after.map((s) => s.fds),
  )
  const unintended = Object.values(routes).reduce((a, r) => a + r.unintended_errors, 0)
  const worstRead = Math.max(...READS.map((r) => routes[r]?.p99_ms ?? 0))
  return {
    zero_unintended_errors: { unintended_errors: unintended, met: unintended === 0 },
    rss_flat: { slope_mib_per_min: rssSlope, limit: RSS_SLOPE_MIB_PER_MIN, samples: after.length, met: rssSlope <= RSS_SLOPE_MIB_PER_MIN },
    fds_flat: { slope_per_min: fdSlope, limit: FDS_SLOPE_PER_MIN, samples: after.length, met: fdSlope <= FDS_SLOPE_PER_MIN },
    // A compaction that fails leaves the segments piling up (the 4 GiB soak of 2026-11-25 05:21: 2 -> 41) and reads slowing.
    compactions_succeed: {
      failures: samples.at(-1)?.compaction_failures ?? null,
      resplits: samples.at(-1)?.compaction_resplits ?? null,
      max_segments: Math.max(0, ...after.map((s) => s.segments)),
      met: (samples.at(-1)?.compaction_failures ?? 0) === 0,
    },
    // Issue 16: statistics stay on the rollups throughout sustained ingest (flushes, compactions and their upkeep).
    stats_on_rollups: {
      paths: routes['calls/stats']?.stats_paths ?? {},
      met: Object.keys(routes['calls/stats']?.stats_paths ?? {}).every((p) => p === 'rollup'),
    },
    read_p99_under_250ms: {
      worst_read_p99_ms: worstRead,
      per_route: Object.fromEntries(READS.map((r) => [r, routes[r]?.p99_ms ?? null])),
      met: worstRead < READ_P99_MS,
    },
  }
}

/** p99 of a route's answers per window of `windowS` seconds, at the window's end. */
export function windowP99(l: RouteLog, windowS: number): [number, number][] {
  const buckets = new Map<number, number[]>()
  l.at.forEach((t, i) => {
    const b = Math.floor(t / windowS)
    if (!buckets.has(b)) buckets.set(b, [])
    buckets.get(b)!.push(l.ms[i]!)
  })
  return [...buckets.entries()].sort((a, b) => a[0] - b[0]).map(([b, ms]) => [(b + 1) * windowS, percentile(ms, 99)])
}

const line = (label: string, samples: Sample[], pick: (s: Sample) => number): Series => ({
  label,
  points: samples.map((s) => [s.t, pick(s)]),
})

/** The plot: memory, descriptors, the tail, read p99 and ingest over time, event-loop delay and the machine's load. */
export function soakChart(
  title: string,
  o: { samples: Sample[]; logs: Map<string, RouteLog>; ackedPerSecond: number[]; duration: number },
): string {
  const { samples: s, duration: d } = o
  const reads = READS.filter((r) => o.logs.has(r)).map((r) => ({ label: r, points: windowP99(o.logs.get(r)!, 10) }))
  const chat = o.logs.get('chat stream')
  return panelsSvg(title, [
    (x, y) => linePanel(x, y, 'server RSS (MiB)', [line('RSS', s, (v) => v.rss_mib)], d),
    (x, y) => linePanel(x, y, 'open file descriptors', [line('fds', s, (v) => v.fds)], d),
    (x, y) => linePanel(x, y, 'tail and log (MiB)', [line('tail', s, (v) => v.tail_mib), line('log', s, (v) => v.wal_mib)], d),
    (x, y) => linePanel(x, y, `p99 per 10 s (ms), target ${READ_P99_MS}`, reads, d),
    (x, y) => linePanel(x, y, 'acknowledged calls/s', [{ label: 'calls/s', points: ackRate(o.ackedPerSecond, d) }], d),
    (x, y) =>
      linePanel(x, y, 'chat stream, whole stream p99 per 10 s (ms)', chat ? [{ label: 'chat', points: windowP99(chat, 10) }] : [], d),
    (x, y) =>
      linePanel(x, y, 'event-loop delay per sample (ms)', [line('p99', s, (v) => v.eld_p99_ms), line('max', s, (v) => v.eld_max_ms)], d),
    (x, y) => linePanel(x, y, 'machine load average (1 min, 2 cores)', [line('load', s, (v) => v.load_avg_1m)], d),
  ])
}
