import t, { type Test } from 'tap'
import { spawn } from 'node:child_process'
import { readdirSync } from 'node:fs'
import { rm } from 'node:fs/promises'
import path from 'node:path'
import { ROOT, tempDir } from './helpers/server.js'

// DuckDB's statements hold a libuv pool thread each until they end, so the server starts with a pool of 64
// (src/weft.cts) rather than libuv's 4: in a 4-minute soak, an object read's p99 went from 1.8 s to 0.3 s
// (bench/README.md, Soak). libuv reads the size when its pool starts, which loading an ES module already does;
// so the CommonJS entry sets it, and a start by the ES module itself says that the pool kept its default.
// These servers are spawned here, not by the helper, to start the ES module entry too and to leave
// UV_THREADPOOL_SIZE out of one start's environment; like the helper's (test/helpers/child-env.ts), they run without
// tap's NODE_OPTIONS, whose preload would start the pool before any entry runs.

const threads = (pid: number) => readdirSync(`/proc/${pid}/task`).length

async function serve(t: Test, entry: string, extra: Record<string, string> = {}) {
  const dataDir = tempDir()
  const env: Record<string, string> = { ...(process.env as Record<string, string>), WEFT_API_KEY: 'threadpool-test-key', ...extra }
  if (!extra.UV_THREADPOOL_SIZE) delete env.UV_THREADPOOL_SIZE
  const args = [path.join(ROOT, 'dist', 'src', entry), 'serve', '--port', '0', '--data-dir', dataDir, '--model', 'none']
  // tap's spawn hook puts its NODE_OPTIONS back into a child's environment; env(1) takes it out, then execs node.
  const proc = spawn('env', ['-u', 'NODE_OPTIONS', process.execPath, ...args], { env, stdio: ['ignore', 'pipe', 'pipe'] })
  t.teardown(async () => {
    proc.kill('SIGKILL')
    await rm(dataDir, { recursive: true, force: true })
  })
  let out = ''
  const url = await new Promise<string>((resolve, reject) => {
    const on = (d: Buffer) => {
      out += d
      const m = /listening on (http:\/\/\S+)/.exec(out)
      if (m) resolve(m[1]!)
    }
    proc.stdout.on('data', on)
    proc.stderr.on('data', on)
    proc.on('exit', (code) => reject(new Error(`exited with ${code}: ${out}`)))
  })
  // A first statement, so that the pool has started whatever the entry did.
  const res = await fetch(`${url}/calls/query_stats`, {
    method: 'POST',
    headers: { authorization: 'Bearer threadpool-test-key', 'content-type': 'application/json' },
    body: JSON.stringify({ project_id: 'acme/pool' }),
  })
  t.equal(res.status, 200, `${entry} answers a read`)
  return { pid: proc.pid!, out: () => out }
}

t.test('weft.cjs starts libuv with 64 threads unless UV_THREADPOOL_SIZE says otherwise', async (t) => {
  const big = await serve(t, 'weft.cjs')
  const small = await serve(t, 'weft.cjs', { UV_THREADPOOL_SIZE: '4' })
  const [b, s] = [threads(big.pid), threads(small.pid)]
  t.ok(b - s >= 60, `the default start has 60 more threads than one with UV_THREADPOOL_SIZE=4 (${b} against ${s})`)
  t.notMatch(big.out(), /thread pool at its default/, 'no warning through weft.cjs')
})

t.test('started as dist/src/main.js, the server warns that the pool kept its default', async (t) => {
  const direct = await serve(t, 'main.js')
  t.match(direct.out(), /libuv thread pool at its default of 4/, 'the warning names the default and what to do')
})
