import { barPanel, linePanel, panelsSvg } from './line-chart.js'
import type { EldSample } from './trace-eld.js'
import type { Tally } from './trace-load.js'

export interface TraceChartInput {
  title: string
  duration: number
  ackedPerSecond: number[]
  /** Latency percentiles (ms) per kind of request, as the result holds them. */
  latency: { label: string; median_ms: number; p90_ms: number; p99_ms: number; tally: Tally }[]
  eld: EldSample[]
}

/** Calls acknowledged per second; the last, partial second as a rate over the part of it that ran. */
export function ackRate(perSecond: number[], duration: number): [number, number][] {
  const n = Math.max(0, Math.ceil(duration))
  return Array.from({ length: n }, (_, i) => {
    const span = i === n - 1 ? duration - i || 1 : 1
    return [Math.min(i + 1, duration), (perSecond[i] ?? 0) / span] as [number, number]
  })
}

/**
 * `weft bench trace`'s plot: acknowledged calls/s over the run, each kind's latency percentiles, each request's
 * latency over the run, and the server's event-loop delay per interval (when it reports one).
 */
export function traceChart(c: TraceChartInput): string {
  return panelsSvg(c.title, [
    (x, y) => linePanel(x, y, 'acknowledged calls/s', [{ label: 'calls/s', points: ackRate(c.ackedPerSecond, c.duration) }], c.duration),
    (x, y) =>
      barPanel(
        x,
        y,
        'request latency (ms)',
        c.latency.map((k) => ({ label: k.label, values: { median: k.median_ms, p90: k.p90_ms, p99: k.p99_ms } })),
      ),
    (x, y) =>
      linePanel(
        x,
        y,
        'each request’s latency (ms) over the run',
        c.latency.map((k) => ({ label: k.label, points: k.tally.at.map((t, i) => [t, k.tally.ms[i]!] as [number, number]) })),
        c.duration,
      ),
    (x, y) =>
      linePanel(
        x,
        y,
        'server event-loop delay (ms) per interval',
        c.eld.length
          ? [
              { label: 'p99', points: c.eld.map((e) => [e.t, e.p99] as [number, number]) },
              { label: 'max', points: c.eld.map((e) => [e.t, e.max] as [number, number]) },
            ]
          : [],
        c.duration,
      ),
  ])
}
