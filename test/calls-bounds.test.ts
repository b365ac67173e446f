import t from 'tap'
import { randomBytes } from 'node:crypto'
import { statSync } from 'node:fs'
import { rm } from 'node:fs/promises'
import path from 'node:path'
import { startServer, tempDir, type TestServer } from './helpers/server.js'

// No chat in this file: its servers start without the built-in model (about 1 s of CPU less per start).
process.env.WEFT_MODEL ??= 'none'

const hex = (n: number) => randomBytes(n / 2).toString('hex')
const P = 'acme/bounds'

async function fill(s: TestServer, n: number): Promise<void> {
  for (let done = 0; done < n; done += 1000) {
    const batch = Array.from({ length: Math.min(1000, n - done) }, (_, i) => ({
      mode: 'start',
      req: {
        start: {
          project_id: P,
          id: hex(16),
          trace_id: hex(32),
          op_name: 'op',
          started_at: new Date(Date.UTC(2026, 0, 1) + (done + i) * 1000).toISOString(),
          attributes: {},
          inputs: { i: done + i },
        },
      },
    }))
    const r = await fetch(s.url + '/call/upsert_batch', {
      method: 'POST',
      headers: { ...s.basic(), 'content-type': 'application/json' },
      body: JSON.stringify({ batch }),
    })
    if (r.status !== 200) throw new Error(await r.text())
  }
}

const post = (s: TestServer, path: string, body: unknown) =>
  fetch(s.url + path, { method: 'POST', headers: { ...s.basic(), 'content-type': 'application/json' }, body: JSON.stringify(body) })

t.test('stream_query streams past DuckDB chunk boundaries; /calls/query is capped', async (t) => {
  const s = await startServer({ env: { WEFT_MAX_QUERY_ROWS: '4000' } })
  t.teardown(() => s.stop())
  await fill(s, 5000)
  const r = await post(s, '/calls/stream_query', {
    project_id: P,
    sort_by: [{ field: 'started_at', direction: 'desc' }],
    columns: ['inputs'],
  })
  t.equal(r.status, 200)
  t.equal(r.headers.get('content-type'), 'application/jsonl')
  const lines = (await r.text())
    .split('\n')
    .filter(Boolean)
    .map((l) => JSON.parse(l))
  t.equal(lines.length, 5000, 'every call, across several chunks')
  t.ok(
    lines.every((c, i) => c.inputs.i === 4999 - i),
    'in order across chunks',
  )
  const capped = await post(s, '/calls/query', { project_id: P })
  t.equal(capped.status, 413)
  t.match(await capped.json(), { reason: /More than 4000 calls match/ })
  const paged = await post(s, '/calls/query', { project_id: P, limit: 100, offset: 4950 })
  t.equal(paged.status, 200)
  t.equal(((await paged.json()) as { calls: unknown[] }).calls.length, 50)
  // A client that stops reading half way does not hurt the server.
  const ctl = new AbortController()
  const half = await fetch(s.url + '/calls/stream_query', {
    method: 'POST',
    headers: { ...s.basic(), 'content-type': 'application/json' },
    body: JSON.stringify({ project_id: P }),
    signal: ctl.signal,
  })
  const reader = half.body!.getReader()
  await reader.read()
  ctl.abort()
  t.equal((await fetch(s.url + '/health')).status, 200)
  t.equal((await post(s, '/calls/query_stats', { project_id: P })).status, 200)
})

t.test('a query past the timeout is stopped with 504, and the server goes on', async (t) => {
  const s = await startServer({ env: { WEFT_QUERY_TIMEOUT_MS: '1' } })
  t.teardown(() => s.stop())
  await fill(s, 20000)
  const sort = [{ field: 'inputs.i', direction: 'desc' }]
  const r = await post(s, '/calls/stream_query', { project_id: P, sort_by: sort })
  t.equal(r.status, 504)
  t.match(await r.json(), { reason: /longer than 1 ms/ })
  const q = await post(s, '/calls/query_stats', {
    project_id: P,
    query: { $expr: { $contains: { input: { $getField: 'inputs.i' }, substr: { $literal: '9' } } } },
  })
  t.equal(q.status, 504)
  t.equal((await fetch(s.url + '/health')).status, 200)
})

t.test('an ingest worker that dies fails only its own request; the pool recovers and nothing is written', async (t) => {
  // The failpoint ends the worker thread that reads the marked body, as a crash would.
  const s = await startServer({ env: { WEFT_INGEST_WORKERS: '1', WEFT_FAILPOINTS: 'ingest-worker-exit' } })
  t.teardown(() => s.stop())
  const doomed = Array.from({ length: 100 }, (_, i) => ({
    mode: 'start',
    req: {
      start: {
        project_id: P,
        id: hex(16),
        trace_id: hex(32),
        op_name: 'doomed',
        started_at: '2026-01-01T00:00:00Z',
        attributes: {},
        inputs: { i, note: i === 50 ? 'weft-failpoint:ingest-worker-exit' : '' },
      },
    },
  }))
  const died = await post(s, '/call/upsert_batch', { batch: doomed })
  t.equal(died.status, 503, 'the request whose worker died gets 503')
  t.match(await died.json(), { reason: /ingest worker failed.*nothing was written/ })
  t.ok(died.headers.get('retry-after'))
  const ok = await post(s, '/call/start', {
    start: { project_id: P, op_name: 'small', started_at: '2026-01-01T00:00:01Z', attributes: {}, inputs: {} },
  })
  t.equal(ok.status, 200, 'the next request is served by a fresh worker')
  const calls = (await (await post(s, '/calls/query', { project_id: P })).json()) as { calls: { op_name: string }[] }
  t.same(
    calls.calls.map((c) => c.op_name),
    ['small'],
    'nothing of the failed batch was stored',
  )
  const stats = (await (await fetch(s.url + '/admin/stats', { headers: s.basic() })).json()) as { ingest: { threads: number } }
  t.equal(stats.ingest.threads, 1, 'the pool is back to its size')
})

t.test('a logged batch that cannot reach the tail stops acknowledgements; a restart brings every acknowledged call back', async (t) => {
  const dir = tempDir()
  t.teardown(() => rm(dir, { recursive: true, force: true }))
  // Every ingest asks for a flush: one must not drop the log of a batch that missed the tail.
  const s = await startServer({ dataDir: dir, env: { WEFT_FAILPOINTS: 'tail-insert', WEFT_CALLS_FLUSH_ROWS: '1' } })
  t.teardown(() => s.stop())
  const start = (op: string, note = '') => ({
    start: {
      project_id: P,
      id: hex(16),
      trace_id: hex(32),
      op_name: op,
      started_at: '2026-01-01T00:00:00Z',
      attributes: {},
      inputs: { note },
    },
  })
  t.equal((await post(s, '/call/start', start('before'))).status, 200)
  // Acknowledged once logged; the failpoint then fails its insert into the tail, as a DuckDB error would.
  t.equal((await post(s, '/call/start', start('marked', 'weft-failpoint:tail-insert'))).status, 200)
  const stats = async () =>
    (await (await fetch(s.url + '/admin/stats', { headers: s.basic() })).json()) as { calls: { tail_failure: string | null } }
  for (let i = 0; i < 50 && !(await stats()).calls.tail_failure; i++) await new Promise((r) => setTimeout(r, 20))
  t.match((await stats()).calls.tail_failure, /failpoint/, '/admin/stats names the failure')
  const refused = await post(s, '/call/start', start('after'))
  t.equal(refused.status, 503, 'nothing more is acknowledged')
  t.match(await refused.json(), { reason: /restart the server/ })
  t.equal(
    (await post(s, '/calls/query_stats', { project_id: P, query: { $expr: { $eq: [{ $getField: 'op_name' }, { $literal: 'before' }] } } }))
      .status,
    200,
    'reads still answer',
  )
  await s.stop()
  const ops = async (srv: TestServer) =>
    ((await (await post(srv, '/calls/query', { project_id: P, columns: ['op_name'] })).json()) as { calls: { op_name: string }[] }).calls
      .map((c) => c.op_name)
      .sort()
  // Still unreadable at the next start: the server starts anyway, the record set aside (and still in the log).
  const stuck = await startServer({ dataDir: dir, key: s.key, env: { WEFT_FAILPOINTS: 'tail-insert' } })
  t.same(await ops(stuck), ['before'])
  t.ok(statSync(path.join(dir, 'calls', 'quarantine.log')).size > 0, 'the record is kept in calls/quarantine.log')
  await stuck.stop()
  const again = await startServer({ dataDir: dir, key: s.key })
  t.teardown(() => again.stop())
  t.same(await ops(again), ['before', 'marked'], 'both acknowledged calls are back; the refused one was never stored')
})

t.test('a tail insert out of memory is retried, batch by batch: nothing is refused or lost', async (t) => {
  // The first three inserts fail as DuckDB does past --memory-limit: the group, then its first batch twice.
  const s = await startServer({ env: { WEFT_FAILPOINTS: 'tail-oom:3' } })
  t.teardown(() => s.stop())
  const ids = Array.from({ length: 4 }, () => hex(16))
  const sent = await Promise.all(
    ids.map((id) =>
      post(s, '/call/start', {
        start: { project_id: P, id, trace_id: hex(32), op_name: 'oom', started_at: '2026-01-01T00:00:00Z', attributes: {}, inputs: {} },
      }),
    ),
  )
  t.same(
    sent.map((r) => r.status),
    [200, 200, 200, 200],
  )
  const got = (await (await post(s, '/calls/query', { project_id: P, columns: ['id'] })).json()) as { calls: { id: string }[] }
  t.same(got.calls.map((c) => c.id).sort(), [...ids].sort(), 'every acknowledged call is readable')
  const stats = (await (await fetch(s.url + '/admin/stats', { headers: s.basic() })).json()) as {
    calls: { tail_failure: string | null; tail_oom_retries: number; timings_ms: Record<string, { count: number; max_ms: number }> }
    rollups: { timings_ms: Record<string, { count: number; max_ms: number }> }
  }
  t.equal(stats.calls.tail_failure, null, 'the store did not stop')
  t.equal(stats.calls.tail_oom_retries, 2, 'two retries after the group and the first single attempt failed')
  // Where reads' time goes (/admin/stats calls.timings_ms): the query above, and the inserts it may have waited for.
  const timed = stats.calls.timings_ms
  t.ok(timed.read_queries!.count >= 1 && timed.tail_inserts!.count >= 3, 'the read and the tail inserts (failed ones too) are timed')
  await fetch(s.url + '/admin/stats?reset=true', { headers: s.basic() })
  const after = (await (await fetch(s.url + '/admin/stats', { headers: s.basic() })).json()) as typeof stats
  t.same(
    Object.entries(after.calls.timings_ms).map(([k, d]) => [k, d.count]),
    [
      ['read_visibility_waits', 0],
      ['read_queries', 0],
      ['tail_inserts', 0],
      ['tail_rebuilds', 0],
      ['flushes', 0],
      ['compaction_folds', 0],
      ['compaction_swaps', 0],
    ],
    'a reset restarts every sum',
  )
  // The rollups' upkeep and their commit gate (src/stats/rollups.ts timings, commit-gate.ts waits), reset the same way.
  t.same(
    Object.entries(after.rollups.timings_ms).map(([k, d]) => [k, d.count]),
    [
      ['merges', 0],
      ['inserts', 0],
      ['commits', 0],
      ['folds', 0],
      ['checkpoints', 0],
      ['gate_read_waits', 0],
      ['gate_commit_waits', 0],
    ],
    'the rollups timings too',
  )
  t.equal(
    (
      await post(s, '/call/start', {
        start: {
          project_id: P,
          id: hex(16),
          trace_id: hex(32),
          op_name: 'after',
          started_at: '2026-01-01T00:00:00Z',
          attributes: {},
          inputs: {},
        },
      })
    ).status,
    200,
    'still acknowledging',
  )
})

t.test('past the ingest queue bound the answer is 503, and every acknowledged call is stored', async (t) => {
  const s = await startServer({ env: { WEFT_INGEST_WORKERS: '1', WEFT_INGEST_QUEUE: '2' } })
  t.teardown(() => s.stop())
  const batch = (tag: number) =>
    Array.from({ length: 500 }, (_, i) => ({
      mode: 'start',
      req: {
        start: {
          project_id: P,
          id: hex(16),
          trace_id: hex(32),
          op_name: `q${tag}`,
          started_at: '2026-01-01T00:00:00Z',
          attributes: {},
          inputs: { i, pad: 'y'.repeat(500) },
        },
      },
    }))
  const bodies = Array.from({ length: 24 }, (_, k) => batch(k))
  const answers = await Promise.all(bodies.map((b) => post(s, '/call/upsert_batch', { batch: b })))
  const statuses = answers.map((r) => r.status)
  t.ok(
    statuses.every((x) => x === 200 || x === 503),
    `only 200 or 503: ${statuses}`,
  )
  t.ok(statuses.includes(503), 'some requests were refused')
  t.ok(statuses.includes(200), 'some were served')
  for (const r of answers) if (r.status === 503) t.match(await r.json(), { reason: /Too many ingest requests/ })
  const acked = new Set(answers.flatMap((r, k) => (r.status === 200 ? [`q${k}`] : [])))
  const r = await post(s, '/calls/stream_query', { project_id: P, columns: ['op_name'] })
  const stored = (await r.text())
    .split('\n')
    .filter(Boolean)
    .map((l) => JSON.parse(l).op_name as string)
  const counts = new Map<string, number>()
  for (const op of stored) counts.set(op, (counts.get(op) ?? 0) + 1)
  t.same([...counts.keys()].sort(), [...acked].sort(), 'exactly the acknowledged batches are stored')
  t.ok(
    [...counts.values()].every((n) => n === 500),
    'each whole',
  )
})
