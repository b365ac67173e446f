import { spawn } from 'node:child_process'
import { openSync } from 'node:fs'
import net from 'node:net'
import os from 'node:os'
import path from 'node:path'
import { SERVER_NODE_FLAGS } from '../src/core/node-flags.js'

/** A port nothing listens on right now, for a server the bench starts. */
export function freePort(): Promise<number> {
  return new Promise((resolve) => {
    const srv = net.createServer()
    srv.listen(0, '127.0.0.1', () => {
      const port = (srv.address() as net.AddressInfo).port
      srv.close(() => resolve(port))
    })
  })
}

export interface Spread {
  min: number
  median: number
  max: number
}

/** The machine's noise over runs: min, median, max. */
export function spread(xs: number[]): Spread {
  const s = [...xs].sort((a, b) => a - b)
  const mid = s.length >> 1
  const median = s.length % 2 ? s[mid]! : (s[mid - 1]! + s[mid]!) / 2
  return { min: s[0]!, median, max: s[s.length - 1]! }
}

export interface BenchServer {
  url: string
  /** The server's process id (taskset runs it in its own process). */
  pid: number
  stop(): Promise<void>
}

/**
 * Starts `weft serve` from dist on a free port, pinned to `cpus` (taskset; default: every CPU), and waits until it answers.
 * WEFT_BENCH_NODE_ARGS adds node flags (e.g. --cpu-prof).
 */
export async function startWeft(opts: {
  root: string
  dataDir: string
  key: string
  cpus?: string
  env?: Record<string, string>
  /** More `serve` flags (a storage backend, say). */
  args?: string[]
}): Promise<BenchServer> {
  const cpus = opts.cpus ?? Array.from({ length: os.cpus().length }, (_, i) => i).join(',')
  const port = await freePort()
  const nodeArgs = [...SERVER_NODE_FLAGS, ...(process.env.WEFT_BENCH_NODE_ARGS ?? '').split(' ').filter(Boolean)]
  const main = path.join(opts.root, 'dist', 'src', 'weft.cjs')
  const proc = spawn(
    'taskset',
    ['-c', cpus, process.execPath, ...nodeArgs, main, 'serve', '--port', String(port), '--data-dir', opts.dataDir, ...(opts.args ?? [])],
    {
      env: { ...process.env, WEFT_API_KEY: opts.key, ...opts.env },
      // WEFT_BENCH_SERVER_LOG=file keeps the server's log lines (compactions, rollup builds) for a run's analysis.
      stdio: ['ignore', process.env.WEFT_BENCH_SERVER_LOG ? openSync(process.env.WEFT_BENCH_SERVER_LOG, 'a') : 'ignore', 'inherit'],
    },
  )
  const url = `http://127.0.0.1:${port}`
  for (let i = 0; ; i++) {
    try {
      if ((await fetch(url + '/health')).ok) break
    } catch {
      // Up to two minutes: a loaded machine, or a ClickHouse backend creating its schema.
      if (i > 1200 || proc.exitCode !== null) throw new Error('server did not start')
      await new Promise((r) => setTimeout(r, 100))
    }
  }
  return {
    url,
    pid: proc.pid!,
    async stop() {
      proc.kill('SIGTERM')
      if (proc.exitCode === null) await new Promise((r) => proc.on('exit', r))
    },
  }
}
