import t from 'tap'
import { tableFromIPC } from 'apache-arrow'
import { startServer, type TestServer } from './helpers/server.js'
import net from 'node:net'
import { once } from 'node:events'
import { rawRequest } from './helpers/raw-http.js'

/**
 * A streamed answer whose next chunk is ready as soon as the socket drains (an export through the reader pool, whose
 * batches are queued ahead) read by a client slower than the server: backpressure at nearly every write. With
 * uWebSockets.js 20.30 a drain handler registered from inside the last one was lost (src/http/uws.ts, hookWritable)
 * and such answers stopped mid-way; each must arrive whole.
 */
process.env.WEFT_MODEL ??= 'none'
const PROJECT = 'acme/backpressure'
const CALLS = 24_000
const EXPORTS = 3

let s: TestServer
t.before(async () => {
  s = await startServer({ env: { WEFT_READERS: '2', WEFT_CALLS_FLUSH_ROWS: '4000' } })
})
t.teardown(() => s.stop())

function batch(from: number, n: number): string {
  const items = Array.from({ length: n }, (_, k) => {
    const i = from + k
    const started = new Date(Date.UTC(2026, 0, 1) + i * 1000).toISOString()
    return {
      mode: 'start',
      req: {
        start: {
          project_id: PROJECT,
          // UUIDv7-shaped, in start-time order: the pool's windows follow the ids.
          id: `${i.toString(16).padStart(8, '0')}-0000-7000-8000-000000000000`,
          trace_id: i.toString(16).padStart(32, '0'),
          op_name: 'op',
          started_at: started,
          attributes: {},
          inputs: { text: `${i} `.repeat(800).slice(0, 3000) },
        },
      },
    }
  })
  return JSON.stringify({ batch: items })
}

/** A chunked HTTP/1.1 response's status and body, from all of its bytes. */
function parseChunked(all: Buffer): { status: number; body: Buffer } {
  const head = all.indexOf('\r\n\r\n')
  const status = Number(all.subarray(0, head).toString('latin1').split(' ')[1])
  const parts: Buffer[] = []
  for (let at = head + 4; ;) {
    const eol = all.indexOf('\r\n', at)
    const size = parseInt(all.subarray(at, eol).toString('latin1'), 16)
    if (!size) break
    parts.push(all.subarray(eol + 2, eol + 2 + size))
    at = eol + 2 + size + 2
  }
  return { status, body: Buffer.concat(parts) }
}

/** The Arrow export read with a pause every 64 KiB: its body, or null if it stopped before its end within 60 s. */
async function slowExport(): Promise<Buffer | null> {
  const sock = net.connect(Number(new URL(s.url).port), '127.0.0.1')
  await once(sock, 'connect')
  const body = JSON.stringify({ project_id: PROJECT })
  const headers = { ...s.basic(), 'content-type': 'application/json', accept: 'application/vnd.apache.arrow.stream' }
  sock.write(rawRequest('POST', '/calls/stream_query', headers, body))
  const chunks: Buffer[] = []
  let seen = 0
  const ended = new Promise<boolean>((resolve) => {
    const timer = setTimeout(() => resolve(false), 60_000)
    sock.on('data', (d: Buffer) => {
      chunks.push(d)
      const tail = Buffer.concat(chunks.slice(-2)).subarray(-5).toString('latin1')
      if (tail === '0\r\n\r\n') {
        clearTimeout(timer)
        resolve(true)
      }
      // The server's writes outrun a client that pauses 2 ms every 64 KiB.
      if ((seen += d.length) >= 64 * 1024) {
        seen = 0
        sock.pause()
        setTimeout(() => sock.resume(), 2)
      }
    })
    sock.on('close', () => resolve(false))
  })
  const whole = await ended
  sock.destroy()
  if (!whole) return null
  const r = parseChunked(Buffer.concat(chunks))
  return r.status === 200 ? r.body : null
}

t.test('pooled Arrow exports read by a slow client arrive whole', async (t) => {
  for (let i = 0; i < CALLS; i += 1000) {
    const r = await fetch(s.url + '/call/upsert_batch', {
      method: 'POST',
      headers: { ...s.basic(), 'content-type': 'application/json' },
      body: batch(i, 1000),
    })
    const errors = ((await r.json()) as { res: { error?: string }[] }).res.filter((x) => x.error)
    t.same([r.status, errors], [200, []], `batch ${i / 1000} acknowledged`)
  }
  // The pool reads segments: wait for the flushes (every 4,000 parts).
  const deadline = Date.now() + 30_000
  for (;;) {
    const st = (await (await fetch(s.url + '/admin/stats', { headers: s.basic() })).json()) as any
    if (st.calls.segments >= 4 || Date.now() > deadline) break
    await new Promise((r) => setTimeout(r, 200))
  }
  for (let i = 0; i < EXPORTS; i++) {
    const t0 = Date.now()
    const bytes = await slowExport()
    t.ok(bytes, `export ${i + 1} arrived whole in ${Date.now() - t0} ms`)
    if (bytes) t.equal(tableFromIPC(bytes).numRows, CALLS, `export ${i + 1}: every call`)
  }
  const st = (await (await fetch(s.url + '/admin/stats', { headers: s.basic() })).json()) as any
  t.ok(st.calls.readers?.reads >= EXPORTS, `read by the reader pool (${st.calls.readers?.reads} reads)`)
})
