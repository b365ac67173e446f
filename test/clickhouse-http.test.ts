// The HTTP executor (src/clickhouse/http-executor.ts) against a recorded exchange: a small HTTP
// server here stands where ClickHouse would, records what @clickhouse/client sends and answers as
// ClickHouse does (JSONEachRow bodies, its error format). Checks what reaches the wire: SQL with
// `{name:Type}` placeholders, values as `param_` URL parameters, settings, rows streamed.
import http from 'node:http'
import type { AddressInfo } from 'node:net'
import t from 'tap'
import { endPart, startPart } from '../src/calls/ingest/parts.js'
import { ClickHouseCalls } from '../src/clickhouse/calls.js'
import { HttpExecutor } from '../src/clickhouse/http-executor.js'
import { MIGRATIONS } from '../src/clickhouse/migrations.js'

interface Recorded {
  method: string
  url: URL
  body: string
}

const HOSTILE = "x'); DROP TABLE weft.call_parts; --"

/** What ClickHouse would answer to each statement this test sends. */
type Answer = (r: Recorded, res: http.ServerResponse) => unknown

async function fakeClickHouse(answer: Answer) {
  const seen: Recorded[] = []
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = []
    req.on('data', (c: Buffer) => chunks.push(c))
    req.on('end', () => {
      const r = { method: req.method!, url: new URL(req.url!, 'http://localhost'), body: Buffer.concat(chunks).toString('utf8') }
      seen.push(r)
      res.setHeader('X-ClickHouse-Server-Display-Name', 'fake')
      void answer(r, res)
    })
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`
  return { url, seen, close: () => new Promise<void>((resolve) => server.close(() => resolve())) }
}

/** The statement of a request: the body for queries and commands, the `query` parameter for inserts. */
const statement = (r: Recorded) => r.url.searchParams.get('query') ?? r.body

t.test('queries: placeholders in the SQL, values and settings as URL parameters, rows streamed', async (t) => {
  let release!: () => void
  const released = new Promise<void>((resolve) => (release = resolve))
  const ch = await fakeClickHouse(async (r, res) => {
    if (/numbers/.test(r.body)) {
      res.writeHead(200, { 'Content-Type': 'application/x-ndjson', 'X-ClickHouse-Format': 'JSONEachRow' })
      res.write(Array.from({ length: 1000 }, (_, i) => JSON.stringify({ n: String(i) }) + '\n').join(''))
      // The rest only once the client has handed the first rows on: proof they were not buffered whole.
      await released
      res.end(Array.from({ length: 1000 }, (_, i) => JSON.stringify({ n: String(1000 + i) }) + '\n').join(''))
    } else if (/^SELECT \{/.test(r.body)) {
      res.writeHead(200, { 'Content-Type': 'application/x-ndjson' })
      // ClickHouse reads a String parameter in its text escaping (backslash before ' and \\).
      res.end(JSON.stringify({ a: r.url.searchParams.get('param_a')!.replace(/\\(.)/g, '$1') }) + '\n')
    } else {
      res.writeHead(404, { 'X-ClickHouse-Exception-Code': '60' })
      res.end('Code: 60. DB::Exception: Table weft.nope does not exist. (UNKNOWN_TABLE) (version 24.8.1.1)\n')
    }
  })
  t.teardown(ch.close)
  const exec = new HttpExecutor({ url: ch.url, database: 'weft', username: 'u', password: 'pw', settings: { max_execution_time: 7 } })
  t.teardown(() => exec.close())

  const rows = await exec.query('SELECT {a:String} AS a', { a: HOSTILE }, { max_threads: 2 })
  t.same(rows, [{ a: HOSTILE }], 'the value came back as the server got it')
  const q = ch.seen[0]!
  t.equal(q.method, 'POST')
  t.match(q.body, /^SELECT \{a:String\} AS a/, 'the SQL keeps the placeholder')
  t.notMatch(q.body, /DROP TABLE/, 'the value is not in the SQL text')
  t.equal(q.url.searchParams.get('param_a'), HOSTILE.replace("'", "\\'"), 'the value is a param_ URL parameter, escaped')
  t.equal(q.url.searchParams.get('database'), 'weft')
  t.equal(q.url.searchParams.get('max_threads'), '2', 'per-statement setting')
  t.equal(q.url.searchParams.get('max_execution_time'), '7', 'executor-wide setting')
  t.equal(q.url.searchParams.get('output_format_json_quote_64bit_integers'), '1', 'base settings on every statement')
  t.equal(q.url.searchParams.get('session_timezone'), 'UTC')
  t.match(q.body, /FORMAT JSONEachRow/)

  let batches = 0
  let got = 0
  for await (const b of exec.stream('SELECT number AS n FROM numbers(2000)')) {
    if (batches++ === 0) {
      t.ok(b.length > 0 && b.length <= 1000, `a first batch (${b.length} rows) before the response ended`)
      release()
    }
    got += b.length
  }
  t.equal(got, 2000, 'every row, in batches')
  t.ok(batches >= 2, `${batches} batches`)

  await t.rejects(exec.query('SELECT * FROM weft.nope'), /UNKNOWN_TABLE|does not exist/, "ClickHouse's error reaches the caller")
})

t.test('the calls backend over HTTP: inserts with durability settings, queries bound', async (t) => {
  const ch = await fakeClickHouse((r, res) => {
    const sql = statement(r)
    res.writeHead(200, { 'Content-Type': 'application/x-ndjson' })
    // Every migration recorded already, as on a server that has run this version before.
    if (/SELECT DISTINCT version FROM/.test(sql))
      return res.end(MIGRATIONS.map((m) => JSON.stringify({ version: m.version }) + '\n').join(''))
    if (/^SELECT m.id AS id/.test(sql)) {
      // A row as ClickHouse answers the calls query (64-bit integers quoted).
      return res.end(
        JSON.stringify({
          id: '00000000000000aa',
          project_id: 'e/p',
          op_name: 'op',
          display_name: null,
          trace_id: 'b'.repeat(32),
          parent_id: null,
          thread_id: null,
          turn_id: null,
          started_us: '1767225600000001',
          ended_us: '1767225601000001',
          attributes: '{}',
          inputs: '{"q":"hi"}',
          output: '"ok"',
          summary: '{}',
          exception: null,
          user_id: 'u1',
          run_id: null,
          run_step: null,
          run_step_end: '3',
          d_status: 'success',
          d_latency: '1000',
          d_trace_name: 'op',
        }) + '\n',
      )
    }
    res.end()
  })
  t.teardown(ch.close)
  const exec = new HttpExecutor({ url: ch.url })
  t.teardown(() => exec.close())
  const durable = { insert_quorum: 2, insert_quorum_parallel: 0, async_insert: 1, wait_for_async_insert: 1 }
  const calls = await ClickHouseCalls.open(exec, { database: 'weft', insertSettings: durable })
  const ddl = ch.seen.map(statement)
  t.match(ddl[0]!, /^CREATE DATABASE IF NOT EXISTS `weft`/)
  t.match(ddl[1]!, /CREATE TABLE IF NOT EXISTS `weft`\.`weft_migrations`/)
  t.equal(ddl.length, 4, 'migrations already recorded: no DDL past the bookkeeping, then the settings checked')
  t.match(ddl[3]!, /^SELECT 1/)
  for (const [k, v] of Object.entries(durable))
    t.equal(ch.seen[3]!.url.searchParams.get(k), String(v), `the insert settings checked at start: ${k}`)

  const start = startPart(
    {
      project_id: 'e/p',
      id: '00000000000000aa',
      trace_id: 'b'.repeat(32),
      op_name: 'op',
      started_at: '2026-01-01T00:00:00.000001Z',
      attributes: {},
      inputs: { q: HOSTILE },
    },
    'u1',
  )
  const end = endPart({
    project_id: 'e/p',
    id: '00000000000000aa',
    ended_at: '2026-01-01T00:00:01.000001Z',
    output: 'ok',
    summary: { usage: { m: { total_tokens: 5 } } },
  })
  await calls.ingest([end, start])
  const ins = ch.seen.at(-1)!
  t.match(ins.url.searchParams.get('query'), /^INSERT INTO weft\.call_parts FORMAT JSONEachRow/)
  for (const [k, v] of Object.entries(durable)) t.equal(ins.url.searchParams.get(k), String(v), `insert setting ${k}`)
  const rows = ins.body
    .trim()
    .split('\n')
    .map((l) => JSON.parse(l))
  t.equal(rows.length, 2)
  t.same(
    rows.map((r) => r.kind),
    ['end', 'start'],
  )
  t.ok(BigInt(rows[0].seq) < BigInt(rows[1].seq), 'later parts get a later seq')
  t.equal(rows[1].started_at, '2026-01-01 00:00:00.000001', 'microseconds kept')
  t.same(JSON.parse(rows[1].inputs), { q: HOSTILE })
  t.same(rows[0].usage, [
    {
      model: 'm',
      requests: null,
      prompt_tokens: null,
      input_tokens: null,
      completion_tokens: null,
      output_tokens: null,
      total_tokens: 5,
      cache_read_input_tokens: null,
      cache_creation_input_tokens: null,
    },
  ])

  const found = await calls.query('e/p', { query: { $expr: { $eq: [{ $getField: 'inputs.q' }, { $literal: HOSTILE }] } }, limit: 5 })
  const q = ch.seen.at(-1)!
  t.notMatch(q.body, /DROP TABLE/, 'the literal is not in the SQL')
  t.ok([...q.url.searchParams.values()].includes(HOSTILE.replace("'", "\\'")), 'it is a bound parameter')
  t.equal(q.url.searchParams.get('param_p1'), 'e/p', 'the project too')
  t.same(found, [
    {
      id: '00000000000000aa',
      project_id: 'e/p',
      op_name: 'op',
      display_name: null,
      trace_id: 'b'.repeat(32),
      parent_id: null,
      thread_id: null,
      turn_id: null,
      started_at: '2026-01-01T00:00:00.000001Z',
      ended_at: '2026-01-01T00:00:01.000001Z',
      attributes: {},
      inputs: { q: 'hi' },
      output: 'ok',
      exception: null,
      summary: { weave: { status: 'success', trace_name: 'op', latency_ms: 1000 } },
      svc_user_id: 'u1',
      svc_run_id: null,
      svc_run_step: null,
      svc_run_step_end: 3,
      deleted_at: null,
    },
  ])
})
