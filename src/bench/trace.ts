import { mkdir, writeFile } from 'node:fs/promises'
import path from 'node:path'
import { VERSION } from '../core/version.js'
import { getJson, traceAuth } from './http.js'
import { mean, percentile } from './stats.js'
import { ingestLoop, readLoop, Tally, type IngestState } from './trace-load.js'
import { traceOptions, type TraceOptions } from './trace-options.js'

interface Eld {
  p50: number
  p99: number
  max: number
}

/** weft's event-loop delay from /admin/stats (reset at the start so it covers the run); null for other servers or keys. */
async function eventLoopDelay(o: TraceOptions, headers: Record<string, string>, reset: boolean): Promise<Eld | null> {
  try {
    const r = await getJson<{ event_loop_delay_ms?: Eld }>(`${o.baseUrl}/admin/stats${reset ? '?reset=true' : ''}`, headers)
    const e = r.event_loop_delay_ms
    return e ? { p50: e.p50, p99: e.p99, max: e.max } : null
  } catch {
    return null
  }
}

/** Count, latency percentiles (ms) and failures by reason of one kind of request. */
function latencies(t: Tally): Record<string, unknown> {
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
  await eventLoopDelay(o, headers, true)
  const s: IngestState = { acked: 0, offered: 0, stop: false, tally: new Tally() }
  const [pages, stats] = [new Tally(), new Tally()]
  const t0 = performance.now()
  const timer = Number.isFinite(o.duration) ? setTimeout(() => (s.stop = true), o.duration * 1000) : null
  const reads = readLoop(o, s, headers, pages, stats)
  await Promise.all(Array.from({ length: o.connections }, () => ingestLoop(o, s, headers, t0)))
  const duration = (performance.now() - t0) / 1000
  s.stop = true
  if (timer) clearTimeout(timer)
  await reads
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
    ingest: latencies(s.tally),
    stream_query: latencies(pages),
    stats: latencies(stats),
    event_loop_delay_ms: await eventLoopDelay(o, headers, false),
  }
  await mkdir(o.resultDir, { recursive: true })
  const file = path.join(o.resultDir, o.resultFilename ?? `bench-trace-${date.replace(/[:.]/g, '-')}.json`)
  await writeFile(file, JSON.stringify(result, null, 2) + '\n')
  process.stdout.write(table(result))
  process.stdout.write(`wrote ${file}\n`)
}
