/**
 * Soak bench (issue 18): mixed traffic against a real weft for a long time, watching for leaks and slow reads.
 *
 *   npm run build && node dist/bench/soak.js [--minutes 30] [--ingest-rate CALLS_PER_S] [--measure-seconds 20]
 *     [--sample-seconds 10]
 *
 * Starts `weft serve` (built-in tiny model) on a fresh data directory; measures the most calls/s it acknowledges
 * (`weft bench trace`'s ingest loop, 4 connections, batches of 100, for --measure-seconds) unless --ingest-rate is
 * given; then for --minutes runs ingest at half that rate alongside call pages, query_stats, /calls/stats, object and
 * table reads and chat streams. Every --sample-seconds it records the server's RSS and event-loop delay
 * (/admin/stats), its open descriptors (/proc/PID/fd), the tail's and the log's size, and the machine's load.
 * Writes bench/results/soak-<stamp>.json and .svg and prints the targets, met or not.
 */
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { parseFlags } from '../src/core/config.js'
import { ROOT_DIR, VERSION } from '../src/core/version.js'
import { getJson, postJson, traceAuth } from '../src/bench/http.js'
import { percentile } from '../src/bench/stats.js'
import { Tally, ingestLoop, type IngestState } from '../src/bench/trace-load.js'
import { traceOptions } from '../src/bench/trace-options.js'
import { routeSummary, soakChart, targets, windowP99, type Sample } from './soak-report.js'
import { ingest, ingestLog, readers, type Ctx, type RouteLog } from './soak-traffic.js'
import { startWeft } from './util.js'

const { flags } = parseFlags(process.argv.slice(2))
const minutes = Number(flags.minutes ?? 30)
const measureS = Number(flags['measure-seconds'] ?? 20)
const sampleS = Number(flags['sample-seconds'] ?? 10)
const fixedRate = flags['ingest-rate'] ? Number(flags['ingest-rate']) : null
/** The warm-up left out of the trends: a quarter of the run, at least 30 s and at most 5 minutes. */
const warmupS = Math.min(300, Math.max(30, minutes * 15))
const KEY = 'soak-key'
const PROJECT = 'soak/main'
const TABLE_ROWS = 2000

/** The server's pid: the process whose command line names its data directory (taskset execs node in place). */
function serverPid(dataDir: string): number {
  for (const d of readdirSync('/proc').filter((x) => /^\d+$/.test(x))) {
    try {
      const cmd = readFileSync(`/proc/${d}/cmdline`, 'utf8').split('\0')
      if (cmd.includes('serve') && cmd.includes(dataDir)) return Number(d)
    } catch {
      // gone meanwhile
    }
  }
  throw new Error(`no process serving ${dataDir}`)
}

async function sample(url: string, headers: Record<string, string>, pid: number, t0: number): Promise<Sample> {
  const st = await getJson<any>(`${url}/admin/stats?reset=true`, headers)
  const mib = (b: number) => b / 2 ** 20
  return {
    t: (performance.now() - t0) / 1000,
    rss_mib: mib(st.memory.rss_bytes),
    fds: readdirSync(`/proc/${pid}/fd`).length,
    tail_mib: mib(st.calls?.tail_bytes ?? 0),
    tail_parts: st.calls?.tail_parts ?? 0,
    wal_mib: mib(st.calls?.wal_bytes ?? 0),
    segments: st.calls?.segments ?? 0,
    eld_p99_ms: st.event_loop_delay_ms.p99,
    eld_max_ms: st.event_loop_delay_ms.max,
    load_avg_1m: os.loadavg()[0]!,
    duckdb_calls_mib: mib(st.memory.duckdb?.calls?.in_use_bytes ?? 0),
    duckdb_catalog_mib: mib(st.memory.duckdb?.catalog?.in_use_bytes ?? 0),
    spilled_mib: mib((st.memory.duckdb?.calls?.spilled_bytes ?? 0) + (st.memory.duckdb?.catalog?.spilled_bytes ?? 0)),
    heap_mib: mib(st.memory.heap_used_bytes),
    // Tail inserts retried after running out of memory (--memory-limit): a budget that holds keeps this at 0.
    tail_oom_retries: st.calls?.tail_oom_retries ?? 0,
    // Compactions that failed (segments pile up and reads slow) or ran again in smaller ranges: both 0 when the budget holds.
    compaction_failures: st.calls?.compaction_failures ?? 0,
    compaction_resplits: st.calls?.compaction_resplits ?? 0,
    // Since the last sample: reads' waits for the tail and their queries, tail inserts and rebuilds (count, total, max ms).
    calls_timings_ms: st.calls?.timings_ms ?? null,
    // The rollups' catch-ups on the tail since the start (count, total and longest ms), and the parts past their mark.
    rollup_catch_ups: st.rollups?.catch_ups ?? null,
    // Since the last sample: the rollups' merges, inserts, commits and folds, and the commit gate's waits (reads, commits).
    rollup_timings_ms: st.rollups?.timings_ms ?? null,
    parts_past_x: st.rollups?.parts_past_x ?? null,
    // What holds the store's DuckDB memory (IN_MEMORY_TABLE, OVERFLOW_STRINGS, HASH_TABLE, EXTERNAL_FILE_CACHE, …).
    duckdb_calls_tags_mib: Object.fromEntries(
      Object.entries((st.memory.duckdb?.calls?.by_tag ?? {}) as Record<string, { in_use_bytes: number }>).map(([k, v]) => [
        k,
        mib(v.in_use_bytes),
      ]),
    ),
  }
}

/** An object and a dataset table to read during the soak. */
async function setup(url: string, headers: Record<string, string>): Promise<{ objectId: string; tableDigest: string }> {
  await postJson(`${url}/obj/create`, { obj: { project_id: PROJECT, object_id: 'soak-config', val: { _type: 'Cfg', k: 1 } } }, headers)
  const rows = Array.from({ length: TABLE_ROWS }, (_, i) => ({ id: i, question: `question ${i} `.repeat(8), score: i % 97 }))
  const t = await postJson<{ digest: string }>(`${url}/table/create`, { table: { project_id: PROJECT, rows } }, headers)
  return { objectId: 'soak-config', tableDigest: t.digest }
}

/** The most calls/s the server acknowledges: `weft bench trace`'s loop at full speed, nothing else running. */
async function measureMax(url: string, headers: Record<string, string>): Promise<number> {
  const o = traceOptions({ 'base-url': url, project: 'soak/measure', connections: '4', 'batch-size': '100', rate: 'inf' })
  const s: IngestState = { acked: 0, ackedPerSecond: [], offered: 0, stop: false, tally: new Tally() }
  const t0 = performance.now()
  setTimeout(() => (s.stop = true), measureS * 1000)
  await Promise.all(Array.from({ length: o.connections }, () => ingestLoop(o, s, headers, t0)))
  const rate = s.acked / ((performance.now() - t0) / 1000)
  if (s.tally.errors.length) process.stderr.write(`measure: ${s.tally.errors.length} batches failed: ${s.tally.errors[0]}\n`)
  return rate
}

/** The soak proper: every client until the time is up, sampled meanwhile. */
async function soak(c: Ctx, rate: number, pid: number): Promise<{ samples: Sample[]; ingest: IngestState; duration: number }> {
  const samples: Sample[] = []
  const o = traceOptions({ 'base-url': c.url, project: PROJECT, connections: '2', 'batch-size': '100', rate: String(rate) })
  const ing = ingest(c, o)
  const clients = readers(c)
  const timer = setTimeout(() => (c.state.stop = true), minutes * 60_000)
  let next = sampleS * 1000
  while (!c.state.stop) {
    await new Promise((r) => setTimeout(r, Math.max(0, Math.min(500, c.t0 + next - performance.now()))))
    if (performance.now() - c.t0 >= next) {
      samples.push(await sample(c.url, c.headers, pid, c.t0))
      next += sampleS * 1000
    }
  }
  clearTimeout(timer)
  await Promise.all([ing.done, ...clients])
  const duration = (performance.now() - c.t0) / 1000
  samples.push(await sample(c.url, c.headers, pid, c.t0))
  return { samples, ingest: ing.state, duration }
}

function report(summary: ReturnType<typeof targets>, routes: Record<string, ReturnType<typeof routeSummary>>, load: number[]): string {
  let out = `\nroute                 requests   p50 ms   p99 ms  intended 429/503  other errors\n`
  for (const [name, r] of Object.entries(routes))
    out += `${name.padEnd(20)} ${String(r.requests).padStart(9)} ${r.p50_ms.toFixed(1).padStart(8)} ${r.p99_ms.toFixed(1).padStart(8)} ${String(r.intended_errors).padStart(17)} ${String(r.unintended_errors).padStart(13)}\n`
  out += `\nload average (1 min) during the soak: min ${Math.min(...load).toFixed(1)}, median ${percentile(load, 50).toFixed(1)}, max ${Math.max(...load).toFixed(1)} on ${os.cpus().length} cores\n\ntargets:\n`
  for (const [name, v] of Object.entries(summary))
    out += `  ${v.met ? 'MET    ' : 'NOT MET'} ${name}: ${JSON.stringify({ ...v, met: undefined })}\n`
  return out
}

async function main(): Promise<void> {
  const dataDir = mkdtempSync(path.join(os.tmpdir(), 'weft-soak-'))
  const server = await startWeft({ root: ROOT_DIR, dataDir, key: KEY })
  try {
    const headers = traceAuth(KEY)
    const pid = serverPid(dataDir)
    const { objectId, tableDigest } = await setup(server.url, headers)
    const measured = fixedRate === null ? await measureMax(server.url, headers) : null
    const rate = fixedRate ?? measured! / 2
    process.stderr.write(
      `soak: ${measured === null ? '' : `measured ${measured.toFixed(0)} calls/s; `}ingest at ${rate.toFixed(0)} calls/s for ${minutes} min\n`,
    )
    const logs = new Map<string, RouteLog>()
    const c: Ctx = {
      url: server.url,
      headers,
      project: PROJECT,
      objectId,
      tableDigest,
      tableRows: TABLE_ROWS,
      t0: performance.now(),
      state: { stop: false },
      logs,
    }
    await getJson(`${server.url}/admin/stats?reset=true`, headers)
    const run = await soak(c, rate, pid)
    logs.set('call/upsert_batch', ingestLog(run.ingest.tally))
    const routes = Object.fromEntries([...logs.entries()].sort().map(([k, l]) => [k, routeSummary(l)]))
    const summary = targets(routes, run.samples, warmupS)
    const load = run.samples.map((s) => s.load_avg_1m)
    const date = new Date().toISOString()
    const result = {
      date,
      weft_version: VERSION,
      minutes,
      duration_s: run.duration,
      warmup_s: warmupS,
      sample_seconds: sampleS,
      measured_max_calls_per_s: measured,
      ingest_rate_calls_per_s: rate,
      acknowledged_calls: run.ingest.acked,
      acknowledged_calls_per_s: run.ingest.acked / run.duration,
      cpus: os.cpus().length,
      load_average_1m: { min: Math.min(...load), median: percentile(load, 50), max: Math.max(...load) },
      routes,
      targets: summary,
      samples: run.samples,
      // Each route's p99 per sample interval (ms, by the interval's end in s): slow reads lined up with the samples.
      p99_by_interval: Object.fromEntries([...logs.entries()].sort().map(([k, l]) => [k, windowP99(l, sampleS)])),
    }
    const dir = path.join(ROOT_DIR, 'bench', 'results')
    mkdirSync(dir, { recursive: true })
    const base = path.join(dir, `soak-${date.replace(/[:.]/g, '-')}`)
    writeFileSync(`${base}.json`, JSON.stringify(result, null, 2) + '\n')
    const title = `weft soak, ${(run.duration / 60).toFixed(1)} min, ingest ${rate.toFixed(0)} calls/s, load avg ${result.load_average_1m.median.toFixed(1)} on ${os.cpus().length} cores, ${date}`
    writeFileSync(
      `${base}.svg`,
      soakChart(title, { samples: run.samples, logs, ackedPerSecond: run.ingest.ackedPerSecond, duration: run.duration }),
    )
    process.stdout.write(report(summary, routes, load) + `wrote ${base}.json and .svg\n`)
  } finally {
    await server.stop()
    rmSync(dataDir, { recursive: true, force: true })
  }
}

main().catch((e) => {
  process.stderr.write(`soak: ${(e as Error).stack}\n`)
  process.exit(1)
})
