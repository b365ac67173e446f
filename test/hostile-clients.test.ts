import t from 'tap'
import net from 'node:net'
import { startServer, type TestServer } from './helpers/server.js'
import { RawConn, rawRequest } from './helpers/raw-http.js'

// No chat in this file: its servers start without the built-in model (about 1 s of CPU less per start).
process.env.WEFT_MODEL ??= 'none'

/**
 * Slow, odd and hostile clients: each gets an answer or a bounded wait, memory stays bounded, and the other
 * clients are served meanwhile. Figures go to the test output (docs/reliability.md, "Bad input and hostile clients").
 */
let s: TestServer
t.before(async () => {
  s = await startServer()
})
t.teardown(() => s.stop())

/** How long uWebSockets.js lets a connection sit without a complete request (its fixed idle timeout is 10 s). */
const IDLE_CLOSE_BOUND_MS = 16_000

async function stats(): Promise<{ rss: number; inFlight: number }> {
  const j = (await (await fetch(s.url + '/admin/stats', { headers: s.basic() })).json()) as any
  return { rss: j.memory.rss_bytes, inFlight: j.in_flight }
}

/** Milliseconds a plain client waits for /health now. */
async function healthMs(): Promise<number> {
  const t0 = performance.now()
  const r = await fetch(s.url + '/health', { signal: AbortSignal.timeout(5000) })
  t.equal(r.status, 200)
  await r.text()
  return performance.now() - t0
}

function otlpJson(project?: string): string {
  const resource = project
    ? {
        attributes: [
          { key: 'wandb.entity', value: { stringValue: project.split('/')[0] } },
          { key: 'wandb.project', value: { stringValue: project.split('/')[1] } },
        ],
      }
    : { attributes: [] }
  return JSON.stringify({
    resourceSpans: [
      {
        resource,
        scopeSpans: [
          {
            spans: [
              {
                traceId: '0123456789abcdef0123456789abcdef',
                spanId: 'fedcba9876543210',
                name: 'h',
                startTimeUnixNano: '1767225600000000000',
              },
            ],
          },
        ],
      },
    ],
  })
}

// Each waits out a fixed timeout for an answer that never comes: side by side, the file waits once.
t.test('requests the transport drops get no answer', async (t) => {
  t.jobs = 2
  t.test('a header name with an underscore gets no answer (uWebSockets.js 20.15–20.60); project-id works', async (t) => {
    const headers = { ...s.basic(), 'content-type': 'application/json' }
    const underscored = await RawConn.open(s.url)
    underscored.write(rawRequest('POST', '/otel/v1/traces', { ...headers, project_id: 'acme/underscore' }, otlpJson()))
    // Today's behaviour, kept visible: when the transport is fixed this answers and the test must be updated.
    t.equal(await underscored.response(3000), null, 'no answer within 3 s to `project_id:` (known transport bug)')
    underscored.destroy()

    const hyphen = await RawConn.open(s.url)
    hyphen.write(rawRequest('POST', '/otel/v1/traces', { ...headers, 'project-id': 'acme/hyphen' }, otlpJson()))
    const r = await hyphen.response(5000)
    t.equal(r?.status, 200, '`project-id:` is answered')
    t.same(JSON.parse(r!.body), {}, 'and the span is accepted')
    hyphen.destroy()
    const q = await fetch(s.url + '/calls/query_stats', {
      method: 'POST',
      headers,
      body: JSON.stringify({ project_id: 'acme/hyphen' }),
    })
    t.same(await q.json(), { count: 1, has_more: false }, 'stored in the project the header names')
    t.ok((await healthMs()) < 2000, 'other clients are served meanwhile')
  })

  t.test('a request with more than 47 headers gets no answer either (the same parser limit)', async (t) => {
    const extra = (n: number) => Object.fromEntries(Array.from({ length: n }, (_, i) => [`x-h-${i}`, 'v']))
    const ok = await RawConn.open(s.url)
    ok.write(rawRequest('GET', '/health', extra(46)))
    t.equal((await ok.response(5000))?.status, 200, '47 header lines (Host included) are answered')
    ok.destroy()
    const many = await RawConn.open(s.url)
    many.write(rawRequest('GET', '/health', extra(60)))
    t.equal(await many.response(3000), null, '61 header lines: no answer within 3 s (known transport limit)')
    many.destroy()
  })
})

t.test('pipelining: answered in order while each answer is immediate; cut behind a pending one', async (t) => {
  const c = await RawConn.open(s.url)
  const n = 50
  let batch = ''
  for (let i = 0; i < n; i++) batch += rawRequest('GET', '/health', { 'x-request-id': `pipe-${i}` })
  c.write(batch)
  const ids: string[] = []
  for (let i = 0; i < n; i++) {
    const r = await c.response(10_000)
    if (!r) break
    ids.push(r.headers['x-request-id']!)
  }
  t.same(
    ids,
    Array.from({ length: n }, (_, i) => `pipe-${i}`),
    `${n} pipelined requests, ${n} answers in order`,
  )
  c.destroy()
  // uWebSockets.js closes a connection whose next request arrives while an answer is still pending (an
  // asynchronous handler): the client sees the connection close at once, never a hang. Known transport limit.
  const cut = await RawConn.open(s.url)
  const post = rawRequest('POST', '/calls/query_stats', { ...s.basic(), 'content-type': 'application/json' }, '{"project_id":"acme/pipe"}')
  cut.write(post + rawRequest('GET', '/health'))
  const t0 = Date.now()
  t.ok(await cut.closedWithin(5000), `the connection is closed (after ${Date.now() - t0} ms), not left hanging`)
  t.ok((await healthMs()) < 2000, 'other clients are served')
})

// Both wait for uWebSockets.js's idle timeout to close their connections: side by side, the file waits once. The
// idle connections open once the slow ones have been measured, so each test's figures are its own.
let slowChecked!: () => void
const slowOpen = new Promise<void>((r) => (slowChecked = r))
t.test('connections the idle timeout closes', async (t) => {
  t.jobs = 2
  t.test('slowloris: partial headers and bodies are closed after the idle timeout; others are served', async (t) => {
    t.teardown(slowChecked)
    const slow: RawConn[] = []
    for (let i = 0; i < 100; i++) {
      const c = await RawConn.open(s.url)
      // Half send a header line at a time and never finish; half declare a body and send a tenth of it.
      if (i % 2) c.write('GET /health HTTP/1.1\r\nHost: x\r\nX-Slow: 1\r\n')
      else
        c.write(
          rawRequest('POST', '/calls/stats', { ...s.basic(), 'content-type': 'application/json', 'content-length': '1000' }) + '{"project_',
        )
      slow.push(c)
    }
    const t0 = Date.now()
    // Drip a byte every second into half of the header-senders: uWS's timeout is on a whole request, not per byte.
    const drip = setInterval(() => slow.filter((_, i) => i % 4 === 1).forEach((c) => c.closed || c.write('X-More: 1\r\n')), 1000)
    t.teardown(() => clearInterval(drip))
    const during = Math.max(await healthMs(), await healthMs(), await healthMs())
    t.ok(during < 2000, `/health answers in ${Math.round(during)} ms with 100 slow connections open`)
    slowChecked()
    const closed = await Promise.all(slow.map((c) => c.closedWithin(IDLE_CLOSE_BOUND_MS)))
    clearInterval(drip)
    t.equal(closed.filter(Boolean).length, slow.length, `all 100 slow connections closed by the server within ${Date.now() - t0} ms`)
    t.comment(`slow connections closed after ${Date.now() - t0} ms`)
    t.equal((await stats()).inFlight, 1, 'the partial uploads are no longer in flight (only this stats request)')
  })

  t.test('2,000 idle connections: bounded memory, others served, closed by the idle timeout', async (t) => {
    await slowOpen
    const before = await stats()
    const idle: net.Socket[] = []
    const u = new URL(s.url)
    await Promise.all(
      Array.from(
        { length: 2000 },
        () =>
          new Promise<void>((resolve) => {
            const c = net.connect(Number(u.port), u.hostname, () => resolve())
            c.on('error', () => resolve())
            idle.push(c)
          }),
      ),
    )
    t.teardown(() => idle.forEach((c) => c.destroy()))
    const during = await stats()
    const ms = await healthMs()
    const growth = during.rss - before.rss
    t.comment(
      `2,000 idle connections: RSS ${Math.round(before.rss / 2 ** 20)} → ${Math.round(during.rss / 2 ** 20)} MiB; /health in ${Math.round(ms)} ms`,
    )
    t.ok(growth < 64 * 2 ** 20, `RSS grew by ${Math.round(growth / 2 ** 20)} MiB (bound 64 MiB)`)
    t.ok(ms < 2000, 'a new client is served')
    const t0 = Date.now()
    const closed = await Promise.all(
      idle.map(
        (c) =>
          new Promise<boolean>((r) =>
            c.destroyed || c.closed ? r(true) : (c.once('close', () => r(true)), setTimeout(() => r(false), IDLE_CLOSE_BOUND_MS)),
          ),
      ),
    )
    t.equal(closed.filter(Boolean).length, 2000, `the server closed all 2,000 within ${Date.now() - t0} ms`)
  })
})

t.test('a client that never reads a streamed answer: bounded memory, others served', async (t) => {
  // A 16 MB table streamed as JSON lines to a client that stops reading.
  const rows = Array.from({ length: 4000 }, (_, i) => ({ i, pad: 'p'.repeat(4000) }))
  const created = await fetch(s.url + '/table/create', {
    method: 'POST',
    headers: { ...s.basic(), 'content-type': 'application/json' },
    body: JSON.stringify({ table: { project_id: 'acme/stream', rows } }),
  })
  t.equal(created.status, 200)
  const { digest } = (await created.json()) as { digest: string }
  const before = await stats()
  const stuck: RawConn[] = []
  for (let i = 0; i < 4; i++) {
    const c = await RawConn.open(s.url)
    c.sock.pause()
    c.write(
      rawRequest(
        'POST',
        '/table/query_stream',
        { ...s.basic(), 'content-type': 'application/json' },
        JSON.stringify({ project_id: 'acme/stream', digest }),
      ),
    )
    stuck.push(c)
  }
  await new Promise((r) => setTimeout(r, 2000))
  const during = await stats()
  const ms = await healthMs()
  const growth = during.rss - before.rss
  t.comment(
    `4 stalled 16 MB streams: RSS ${Math.round(before.rss / 2 ** 20)} → ${Math.round(during.rss / 2 ** 20)} MiB; /health in ${Math.round(ms)} ms`,
  )
  // /table/query_stream reads the whole result before streaming it, so each stalled reader holds its result;
  // what the transport adds is bounded by the socket buffers (it waits for the socket to drain).
  t.ok(growth < 4 * 32 * 2 ** 20, `RSS grew by ${Math.round(growth / 2 ** 20)} MiB for 4 × 16 MB unread answers (bound 128 MiB)`)
  t.ok(ms < 2000, 'other clients are served')
  // Once the readers go, their streams are abandoned and nothing stays in flight.
  stuck.forEach((c) => c.destroy())
  for (let i = 0; i < 50 && (await stats()).inFlight > 1; i++) await new Promise((r) => setTimeout(r, 100))
  t.equal((await stats()).inFlight, 1, 'the abandoned streams are no longer in flight')
})
