/**
 * Ingest bench: `/call/upsert_batch` with durability on (every acknowledged batch is fsynced).
 *
 *   npm run build && node dist/bench/ingest.js [--duration 10] [--runs 3] [--writers 8] [--batches 100,1000]
 *
 * The writers are pinned to the last CPU; the server to `--server-cpus` (default: all of them, as
 * its ingest workers, DuckDB and the event loop share the machine). Calls are realistic: ~1 KB of inputs and of
 * output, usage for one of 3 models. Bodies are built before the clock starts so the writers cost
 * little. After each run the server's own /admin/stats gives event-loop delay (p50/p99/max) and RSS.
 * Writes bench/results/ingest-<stamp>.json and .svg. The target: 50,000 calls/s.
 */
import { spawn } from 'node:child_process'
import { randomBytes } from 'node:crypto'
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { Worker } from 'node:worker_threads'
import { parseFlags } from '../src/core/config.js'
import { ROOT_DIR, VERSION } from '../src/core/version.js'
import { spreadChart } from './chart.js'
import { spread, startWeft } from './util.js'

const { flags } = parseFlags(process.argv.slice(2))
const duration = Number(flags.duration ?? 10)
const runs = Number(flags.runs ?? 3)
const writers = Number(flags.writers ?? 8)
const batches = (flags.batches ?? '100,1000').split(',').map(Number)
const serverCpus = flags['server-cpus'] ?? Array.from({ length: os.cpus().length }, (_, i) => i).join(',')
const loadCpu = os.cpus().length - 1
const KEY = 'bench-key'
const MODELS = ['gpt-4o', 'claude-3-5-sonnet', 'llama-3.1-70b']

const hex = (n: number) => randomBytes(n / 2).toString('hex')

function body(calls: number): string {
  const trace = hex(32)
  const t = new Date().toISOString()
  const batch = []
  for (let i = 0; i < calls; i++) {
    const id = hex(16)
    const model = MODELS[i % MODELS.length]!
    batch.push({
      mode: 'start',
      req: {
        start: {
          project_id: 'bench/ingest',
          id,
          trace_id: trace,
          op_name: 'weave:///bench/ingest/op/chat:v1',
          started_at: t,
          attributes: { weave: { source: 'bench' } },
          inputs: { model, messages: [{ role: 'user', content: 'q'.repeat(1000) }] },
        },
      },
    })
    batch.push({
      mode: 'end',
      req: {
        end: {
          project_id: 'bench/ingest',
          id,
          ended_at: t,
          output: { content: 'a'.repeat(1000) },
          summary: { usage: { [model]: { prompt_tokens: 250, completion_tokens: 120, total_tokens: 370, requests: 1 } } },
        },
      },
    })
  }
  return JSON.stringify({ batch })
}

/** The writers run in a worker pinned (with this process) to CPU 1. */
const WRITER = `
const { workerData, parentPort } = require('node:worker_threads')
const { url, auth, bodies, writers, seconds, calls } = workerData
let done = 0, stop = false, errors = 0, k = 0
async function w() { while (!stop) { const r = await fetch(url, { method: 'POST', headers: { authorization: auth, 'content-type': 'application/json' }, body: bodies[k++ % bodies.length] }); await r.arrayBuffer(); if (r.status === 200) done += calls; else errors++ } }
const t0 = performance.now(); setTimeout(() => (stop = true), seconds * 1000)
Promise.all(Array.from({ length: writers }, w)).then(() => parentPort.postMessage({ calls: done, errors, seconds: (performance.now() - t0) / 1000 }))`

function load(url: string, bodies: string[], calls: number, seconds: number): Promise<{ calls: number; errors: number; seconds: number }> {
  const auth = 'Basic ' + Buffer.from('api:' + KEY).toString('base64')
  return new Promise((resolve, reject) => {
    const w = new Worker(WRITER, { eval: true, workerData: { url: url + '/call/upsert_batch', auth, bodies, writers, seconds, calls } })
    w.once('message', resolve)
    w.once('error', reject)
  })
}

async function main(): Promise<void> {
  if (os.cpus().length > 1) spawn('taskset', ['-p', '-c', String(loadCpu), String(process.pid)], { stdio: 'ignore' })
  const results: Record<string, unknown> = {}
  for (const b of batches) {
    const dir = mkdtempSync(path.join(os.tmpdir(), 'weft-ingest-'))
    const server = await startWeft({ root: ROOT_DIR, dataDir: dir, key: KEY, cpus: serverCpus, env: { WEFT_ACCESS_LOG: 'true' } })
    const url = server.url
    const bodies = Array.from({ length: Math.max(4, Math.ceil(200 / b) * writers) }, () => body(b))
    const stats = async (reset: boolean) =>
      (await (await fetch(`${url}/admin/stats${reset ? '?reset=true' : ''}`, { headers: { authorization: `Bearer ${KEY}` } })).json()) as {
        event_loop_delay_ms: { p50: number; p99: number; max: number }
        memory: { rss_bytes: number }
        calls: Record<string, number>
      }
    await load(url, bodies, b, 2) // warm-up
    const per: { calls_per_s: number; errors: number; eld_p50_ms: number; eld_p99_ms: number; eld_max_ms: number; rss_mb: number }[] = []
    for (let r = 0; r < runs; r++) {
      await stats(true)
      const out = await load(url, bodies, b, duration)
      const st = await stats(false)
      const row = {
        calls_per_s: Math.round(out.calls / out.seconds),
        errors: out.errors,
        eld_p50_ms: st.event_loop_delay_ms.p50,
        eld_p99_ms: st.event_loop_delay_ms.p99,
        eld_max_ms: st.event_loop_delay_ms.max,
        rss_mb: Math.round(st.memory.rss_bytes / 2 ** 20),
      }
      per.push(row)
      process.stdout.write(
        `batch ${b}: run ${r + 1}: ${row.calls_per_s} calls/s, event loop p99 ${row.eld_p99_ms} ms, RSS ${row.rss_mb} MB, errors ${row.errors}\n`,
      )
    }
    const final = await stats(false)
    results[`batch_${b}`] = {
      runs: per,
      calls_per_s: spread(per.map((x) => x.calls_per_s)),
      eld_p99_ms: spread(per.map((x) => x.eld_p99_ms)),
      rss_mb: spread(per.map((x) => x.rss_mb)),
      store: final.calls,
    }
    await server.stop()
    rmSync(dir, { recursive: true, force: true })
  }
  const stamp = new Date().toISOString().replace(/[:.]/g, '-')
  const outDir = path.join(ROOT_DIR, 'bench', 'results')
  mkdirSync(outDir, { recursive: true })
  const doc = {
    bench: 'ingest',
    weft_version: VERSION,
    date: new Date().toISOString(),
    machine: { cpus: os.cpus().length, model: os.cpus()[0]?.model, node: process.version },
    setup: {
      endpoint: '/call/upsert_batch',
      durability: 'fdatasync per group commit',
      writers,
      duration_s: duration,
      runs,
      server_cpus: serverCpus,
      load_cpu: loadCpu,
      access_log: true,
      target_calls_per_s: 50_000,
    },
    results,
  }
  const base = path.join(outDir, `ingest-${stamp}`)
  writeFileSync(base + '.json', JSON.stringify(doc, null, 2) + '\n')
  const rows = batches.map((b) => ({
    label: `batches of ${b}`,
    ...(results[`batch_${b}`] as { calls_per_s: { min: number; median: number; max: number } }).calls_per_s,
  }))
  writeFileSync(
    base + '.svg',
    spreadChart(
      `weft ${VERSION} ingest, durable, ${writers} writers, server CPUs ${serverCpus}, ${runs}×${duration}s`,
      'calls/s',
      rows,
      50_000,
    ),
  )
  process.stdout.write(`wrote ${base}.json and .svg\n`)
}

await main()
