/**
 * Dataset ingest alone (the `ingest` part of bench/tables.ts, without the peer, objects or reads): a fresh weft
 * server, then per run a fresh dataset of N rows (~1 KB each) saved in the Python SDK's ~10 MB chunks, the two
 * ways bench/tables.ts does: `update` (create the first chunk, append the rest, one request at a time) and
 * `digests` (every chunk its own table, four requests at a time, then `/table/create_from_digests`). Each table
 * digest is checked against the one computed from the generated rows. Prints MB/s (row JSON bytes over wall time)
 * per run and min / median / max, with the load average before and after, and the server's CPU per MB (all its
 * threads, and its main thread alone), its event-loop delay (p99 and max, from its /admin/stats) and its RSS after
 * each run (and peak); writes every run to
 * bench/results/tables-ingest-<stamp>.json.
 *
 *   npm run build && node dist/bench/tables-ingest.js [--rows 10000,100000] [--runs 2] [--upload update,digests] [--roots /a,/b]
 *                                                    [--bodies prebuilt|inline]
 */
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { parseFlags } from '../src/core/config.js'
import { ROOT_DIR } from '../src/core/version.js'
import { spread, startWeft, type Spread } from './util.js'
import { makeDataset, settle, tableDigestOf, uploadDataset, type Uploader } from './tables-data.js'
import { serverPid, WeftClient } from './tables-weft.js'

const { flags } = parseFlags(process.argv.slice(2))
const sizes = (flags.rows ?? '10000,100000').split(',').map(Number)
const runs = Number(flags.runs ?? 2)
const modes = (flags.upload ?? 'update,digests').split(',') as ('update' | 'digests')[]
const KEY = 'bench-key'

const load = () =>
  os
    .loadavg()
    .map((x) => x.toFixed(1))
    .join(' ')

/** Servers built from other trees (`--roots /a,/b`: each a checkout with its own dist/) run in turns, run by run. */
const roots = flags.roots ? flags.roots.split(',') : [ROOT_DIR]
/** `--bodies inline`: each request body joined and encoded in the timed loop, as before 2026-12-06. */
const inlineBodies = flags.bodies === 'inline'

/** CPU seconds the server process has used, all its threads (DuckDB's and the workers' included). */
function cpuSeconds(pid: number | null, file = 'stat'): number {
  if (pid === null) return NaN
  const fields = readFileSync(`/proc/${pid}/${file}`, 'utf8').split(') ')[1]!.split(' ')
  return (Number(fields[11]) + Number(fields[12])) / 100
}

/** Minor page faults the server process has taken, all its threads: each first touch of fresh memory costs ~25 µs on this VM. */
function minorFaults(pid: number | null): number {
  if (pid === null) return NaN
  return Number(readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ')[7])
}

/** The server's resident memory now and at its peak (`VmRSS`, `VmHWM` of /proc), in MB. */
function rssMb(pid: number | null): { rss: number; peak: number } {
  if (pid === null) return { rss: NaN, peak: NaN }
  const status = readFileSync(`/proc/${pid}/status`, 'utf8')
  const kb = (field: string) => Number(new RegExp(`^${field}:\\s+(\\d+) kB`, 'm').exec(status)?.[1] ?? NaN)
  return { rss: kb('VmRSS') / 1024, peak: kb('VmHWM') / 1024 }
}

/** CPU seconds of the server's main thread alone (its event loop: what one request at a time cannot spread). */
const mainCpuSeconds = (pid: number | null) => cpuSeconds(pid, `task/${pid}/stat`)

/**
 * CPU seconds of each of the server's threads (`main`, or `<comm>-<tid>`: Node's worker threads, V8's helpers and
 * DuckDB's threads are all `node` here, so the busiest few are told apart by thread id), to split a run's CPU
 * without a profiler. Threads that ended are not counted.
 */
function threadCpu(pid: number | null): Record<string, number> {
  const out: Record<string, number> = {}
  if (pid === null) return out
  for (const tid of readdirSync(`/proc/${pid}/task`)) {
    try {
      const name = readFileSync(`/proc/${pid}/task/${tid}/comm`, 'utf8').trim()
      out[Number(tid) === pid ? 'main' : `${name}-${tid}`] = cpuSeconds(pid, `task/${tid}/stat`)
    } catch {
      // The thread ended between the listing and the read.
    }
  }
  return out
}

/** The threads that used at least 0.5 s between two readings, busiest first. */
const threadDelta = (a: Record<string, number>, b: Record<string, number>) =>
  Object.fromEntries(
    Object.entries(b)
      .map(([k, v]): [string, number] => [k, Math.round((v - (a[k] ?? 0)) * 10) / 10])
      .filter(([, v]) => v >= 0.5)
      .sort((x, y) => y[1] - x[1]),
  )

const uploaderOf = (weft: WeftClient): Uploader => ({
  prepare: (d, mode) => {
    if (!inlineBodies) weft.prepare(d, mode)
  },
  create: (c) => weft.create(c),
  append: (base, c) => weft.append(base, c),
  fromDigests: (digests) => weft.fromDigests(digests),
})

async function side(root: string) {
  const dataDir = mkdtempSync(path.join(os.tmpdir(), 'weft-ingest-'))
  const server = await startWeft({ root, dataDir, key: KEY })
  const client = new WeftClient(server.url, KEY)
  return {
    root,
    pid: serverPid(dataDir),
    uploader: uploaderOf(client),
    /** The server's event-loop delay since the last call (its `/admin/stats`, reset each time), in ms. */
    async loopDelay(): Promise<{ p99: number; max: number }> {
      const r = await fetch(`${server.url}/admin/stats?reset=true`, { headers: { authorization: `Bearer ${KEY}` } })
      const st = (await r.json()) as { event_loop_delay_ms: { p99: number; max: number } }
      return st.event_loop_delay_ms
    },
    loopP99: [] as number[],
    rates: [] as number[],
    cpuPerMb: [] as number[],
    mainPerMb: [] as number[],
    peakRss: 0,
    async stop() {
      client.close()
      await server.stop()
      rmSync(dataDir, { recursive: true, force: true })
    },
  }
}

/** Every run, for bench/results. */
const records: Record<string, unknown>[] = []

let nonce = 1
for (const n of sizes) {
  for (const mode of modes) {
    const sides = await Promise.all(roots.map(side))
    try {
      for (let r = 0; r < runs; r++) {
        // Sides take turns going first, so a load that rises or falls over the run hits each alike.
        for (const x of r % 2 ? [...sides].reverse() : sides) {
          const d = makeDataset(n, 1024, nonce++)
          x.uploader.prepare?.(d, mode)
          await settle()
          const before = load()
          const cpu0 = cpuSeconds(x.pid)
          const main0 = mainCpuSeconds(x.pid)
          const threads0 = threadCpu(x.pid)
          const faults0 = minorFaults(x.pid)
          await x.loopDelay()
          const t0 = performance.now()
          const digest = await uploadDataset(x.uploader, d, mode)
          const s = (performance.now() - t0) / 1000
          if (digest !== tableDigestOf(d.digests)) throw new Error(`table digest differs from the generated rows' (${digest})`)
          const cpu = cpuSeconds(x.pid) - cpu0
          const main = mainCpuSeconds(x.pid) - main0
          const threads = threadDelta(threads0, threadCpu(x.pid))
          const faults = minorFaults(x.pid) - faults0
          const loop = await x.loopDelay()
          x.loopP99.push(loop.p99)
          const mem = rssMb(x.pid)
          x.peakRss = Math.max(x.peakRss, mem.peak)
          x.rates.push(d.bytes / 1e6 / s)
          x.cpuPerMb.push((cpu * 1000) / (d.bytes / 1e6))
          x.mainPerMb.push((main * 1000) / (d.bytes / 1e6))
          records.push({
            root: x.root,
            rows: n,
            mode,
            run: r + 1,
            mb: d.bytes / 1e6,
            s,
            cpu_s: cpu,
            main_cpu_s: main,
            minor_faults: faults,
            event_loop_delay_ms: loop,
            thread_cpu_s: threads,
            rss_mb: mem.rss,
            peak_rss_mb: mem.peak,
            load_before: before,
            load_after: load(),
          })
          const mbs = (d.bytes / 1e6 / s).toFixed(1)
          console.log(
            `${x.root} ${n} rows ${mode} run ${r + 1}: ${(d.bytes / 1e6).toFixed(1)} MB in ${s.toFixed(2)} s = ${mbs} MB/s, server CPU ${cpu.toFixed(1)} s (main thread ${main.toFixed(1)} s), ${(faults / (d.bytes / 1e6)).toFixed(0)} page faults/MB, event loop p99 / max ${loop.p99.toFixed(0)} / ${loop.max.toFixed(0)} ms, RSS ${mem.rss.toFixed(0)} MB (peak ${mem.peak.toFixed(0)}) (load ${before} → ${load()}); threads ${JSON.stringify(threads)}`,
          )
        }
      }
    } finally {
      await Promise.all(sides.map((x) => x.stop()))
    }
    for (const x of sides) {
      const [sp, c, m, l] = [spread(x.rates), spread(x.cpuPerMb), spread(x.mainPerMb), spread(x.loopP99)]
      const f = (v: Spread) => `${v.min.toFixed(1)} / ${v.median.toFixed(1)} / ${v.max.toFixed(1)}`
      console.log(
        `${x.root} ${n} rows ${mode}: MB/s min / median / max ${f(sp)}; server CPU ms per MB ${f(c)}, main thread ${f(m)}; event loop p99 ms ${f(l)}; peak RSS ${x.peakRss.toFixed(0)} MB`,
      )
    }
  }
}

const outDir = path.join(ROOT_DIR, 'bench', 'results')
mkdirSync(outDir, { recursive: true })
const out = path.join(outDir, `tables-ingest-${new Date().toISOString().replace(/[:.]/g, '-')}.json`)
const machine = { cpus: os.cpus().length, model: os.cpus()[0]?.model, node: process.version }
writeFileSync(
  out,
  JSON.stringify({ bench: 'tables-ingest', date: new Date().toISOString(), machine, roots, runs: records }, null, 2) + '\n',
)
console.log(`wrote ${out}`)
