import type { ChildProcess } from 'node:child_process'
import { existsSync, mkdtempSync } from 'node:fs'
import { rm } from 'node:fs/promises'
import { createRequire } from 'node:module'
import os from 'node:os'
import path from 'node:path'
import { fileURLToPath } from 'node:url'
import { spawnClean } from './child-env.js'
import { SERVER_NODE_FLAGS } from '../../src/core/node-flags.js'

/** The checkout: the nearest folder above this file with a package.json (this file runs as dist/test/helpers/server.js). */
export const ROOT = (() => {
  for (let dir = path.dirname(fileURLToPath(import.meta.url)); ; dir = path.dirname(dir)) {
    if (existsSync(path.join(dir, 'package.json'))) return dir
    if (path.dirname(dir) === dir) throw new Error('no package.json above ' + fileURLToPath(import.meta.url))
  }
})()
export const MAIN = path.join(ROOT, 'dist', 'src', 'weft.cjs')
/** Where chdb is looked for, as the server does (src/storage.ts): weft's own install, then the bench peers'. */
export const CHDB_FROM = [path.join(ROOT, 'package.json'), path.join(ROOT, 'bench', 'peer-deps', 'package.json')]

/**
 * WEFT_STORAGE=chdb runs a suite's servers on the ClickHouse backend in-process (the servers inherit
 * the environment). chdb is an optional ~550 MB install: without it such a run skips the file.
 */
if (process.env.WEFT_STORAGE === 'chdb' && !chdbInstalled()) {
  process.stdout.write('1..0 # SKIP WEFT_STORAGE=chdb but chdb is not installed (an optional dependency: npm install chdb)\n')
  process.exit(0)
}

function chdbInstalled(): boolean {
  return CHDB_FROM.some((from) => {
    try {
      createRequire(from).resolve('chdb')
      return true
    } catch {
      return false
    }
  })
}

/** How long a test server may take to listen (a start on a loaded 2-core machine took up to ~55 s). */
const START_TIMEOUT_MS = 60_000

export interface TestServer {
  url: string
  key: string
  dataDir: string
  proc: ChildProcess
  /** Everything the process printed so far. */
  output(): string
  /** Sends a signal and resolves with the exit code. */
  stop(signal?: NodeJS.Signals): Promise<number | null>
  /** Resolves with the exit code, sending nothing. */
  exited(): Promise<number | null>
  basic(key?: string): Record<string, string>
  bearer(key?: string): Record<string, string>
}

export function tempDir(prefix = 'weft-test-'): string {
  return mkdtempSync(path.join(os.tmpdir(), prefix))
}

/** Runs the weft CLI to completion. */
export function runCli(args: string[], env: Record<string, string> = {}): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    const p = spawnClean(process.execPath, [...SERVER_NODE_FLAGS, MAIN, ...args], {
      env: { ...process.env, ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    })
    let stdout = ''
    let stderr = ''
    p.stdout!.on('data', (d) => (stdout += d))
    p.stderr!.on('data', (d) => (stderr += d))
    p.on('exit', (code) => resolve({ code, stdout, stderr }))
  })
}

/**
 * Starts `weft serve` as its own process on a free loopback port and a fresh data dir (unless
 * given), and waits for it to say where it listens.
 */
export async function startServer(
  opts: { dataDir?: string; env?: Record<string, string>; args?: string[]; key?: string | null } = {},
): Promise<TestServer> {
  const dataDir = opts.dataDir ?? tempDir()
  const key = opts.key === undefined ? 'test-admin-key-' + Math.random().toString(36).slice(2) : opts.key
  // The geo ranges are parsed at the first /geolocate rather than at every start (seconds of CPU per server), and
  // one ingest worker starts instead of one per core (each loads the ingest modules: ~0.7 s of CPU); a file or a
  // start that tests the pool's parallelism sets WEFT_INGEST_WORKERS itself.
  const env = {
    WEFT_INGEST_WORKERS: '1',
    ...process.env,
    WEFT_LOG_LEVEL: 'warn',
    WEFT_GEO_PRELOAD: 'false',
    ...opts.env,
  } as Record<string, string>
  if (key !== null) env.WEFT_API_KEY = key
  else delete env.WEFT_API_KEY
  const proc = spawnClean(
    process.execPath,
    [...SERVER_NODE_FLAGS, MAIN, 'serve', '--port', '0', '--data-dir', dataDir, ...(opts.args ?? [])],
    {
      env,
      stdio: ['ignore', 'pipe', 'pipe'],
    },
  )
  let out = ''
  proc.stdout!.on('data', (d) => (out += d))
  proc.stderr!.on('data', (d) => (out += d))
  const url = await new Promise<string>((resolve, reject) => {
    // A server that does not come up is killed: left running, it would load the machine for the tests after it.
    const timer = setTimeout(() => {
      proc.kill('SIGKILL')
      reject(new Error(`server did not start in ${START_TIMEOUT_MS / 1000} s:\n` + out))
    }, START_TIMEOUT_MS)
    const check = () => {
      const m = /listening on (http:\/\/\S+)/.exec(out)
      if (m) {
        clearTimeout(timer)
        resolve(m[1]!)
      }
    }
    proc.stdout!.on('data', check)
    proc.on('exit', (code) => {
      clearTimeout(timer)
      reject(new Error(`server exited with ${code} before listening:\n${out}`))
    })
  })
  const exited = new Promise<number | null>((r) => proc.on('exit', (code) => r(code)))
  return {
    url,
    key: key ?? '',
    dataDir,
    proc,
    output: () => out,
    exited: () => exited,
    async stop(signal = 'SIGTERM') {
      if (proc.exitCode === null && proc.signalCode === null) proc.kill(signal)
      const code = await exited
      if (!opts.dataDir) await rm(dataDir, { recursive: true, force: true })
      // Every test server's log is searched for the key it was given: a key must never reach a log line.
      if (key && out.includes(key)) throw new Error(`the server's output contains its API key:\n${out.slice(0, 2000)}`)
      return code
    },
    basic: (k = key ?? '') => ({ authorization: 'Basic ' + Buffer.from('api:' + k).toString('base64') }),
    bearer: (k = key ?? '') => ({ authorization: 'Bearer ' + k }),
  }
}

/**
 * Sends a request, its body as JSON when one is given, with the server's admin key unless other auth headers
 * are given; the body parsed when it is JSON, the headers kept.
 */
export async function requestJson(s: TestServer, method: string, path: string, body?: unknown, auth: Record<string, string> = s.basic()) {
  const res = await fetch(s.url + path, {
    method,
    headers: { ...auth, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
    body: body === undefined ? undefined : JSON.stringify(body),
  })
  const text = await res.text()
  let json: any
  try {
    json = JSON.parse(text)
  } catch {}
  return { status: res.status, json, text, headers: res.headers }
}

/** POSTs JSON, as `requestJson`. */
export const postJson = (s: TestServer, path: string, body: unknown, auth: Record<string, string> = s.basic()) =>
  requestJson(s, 'POST', path, body, auth)

/** The calls /calls/stream_query answers, parsed from its JSON lines; a status other than 200 throws. */
export async function streamQuery(s: TestServer, body: Record<string, unknown>, auth: Record<string, string> = s.basic()): Promise<any[]> {
  const r = await postJson(s, '/calls/stream_query', body, auth)
  if (r.status !== 200) throw new Error(`${r.status} ${r.text}`)
  return r.text
    .split('\n')
    .filter(Boolean)
    .map((l) => JSON.parse(l))
}
