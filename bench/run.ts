/**
 * Front-end bench: weft (uWebSockets.js) against the same pipeline on node:http, in one run.
 *
 *   npm run build && node dist/bench/run.js [--duration 10] [--runs 5] [--connections 64] [--scenarios health,geolocate] [--access-log false]
 *
 * Each server is pinned to CPU 0 and the load generator (wrk; autocannon when wrk is missing) to
 * CPU 1, so they do not compete for a core. Runs alternate between the two servers so slow drift
 * on the machine hits both. Writes bench/results/frontend-<stamp>.json and .svg.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process'
import { SERVER_NODE_FLAGS } from '../src/core/node-flags.js'
import { mkdtempSync, writeFileSync, rmSync, mkdirSync } from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { parseFlags } from '../src/core/config.js'
import { ROOT_DIR, VERSION } from '../src/core/version.js'
import { barChart } from './chart.js'
import { freePort, spread } from './util.js'

interface Scenario {
  name: string
  path: string
  /** wrk Lua script body, for scenarios that vary the request. */
  lua?: string
}

const GEO_IPS = [
  '8.8.8.8',
  '1.1.1.1',
  '81.2.69.160',
  '203.0.113.9',
  '2001:4860:4860::8888',
  '2a00:1450:4001:81b::200e',
  '5.62.60.1',
  '196.25.1.1',
]

const SCENARIOS: Scenario[] = [
  { name: 'health', path: '/health' },
  {
    name: 'geolocate',
    path: '/geolocate?ip=8.8.8.8',
    lua: `local ips = {${GEO_IPS.map((ip) => `"${ip}"`).join(',')}}
local i = 0
request = function()
  i = i + 1
  return wrk.format("GET", "/geolocate?ip=" .. ips[(i % #ips) + 1])
end`,
  },
]

interface Run {
  rps: number
  p50_ms: number
  p99_ms: number
  errors: number
}

const { flags } = parseFlags(process.argv.slice(2))
/** Access logs on (the default, as users run it) or off, for both servers alike. */
const accessLog = flags['access-log'] ?? 'true'
const duration = Number(flags.duration ?? 10)
const runs = Number(flags.runs ?? 5)
const connections = Number(flags.connections ?? 64)
const wanted = (flags.scenarios ?? SCENARIOS.map((s) => s.name).join(',')).split(',')
const cpus = os.cpus().length
const serverCpu = '0'
const loadCpu = cpus > 1 ? '1' : '0'

async function waitReady(url: string): Promise<void> {
  const until = Date.now() + 30_000
  for (;;) {
    try {
      const r = await fetch(url + '/geolocate?ip=8.8.8.8')
      if (r.status === 200) return
    } catch {
      // not up yet
    }
    if (Date.now() > until) throw new Error(`${url} did not come up`)
    await new Promise((r) => setTimeout(r, 200))
  }
}

async function startTarget(name: string, script: string): Promise<{ name: string; url: string; proc: ChildProcess; dir: string }> {
  const port = await freePort()
  const dir = mkdtempSync(path.join(os.tmpdir(), `weft-bench-${name}-`))
  // Same settings for both, access logs included: they are part of the work a request costs.
  const args = [
    '-c',
    serverCpu,
    process.execPath,
    ...(name === 'weft' ? SERVER_NODE_FLAGS : []),
    script,
    ...(name === 'weft' ? ['serve'] : []),
    '--port',
    String(port),
    '--data-dir',
    dir,
  ]
  const proc = spawn('taskset', args, {
    env: { ...process.env, WEFT_API_KEY: 'bench-key', WEFT_ACCESS_LOG: accessLog },
    stdio: ['ignore', 'ignore', 'inherit'],
  })
  const url = `http://127.0.0.1:${port}`
  await waitReady(url)
  return { name, url, proc, dir }
}

function hasWrk(): boolean {
  return spawnSync('wrk', ['--version']).error === undefined
}

function toMs(v: string): number {
  const m = /^([\d.]+)(us|ms|s)$/.exec(v.trim())
  if (!m) return NaN
  const n = Number(m[1])
  return m[2] === 'us' ? n / 1000 : m[2] === 's' ? n * 1000 : n
}

function runWrk(url: string, sc: Scenario, seconds: number): Run {
  const args = ['-c', loadCpu, 'wrk', '-t1', `-c${connections}`, `-d${seconds}s`, '--latency']
  let luaFile: string | undefined
  if (sc.lua) {
    luaFile = path.join(os.tmpdir(), `weft-bench-${sc.name}.lua`)
    writeFileSync(luaFile, sc.lua)
    args.push('-s', luaFile)
  }
  args.push(url + sc.path)
  const out = spawnSync('taskset', args, { encoding: 'utf8' })
  if (out.status !== 0) throw new Error('wrk failed: ' + out.stderr)
  const text = out.stdout
  const rps = Number(/Requests\/sec:\s+([\d.]+)/.exec(text)?.[1])
  const p50 = toMs(/\n\s+50%\s+(\S+)/.exec(text)?.[1] ?? '')
  const p99 = toMs(/\n\s+99%\s+(\S+)/.exec(text)?.[1] ?? '')
  const non2xx = Number(/Non-2xx or 3xx responses:\s+(\d+)/.exec(text)?.[1] ?? 0)
  const sockErr = /Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)/.exec(text)
  const errors = non2xx + (sockErr ? sockErr.slice(1).reduce((a, b) => a + Number(b), 0) : 0)
  return { rps, p50_ms: p50, p99_ms: p99, errors }
}

function runAutocannon(url: string, sc: Scenario, seconds: number): Run {
  const bin = path.join(ROOT_DIR, 'node_modules', 'autocannon', 'autocannon.js')
  const target = sc.name === 'geolocate' ? url + '/geolocate?ip=8.8.8.8' : url + sc.path
  const out = spawnSync('taskset', ['-c', loadCpu, process.execPath, bin, '-j', '-c', String(connections), '-d', String(seconds), target], {
    encoding: 'utf8',
  })
  const j = JSON.parse(out.stdout) as {
    requests: { average: number }
    latency: { p50: number; p99: number }
    non2xx: number
    errors: number
  }
  return { rps: j.requests.average, p50_ms: j.latency.p50, p99_ms: j.latency.p99, errors: j.non2xx + j.errors }
}

const round = (x: number, d = 3) => Math.round(x * 10 ** d) / 10 ** d

async function main(): Promise<void> {
  const useWrk = hasWrk()
  if (!useWrk) process.stderr.write('wrk not found (apt-get install wrk); using autocannon, which saturates earlier\n')
  const targets = [
    await startTarget('weft', path.join(ROOT_DIR, 'dist', 'src', 'weft.cjs')),
    await startTarget('node_http', path.join(ROOT_DIR, 'dist', 'bench', 'peers', 'node-http.js')),
  ]
  const results: Record<string, unknown> = {}
  try {
    for (const sc of SCENARIOS.filter((s) => wanted.includes(s.name))) {
      const per: Record<string, Run[]> = { weft: [], node_http: [] }
      // Warm both up (JIT, caches) before anything is measured.
      for (const t of targets) (useWrk ? runWrk : runAutocannon)(t.url, sc, 2)
      for (let i = 0; i < runs; i++) {
        for (const t of i % 2 ? [...targets].reverse() : targets) {
          const r = (useWrk ? runWrk : runAutocannon)(t.url, sc, duration)
          per[t.name]!.push(r)
          process.stdout.write(
            `${sc.name} ${t.name} run ${i + 1}: ${Math.round(r.rps)} req/s p50 ${r.p50_ms} ms p99 ${r.p99_ms} ms errors ${r.errors}\n`,
          )
        }
      }
      const summary = (rs: Run[]) => ({
        runs: rs,
        rps: spread(rs.map((r) => r.rps)),
        p50_ms: spread(rs.map((r) => r.p50_ms)),
        p99_ms: spread(rs.map((r) => r.p99_ms)),
        errors: rs.reduce((a, r) => a + r.errors, 0),
      })
      const w = summary(per.weft!)
      const n = summary(per.node_http!)
      results[sc.name] = {
        weft: w,
        node_http: n,
        ratio_rps_median: round(w.rps.median / n.rps.median),
        ratio_p99_median: round(w.p99_ms.median / n.p99_ms.median),
      }
      process.stdout.write(
        `${sc.name}: weft/node:http req/s ratio ${round(w.rps.median / n.rps.median, 2)} (medians ${Math.round(w.rps.median)} / ${Math.round(n.rps.median)})\n`,
      )
    }
  } finally {
    for (const t of targets) {
      t.proc.kill('SIGTERM')
      await new Promise((r) => t.proc.on('exit', r))
      rmSync(t.dir, { recursive: true, force: true })
    }
  }

  const stamp = new Date().toISOString().replace(/[:.]/g, '-')
  const outDir = path.join(ROOT_DIR, 'bench', 'results')
  mkdirSync(outDir, { recursive: true })
  const doc = {
    bench: 'frontend',
    weft_version: VERSION,
    date: new Date().toISOString(),
    machine: { cpus, model: os.cpus()[0]?.model, memory_gb: round(os.totalmem() / 2 ** 30, 1), node: process.version },
    setup: {
      load_generator: useWrk ? 'wrk -t1 --latency' : 'autocannon',
      connections,
      access_log: accessLog === 'true',
      duration_s: duration,
      runs,
      server_cpu: serverCpu,
      load_cpu: loadCpu,
      peer: 'node:http serving the same weft pipeline (routing, auth, validation, pino access log)',
    },
    scenarios: results,
  }
  const base = path.join(outDir, `frontend-${stamp}`)
  writeFileSync(base + '.json', JSON.stringify(doc, null, 2) + '\n')
  writeFileSync(
    base + '.svg',
    barChart(doc.scenarios as never, `weft ${VERSION} front end vs node:http — ${runs}×${duration}s, ${connections} connections`),
  )
  process.stdout.write(`wrote ${base}.json and .svg\n`)
}

await main()
