import t, { type Test } from 'tap'
import { randomBytes } from 'node:crypto'
import { rm } from 'node:fs/promises'
import { tableFromIPC, type Table, type Vector } from 'apache-arrow'
import { postJson, startServer, streamQuery, tempDir, type TestServer } from './helpers/server.js'
import { endPart, openAnalytics, startPart } from '../src/index.js'

const ARROW = 'application/vnd.apache.arrow.stream'
const hex = (n: number) => randomBytes(n / 2).toString('hex')
const JSON_FIELDS = new Set(['attributes', 'inputs', 'output', 'summary'])
const TIME_FIELDS = new Set(['started_at', 'ended_at', 'deleted_at'])

/** Microseconds since the epoch as the JSON answer writes them (ISO, six decimals, Z). */
function isoOfMicros(us: bigint): string {
  const whole = new Date(Number(us / 1_000_000n) * 1000).toISOString().slice(0, 19)
  return `${whole}.${String(us % 1_000_000n).padStart(6, '0')}Z`
}

/** A column's values (null where not valid). */
function values(col: Vector): unknown[] {
  return Array.from({ length: col.length }, (_, i) => col.get(i))
}

/** A timestamp column's raw microseconds, read from its buffers. */
function micros(col: Vector): (bigint | null)[] {
  const out: (bigint | null)[] = []
  for (const d of col.data) for (let i = 0; i < d.length; i++) out.push(d.getValid(i) ? (d.values as BigInt64Array)[i]! : null)
  return out
}

/** Every column and every row of an Arrow answer against the JSON answer of the same request. */
function compareCalls(t: Test, table: Table, json: Record<string, unknown>[], what: string) {
  t.equal(table.numRows, json.length, `${what}: as many rows`)
  if (json.length === 0) return
  t.same(
    table.schema.fields.map((f) => f.name),
    Object.keys(json[0]!),
    `${what}: the same columns, in order`,
  )
  let mismatches = 0
  for (const f of table.schema.fields) {
    const col = table.getChild(f.name)!
    const got = TIME_FIELDS.has(f.name) ? micros(col).map((v) => (v === null ? null : isoOfMicros(v))) : values(col)
    for (let i = 0; i < json.length; i++) {
      const want = json[i]![f.name]
      let have = got[i]
      if (JSON_FIELDS.has(f.name)) have = have === null ? null : JSON.parse(have as string)
      if (typeof have === 'bigint') have = Number(have)
      if (JSON.stringify(sortKeys(have)) !== JSON.stringify(sortKeys(want))) {
        if (mismatches++ < 5) t.fail(`${what}: row ${i} ${f.name}: ${JSON.stringify(have)} != ${JSON.stringify(want)}`)
      }
    }
  }
  t.equal(mismatches, 0, `${what}: every value equal`)
}

function sortKeys(v: unknown): unknown {
  if (Array.isArray(v)) return v.map(sortKeys)
  if (v && typeof v === 'object')
    return Object.fromEntries(
      Object.entries(v)
        .sort(([a], [b]) => (a < b ? -1 : 1))
        .map(([k, x]) => [k, sortKeys(x)]),
    )
  return v
}

async function arrowQuery(s: TestServer, path: string, body: unknown, accept = ARROW) {
  const r = await fetch(s.url + path, {
    method: 'POST',
    headers: { ...s.basic(), 'content-type': 'application/json', accept },
    body: JSON.stringify(body),
  })
  return { status: r.status, type: r.headers.get('content-type'), bytes: new Uint8Array(await r.arrayBuffer()) }
}

/** Calls of every shape: nested inputs, usage for one or two models, exceptions, unfinished, display names, children, threads. */
function makeBatch(project: string, n: number, base: number) {
  const items: unknown[] = []
  const now = Date.now()
  let root = ''
  let trace = ''
  for (let i = 0; i < n; i++) {
    const k = base + i
    const id = hex(16)
    if (k % 7 === 0 || !root) {
      root = id
      trace = hex(32)
    }
    const start = new Date(now - 20 * 3600_000 + k * 9_000 + (k % 1000) / 1000).toISOString()
    items.push({
      mode: 'start',
      req: {
        start: {
          project_id: project,
          id,
          trace_id: trace,
          parent_id: root === id ? undefined : root,
          op_name: `weave:///${project}/op/${k % 3 === 0 ? 'plan' : 'act'}:v${k % 2}`,
          display_name: k % 11 === 0 ? `step ${k} ✓` : undefined,
          thread_id: k % 5 === 0 ? `thread-${k % 4}` : undefined,
          turn_id: k % 10 === 0 ? hex(16) : undefined,
          wb_run_id: k % 8 === 0 ? `run-${k % 3}` : undefined,
          wb_run_step: k % 8 === 0 ? k * 1_000_003 : undefined,
          started_at: start,
          attributes: { k, tags: ['x', k % 2 ? 'odd' : 'even'], nested: { deep: { deeper: k * 1.5 } } },
          inputs: { n: k, text: `héllo "quoted" \n ${'z'.repeat(k % 50)}`, list: [k, null, { a: [true, false] }], empty: {} },
        },
      },
    })
    if (k % 13 === 5) continue // left running
    const usage =
      k % 4 === 0
        ? { 'gpt-4o': { prompt_tokens: k, completion_tokens: 2 * k, total_tokens: 3 * k, requests: 1 } }
        : k % 4 === 1
          ? { 'gpt-4o': { input_tokens: 10, output_tokens: 5 }, 'claude-3': { prompt_tokens: k % 17, completion_tokens: 1 } }
          : undefined
    items.push({
      mode: 'end',
      req: {
        end: {
          project_id: project,
          id,
          ended_at: new Date(Date.parse(start) + 1 + (k % 5000)).toISOString(),
          output: k % 6 === 0 ? null : k % 6 === 1 ? `answer ${k}` : k % 6 === 2 ? k : { answer: k, parts: [k, 'b'] },
          exception: k % 9 === 4 ? `ValueError: bad ${k}` : undefined,
          wb_run_step_end: k % 8 === 0 ? k * 1_000_003 + 1 : undefined,
          // Stored summaries: with usage, empty, and with a `weave` of their own that the derived fields merge into.
          summary: usage
            ? { usage }
            : k % 8 === 3
              ? { weave: { extra: 'kept' }, status_counts: { error: k % 16 === 3 ? 1 : 0, success: 1 } }
              : {},
        },
      },
    })
  }
  return items
}

t.test('Arrow IPC answers of /calls/stream_query and /calls/stats equal their JSON answers', async (t) => {
  // Small flushes: the calls are spread over segments, a compaction and the tail.
  const s = await startServer({ env: { WEFT_CALLS_FLUSH_ROWS: '1500' }, args: ['--model', 'none'] })
  t.teardown(() => s.stop())
  const project = 'acme/arrow'
  const N = 3000
  for (let b = 0; b < N; b += 500) {
    const r = await postJson(s, '/call/upsert_batch', { batch: makeBatch(project, 500, b) })
    t.equal(r.status, 200)
  }
  const some = await streamQuery(s, { project_id: project, limit: 5, offset: 100 })
  t.equal((await postJson(s, '/calls/delete', { project_id: project, call_ids: [some[0].id] })).status, 200)

  const requests: [string, Record<string, unknown>][] = [
    ['every call', { project_id: project }],
    [
      'columns and a sort',
      { project_id: project, columns: ['inputs.n', 'summary', 'output'], sort_by: [{ field: 'started_at', direction: 'desc' }] },
    ],
    [
      'filter, JSON-path sort',
      { project_id: project, filter: { op_names: [`weave:///${project}/op/plan:*`] }, sort_by: [{ field: 'inputs.n', direction: 'desc' }] },
    ],
    ['roots only, a page', { project_id: project, filter: { trace_roots_only: true }, limit: 100, offset: 7 }],
    [
      '$expr and a latency sort',
      {
        project_id: project,
        query: { $expr: { $gt: [{ $getField: 'summary.weave.latency_ms' }, { $literal: 2000 }] } },
        sort_by: [{ field: 'summary.weave.latency_ms', direction: 'asc' }],
      },
    ],
    ['no match', { project_id: project, filter: { call_ids: ['0000000000000000'] } }],
  ]
  for (const [what, body] of requests) {
    const json = await streamQuery(s, body)
    const r = await arrowQuery(s, '/calls/stream_query', body)
    t.equal(r.status, 200, `${what}: 200`)
    t.equal(r.type, ARROW)
    const table = tableFromIPC(r.bytes)
    if (what === 'every call') {
      t.equal(json.length, N - 1, 'every call but the deleted one')
      t.ok(table.batches.length > 1, `streamed as ${table.batches.length} record batches`)
      const types = Object.fromEntries(table.schema.fields.map((f) => [f.name, String(f.type)]))
      t.same(
        [types.id, types.started_at, types.svc_run_step, types.summary],
        ['Utf8', 'Timestamp<MICROSECOND, UTC>', 'Int64', 'Utf8'],
        'the documented column types',
      )
      t.ok(
        [
          'exception',
          'summary.usage',
          'summary.weave.extra',
          'display_name',
          'svc_run_step',
          'svc_run_step_end',
          'turn_id',
          'parent_id',
        ].every((f) => json.some((c) => f.split('.').reduce((v: any, k) => v?.[k], c) != null)) && json.some((c) => !c.ended_at),
        'calls with every optional field among them',
      )
    }
    compareCalls(t, table, json, what)
  }

  // Accept headers that do not ask for Arrow streams get JSON lines; options added in JS are 406 as Arrow.
  for (const accept of ['application/vnd.apache.arrow.file', 'text/csv', `${ARROW};q=0`, '*/*']) {
    const r = await arrowQuery(s, '/calls/stream_query', { project_id: project, limit: 3 }, accept)
    t.equal(r.status, 200)
    t.equal(r.type, 'application/jsonl', `Accept ${accept}: JSON lines`)
    t.equal(Buffer.from(r.bytes).toString().trim().split('\n').length, 3)
  }
  const costs = await arrowQuery(s, '/calls/stream_query', { project_id: project, include_costs: true })
  t.equal(costs.status, 406)
  t.match(JSON.parse(Buffer.from(costs.bytes).toString()), { reason: /JSON lines only/ })

  const statsReq = {
    project_id: project,
    start: new Date(Date.now() - 24 * 3600_000).toISOString(),
    end: new Date(Date.now() + 3600_000).toISOString(),
    granularity: 3600,
    call_metrics: [
      { metric: 'latency_ms', aggregations: ['sum', 'avg', 'max'], percentiles: [50, 95] },
      { metric: 'call_count', aggregations: ['sum'] },
      { metric: 'error_count', aggregations: ['sum'] },
    ],
    usage_metrics: [
      { metric: 'input_tokens', aggregations: ['sum'] },
      { metric: 'total_tokens', aggregations: ['sum', 'max'] },
    ],
  }
  const json = await postJson(s, '/calls/stats', statsReq)
  t.equal(json.status, 200)
  const r = await arrowQuery(s, '/calls/stats', statsReq)
  t.equal(r.status, 200)
  t.equal(r.type, ARROW)
  const table = tableFromIPC(r.bytes)
  const { call_buckets: calls, usage_buckets: usage } = json.json
  t.ok(calls.length >= 24 && usage.length >= 48, `${calls.length} call buckets, ${usage.length} usage buckets`)
  t.equal(table.numRows, calls.length + usage.length)
  t.same(Object.fromEntries(table.schema.metadata), {
    start: json.json.start,
    end: json.json.end,
    granularity: String(json.json.granularity),
    timezone: json.json.timezone,
  })
  const kind = values(table.getChild('kind')!)
  const ts = micros(table.getChild('timestamp')!)
  const rows = [...calls.map((b: any) => ['call', b]), ...usage.map((b: any) => ['usage', b])]
  let bad = 0
  rows.forEach(([k, b]: [string, Record<string, unknown>], i: number) => {
    if (kind[i] !== k || Number(ts[i]! / 1000n) !== Date.parse(b.timestamp as string)) bad++
    for (const [name, want] of Object.entries(b)) {
      if (name === 'timestamp') continue
      const have = table.getChild(name)!.get(i)
      if ((typeof have === 'bigint' ? Number(have) : have) !== want) bad++
    }
  })
  t.equal(bad, 0, 'every bucket, every metric equal')
  t.ok(calls.some((b: any) => b.count > 0) && usage.some((b: any) => b.sum_input_tokens > 0), 'non-empty buckets compared')
})

t.test('embedding: Arrow tables from openStore/openAnalytics equal the JSON-shaped answers', async (t) => {
  const dir = tempDir()
  t.teardown(() => rm(dir, { recursive: true, force: true }))
  const a = await openAnalytics(dir)
  t.teardown(() => a.close())
  const project = 'acme/embedded'
  const now = Date.now()
  const parts = Array.from({ length: 200 }, (_, i) => {
    const id = hex(16)
    const started_at = new Date(now - 3600_000 + i * 1000).toISOString()
    return [
      startPart({ project_id: project, id, op_name: 'step', started_at, attributes: {}, inputs: { i, v: [i] } }, 'me'),
      endPart({
        project_id: project,
        id,
        ended_at: new Date(Date.parse(started_at) + i).toISOString(),
        output: i,
        summary: { usage: { m: { prompt_tokens: i } } },
      }),
    ]
  }).flat()
  await a.store.ingest(parts)
  const opts = { sort_by: [{ field: 'inputs.i', direction: 'desc' as const }] }
  const table = await a.store.queryArrow(project, opts)
  const json = JSON.parse(JSON.stringify(await a.store.query(project, opts)))
  compareCalls(t, table, json, 'queryArrow')
  const req = {
    project_id: project,
    start: new Date(now - 2 * 3600_000).toISOString(),
    call_metrics: [{ metric: 'latency_ms' as const, aggregations: ['sum' as const] }],
  }
  const stats = (await a.stats.stats(req, now)) as any
  const st = await a.stats.statsArrow(req, now)
  t.equal(st.numRows, stats.call_buckets.length)
  t.same(
    st
      .getChild('sum_latency_ms')!
      .toArray()
      .reduce((x: number, y: number) => x + y, 0),
    Array.from({ length: 200 }, (_, i) => i).reduce((x, y) => x + y, 0),
    'latency sums add up to the calls sent',
  )
})
