import t from 'tap'
import { randomBytes } from 'node:crypto'
import { startServer, type TestServer } from './helpers/server.js'

// No chat here: the server starts without the built-in model.
process.env.WEFT_MODEL ??= 'none'

const P = 'acme/tail-memory'
const MiB = 2 ** 20
const BATCHES = 24
const PER_BATCH = 100
/** Long enough that DuckDB keeps each in its overflow-string blocks, as the soak's large inputs are kept. */
const INPUT_CHARS = 8000

const post = (s: TestServer, path: string, body: unknown) =>
  fetch(s.url + path, { method: 'POST', headers: { ...s.basic(), 'content-type': 'application/json' }, body: JSON.stringify(body) })

t.test('flushed parts leave the tail table whole, even while readers keep transactions open', async (t) => {
  // A flush per batch: each takes its parts out of the in-memory tail while the readers below are running.
  const s = await startServer({ env: { WEFT_CALLS_FLUSH_ROWS: String(PER_BATCH), WEFT_CALLS_FLUSH_INTERVAL_MS: '0' } })
  t.teardown(() => s.stop())
  let reading = true
  // Each read scans the tail's long strings (a condition on them); before, its operator did not exist, so every read
  // was a 400 that held no transaction. Reads are counted, and must have answered 200.
  const answered: number[] = []
  const reader = async () => {
    while (reading) {
      const r = await post(s, '/calls/query_stats', {
        project_id: P,
        query: { $expr: { $contains: { input: { $getField: 'inputs.text' }, substr: { $literal: 'zz' } } } },
      })
      await r.text()
      answered.push(r.status)
    }
  }
  const readers = [reader(), reader(), reader()]
  for (let b = 0; b < BATCHES; b++) {
    const batch = Array.from({ length: PER_BATCH }, () => ({
      mode: 'start',
      req: {
        start: {
          project_id: P,
          id: randomBytes(8).toString('hex'),
          trace_id: randomBytes(16).toString('hex'),
          op_name: 'op',
          started_at: '2026-01-01T00:00:00Z',
          attributes: {},
          inputs: { text: randomBytes(INPUT_CHARS / 2).toString('hex') },
        },
      },
    }))
    t.equal((await post(s, '/call/upsert_batch', { batch })).status, 200)
  }
  reading = false
  await Promise.all(readers)
  t.ok(answered.length >= 3 && answered.every((x) => x === 200), `${answered.length} reads while ingesting, all answered 200`)
  const count = (await (await post(s, '/calls/query_stats', { project_id: P })).json()) as { count: number }
  t.equal(count.count, BATCHES * PER_BATCH, 'every call is there')
  for (let i = 0; i < 100; i++) {
    const st = (await (await fetch(s.url + '/admin/stats', { headers: s.basic() })).json()) as any
    if (st.calls.tail_parts === 0) break
    await new Promise((r) => setTimeout(r, 50))
  }
  const st = (await (await fetch(s.url + '/admin/stats', { headers: s.basic() })).json()) as any
  const tags = st.memory.duckdb.calls.by_tag as Record<string, { in_use_bytes: number }>
  t.comment(JSON.stringify(Object.fromEntries(Object.entries(tags).map(([k, v]) => [k, (v.in_use_bytes / MiB).toFixed(1)]))))
  // DuckDB keeps strings this long in overflow blocks: the tail's. ~19 MB were sent; the tail holds one batch
  // (~0.8 MB) between flushes.
  const held = tags.OVERFLOW_STRINGS?.in_use_bytes ?? 0
  const sent = (BATCHES * PER_BATCH * INPUT_CHARS) / MiB
  t.ok(held / MiB < sent / 4, `long strings held: ${(held / MiB).toFixed(1)} MiB after ${BATCHES} flushes of ${sent.toFixed(0)} MiB`)
})
