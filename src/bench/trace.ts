import { VERSION } from '../core/version.js'
import { traceAuth } from './http.js'
import { writeResult } from './report.js'
import { mean, percentile } from './stats.js'
import { ackRate, traceChart } from './trace-chart.js'
import { EldSampler } from './trace-eld.js'
import { ingestLoop, readLoop, Tally, type IngestState } from './trace-load.js'
import { traceOptions } from './trace-options.js'

/** Count, latency percentiles (ms) and failures by reason of one kind of request. */
interface LatencySummary {
  requests: number
  errors: number
  mean_ms: number
  median_ms: number
  p90_ms: number
  p99_ms: number
  max_ms: number
  error_reasons: Record<string, number>
}

function latencies(t: Tally): LatencySummary {
  const reasons: Record<string, number> = {}
  for (const e of t.errors) reasons[e] = (reasons[e] ?? 0) + 1
  return {
    requests: t.ms.length,
    errors: t.errors.length,
    mean_ms: mean(t.ms),
    median_ms: percentile(t.ms, 50),
    p90_ms: percentile(t.ms, 90),
    p99_ms: percentile(t.ms, 99),
    max_ms: t.ms.length ? Math.max(...t.ms) : 0,
    error_reasons: reasons,
  }
}

function table(r: Record<string, any>): string {
  const row = (label: string, v: string | number) =>
    `${label.padEnd(40)} ${typeof v === 'number' ? (Number.isInteger(v) ? v : v.toFixed(2)) : v}\n`
  let out = `${'='.repeat(13)} Trace Ingest Benchmark ${'='.repeat(13)}\n`
  out += row('Acknowledged calls:', r.acknowledged_calls)
  out += row('Duration (s):', r.duration)
  out += row('Acknowledged calls/s:', r.acknowledged_calls_per_s)
  for (const [name, t] of [
    ['upsert_batch', r.ingest],
    ['stream_query page', r.stream_query],
    ['calls/stats', r.stats],
  ] as const) {
    out += row(`${name} requests (errors):`, `${t.requests} (${t.errors})`)
    out += row(`${name} median / p99 (ms):`, `${t.median_ms.toFixed(1)} / ${t.p99_ms.toFixed(1)}`)
  }
  if (r.event_loop_delay_ms)
    out += row(
      'Server event-loop delay p50/p99/max (ms):',
      `${r.event_loop_delay_ms.p50} / ${r.event_loop_delay_ms.p99} / ${r.event_loop_delay_ms.max}`,
    )
  return out + '='.repeat(50) + '\n'
}

/** `weft bench trace`: sustained ingest into a Weave-compatible trace server, with reads while it runs. */
export async function benchTrace(flags: Record<string, string>): Promise<void> {
  const o = traceOptions(flags)
  const headers = traceAuth(o.apiKey)
  const date = new Date().toISOString()
  const t0 = performance.now()
  const eld = new EldSampler(o.baseUrl, headers, t0)
  await eld.start()
  const s: IngestState = { acked: 0, ackedPerSecond: [], offered: 0, stop: false, tally: new Tally(t0) }
  const [pages, stats] = [new Tally(t0), new Tally(t0)]
  const timer = Number.isFinite(o.duration) ? setTimeout(() => (s.stop = true), o.duration * 1000) : null
  const reads = readLoop(o, s, headers, pages, stats)
  const sampling = eld.loop(s, 1000)
  await Promise.all(Array.from({ length: o.connections }, () => ingestLoop(o, s, headers, t0)))
  const duration = (performance.now() - t0) / 1000
  s.stop = true
  if (timer) clearTimeout(timer)
  await Promise.all([reads, sampling])
  const kinds = [
    ['upsert_batch', s.tally],
    ['stream_query page', pages],
    ['calls/stats', stats],
  ] as const
  const summaries = kinds.map(([, t]) => latencies(t))
  const [ingest, page, stat] = summaries
  const result = {
    date,
    weft_version: VERSION,
    base_url: o.baseUrl,
    project: o.project,
    batch_size: o.batchSize,
    connections: o.connections,
    payload_bytes: o.payloadBytes,
    models: o.models,
    rate: Number.isFinite(o.rate) ? o.rate : 'inf',
    duration,
    acknowledged_calls: s.acked,
    acknowledged_calls_per_s: s.acked / duration,
    ingest,
    stream_query: page,
    stats: stat,
    event_loop_delay_ms: eld.summary(),
    acknowledged_calls_per_s_series: ackRate(s.ackedPerSecond, duration).map(([t, v]) => ({ t, calls_per_s: v })),
    event_loop_delay_series: eld.series,
  }
  const svg = traceChart({
    title: `bench trace: ${o.baseUrl}, ${o.connections} × batches of ${o.batchSize}, rate ${result.rate}, ${date}`,
    duration,
    ackedPerSecond: s.ackedPerSecond,
    latency: kinds.map(([label, tally], i) => ({ label, tally, ...summaries[i]! })),
    eld: eld.series,
  })
  const file = await writeResult(o.resultDir, o.resultFilename ?? `bench-trace-${date.replace(/[:.]/g, '-')}`, result, svg)
  process.stdout.write(table(result))
  process.stdout.write(`wrote ${file} and ${file.replace(/\.json$/, '.svg')}\n`)
}
