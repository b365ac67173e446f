import t from 'tap'
import http from 'node:http'
import { rm } from 'node:fs/promises'
import { existsSync } from 'node:fs'
import path from 'node:path'
import { startServer, tempDir } from './helpers/server.js'
import { RawConn, rawRequest } from './helpers/raw-http.js'

// No chat in this file: its servers start without the built-in model (about 1 s of CPU less per start).
process.env.WEFT_MODEL ??= 'none'

t.test('SIGTERM lets a request in flight finish, then exits 0 and frees the catalog', async (t) => {
  const dataDir = tempDir()
  t.teardown(() => rm(dataDir, { recursive: true, force: true }))
  const s = await startServer({ dataDir })
  t.ok(existsSync(path.join(dataDir, 'server.json')))
  const u = new URL(s.url)
  const body = JSON.stringify({ project_id: 'acme/p', start: '2026-01-01T00:00:00Z', end: '2026-01-02T00:00:00Z' })
  // Start an upload, stop half way, signal the server, then finish it.
  const answer = new Promise<{ status: number; body: string }>((resolve, reject) => {
    const req = http.request(
      {
        host: u.hostname,
        port: u.port,
        path: '/calls/stats',
        method: 'POST',
        headers: { ...s.basic(), 'content-length': String(body.length) },
      },
      (res) => {
        let b = ''
        res.on('data', (d) => (b += d))
        res.on('end', () => resolve({ status: res.statusCode!, body: b }))
      },
    )
    req.on('error', reject)
    req.write(body.slice(0, 10))
    // Signal only once the server is handling the upload (under load its headers may take a while).
    const signalWhenInFlight = async () => {
      for (;;) {
        const stats = (await (await fetch(s.url + '/admin/stats', { headers: s.basic() })).json()) as { in_flight: number }
        if (stats.in_flight >= 2) break
        await new Promise((r) => setTimeout(r, 20))
      }
      s.proc.kill('SIGTERM')
      setTimeout(() => req.end(body.slice(10)), 300)
    }
    signalWhenInFlight().catch(reject)
  })
  const r = await answer
  t.equal(r.status, 200, 'the in-flight request got its real answer')
  t.equal(await s.exited(), 0, 'exit code 0 after one SIGTERM')
  t.notOk(existsSync(path.join(dataDir, 'server.json')), 'server.json removed')
  const again = await startServer({ dataDir })
  t.equal((await fetch(again.url + '/health')).status, 200, 'the catalog opens again')
  await again.stop()
})

t.test('during the grace period new requests get 503; a second SIGTERM exits at once', async (t) => {
  const s = await startServer({ args: ['--shutdown-grace-ms', '120000'] })
  t.teardown(() => s.stop('SIGKILL'))
  const auth = s.basic()
  // A keep-alive connection opened before the signal, and an upload that never finishes (holds the grace period).
  const idle = await RawConn.open(s.url)
  idle.write(rawRequest('GET', '/health'))
  t.equal((await idle.response())?.status, 200)
  const stuck = await RawConn.open(s.url)
  stuck.write(rawRequest('POST', '/calls/stats', { ...auth, 'content-type': 'application/json', 'content-length': '100' }))
  stuck.write('{"project_id":')
  for (;;) {
    const stats = (await (await fetch(s.url + '/admin/stats', { headers: auth })).json()) as { in_flight: number }
    if (stats.in_flight >= 2) break
    await new Promise((r) => setTimeout(r, 20))
  }
  s.proc.kill('SIGTERM')
  // The signal lands asynchronously: ask on the open connection until the server answers as draining.
  let answer = null
  for (let i = 0; i < 100; i++) {
    idle.write(rawRequest('GET', '/health'))
    answer = await idle.response()
    if (answer?.status !== 200) break
    await new Promise((r) => setTimeout(r, 50))
  }
  t.equal(answer?.status, 503, 'a new request during the grace period gets 503')
  t.match(JSON.parse(answer!.body), { reason: /shutting down/ }, 'in the family shape')
  t.equal(answer?.headers['retry-after'], '1')
  t.ok(await idle.closedWithin(5000), 'and its connection is closed')
  t.equal(s.proc.exitCode, null, 'the first signal waits for the request in flight')
  const t0 = Date.now()
  s.proc.kill('SIGTERM')
  const code = await s.exited()
  t.ok(Date.now() - t0 < 5000, `the second SIGTERM exits at once (${Date.now() - t0} ms)`)
  t.equal(code, 1, 'with exit code 1')
  stuck.destroy()
})
