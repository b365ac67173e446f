// The ClickHouse calls backend (src/clickhouse/) through chdb, against the embedded DuckDB store as
// served: the same calls ingested into both (start and end parts shuffled, some deleted, some with
// usage), the same queries asked of both, the answers compared whole and in order.
import { rm } from 'node:fs/promises'
import { monitorEventLoopDelay } from 'node:perf_hooks'
import path from 'node:path'
import t from 'tap'
import { endPart, startPart } from '../src/calls/ingest/parts.js'
import type { CallPart } from '../src/calls/model.js'
import { ClickHouseCalls } from '../src/clickhouse/calls.js'
import { ChdbExecutor, chdbResolvable } from '../src/clickhouse/chdb-executor.js'
import { migrate, MIGRATIONS } from '../src/clickhouse/migrations.js'
import { mulberry32 } from './helpers/rng.js'
import { ROOT, postJson, startServer, streamQuery, tempDir, CHDB_FROM } from './helpers/server.js'

// No chat in this file: its servers start without the built-in model (about 1 s of CPU less per start).
process.env.WEFT_MODEL ??= 'none'

const FROM = CHDB_FROM
const P = 'ch-entity/ch-project'
const OPS = [`weave:///${P}/op/alpha:v1`, `weave:///${P}/op/alpha:v2`, `weave:///${P}/op/beta:v1`, 'plain_op', 'Gamma']
const WORDS = ['hello', 'Hello World', 'naïve café', '', 'x', "it's", 'zeta', '42', '1.5', 'true']

const rand = mulberry32(19)
const pick = <T>(xs: readonly T[]): T => xs[Math.floor(rand() * xs.length)]!
const hex = (n: number) => Array.from({ length: n }, () => Math.floor(rand() * 16).toString(16)).join('')

interface Gen {
  start: Record<string, unknown>
  end?: Record<string, unknown>
  children: string[]
}

/** About 300 calls in 40 traces: inputs of every JSON kind, some unfinished, failed, with usage or threads. */
function generate(): Map<string, Gen> {
  const calls = new Map<string, Gen>()
  const base = Date.UTC(2026, 0, 1)
  let n = 0
  for (let tr = 0; tr < 40; tr++) {
    const trace = hex(32)
    const ids: string[] = []
    const size = 3 + Math.floor(rand() * 10)
    for (let i = 0; i < size; i++) {
      const id = hex(16)
      const parent = i === 0 ? null : pick(ids)
      const startedMs = base + n++ * 1000 + Math.floor(rand() * 900)
      const inputs: Record<string, unknown> = {
        n: Math.floor(rand() * 100) - 20,
        s: pick(WORDS),
        flag: rand() < 0.5,
        nested: { k: [Math.floor(rand() * 5), pick(WORDS), { deep: pick(['a', 'b', 'c']) }] },
      }
      if (rand() < 0.3) inputs.maybe = null
      else if (rand() < 0.5) inputs.maybe = pick(WORDS)
      const start: Record<string, unknown> = {
        project_id: P,
        id,
        trace_id: trace,
        parent_id: parent,
        op_name: pick(OPS),
        started_at: new Date(startedMs).toISOString().replace('Z', String(Math.floor(rand() * 1000)).padStart(3, '0') + 'Z'),
        attributes: { env: pick(['prod', 'dev']) },
        inputs,
      }
      if (rand() < 0.2) start.display_name = pick(['Nice name', 'another', 'Zed'])
      if (rand() < 0.2) start.thread_id = pick(['thread-a', 'thread-b'])
      const g: Gen = { start, children: [] }
      if (rand() < 0.85) g.end = endOf(id, startedMs)
      calls.set(id, g)
      if (parent) calls.get(parent)!.children.push(id)
      ids.push(id)
    }
  }
  return calls
}

function endOf(id: string, startedMs: number): Record<string, unknown> {
  const summary: Record<string, unknown> = {}
  if (rand() < 0.4) {
    const prompt = Math.floor(rand() * 500)
    const completion = Math.floor(rand() * 200)
    summary.usage = {
      [pick(['gpt-4o', 'gpt-4o-mini', 'claude-3'])]: {
        requests: 1,
        prompt_tokens: prompt,
        completion_tokens: completion,
        total_tokens: prompt + completion,
      },
    }
  }
  if (rand() < 0.1) summary.status_counts = { success: 1, error: 1 }
  const end: Record<string, unknown> = {
    project_id: P,
    id,
    ended_at: new Date(startedMs + Math.floor(rand() * 5000)).toISOString(),
    output: pick([null, 'done', 7, { answer: pick(WORDS), score: Math.floor(rand() * 10) }, [1, 2, 3]]),
    summary,
  }
  if (rand() < 0.12) end.exception = pick(['ValueError: bad', 'Timeout'])
  return end
}

function shuffle<T>(xs: T[]): T[] {
  for (let i = xs.length - 1; i > 0; i--) {
    const j = Math.floor(rand() * (i + 1))
    ;[xs[i], xs[j]] = [xs[j]!, xs[i]!]
  }
  return xs
}

/** The ids and all their descendants, from the generated tree (independently of either store). */
function withDescendants(calls: Map<string, Gen>, ids: string[]): string[] {
  const out = new Set<string>()
  const walk = (id: string) => {
    if (out.has(id)) return
    out.add(id)
    for (const c of calls.get(id)!.children) walk(c)
  }
  ids.forEach(walk)
  return [...out]
}

const T0 = Date.UTC(2026, 0, 1) / 1000
const field = (f: string) => ({ $getField: f })
const lit = (v: unknown) => ({ $literal: v })

/** The queries asked of both: filters, sorts, pages and `$expr` of every operator. */
function queries(calls: Map<string, Gen>): Record<string, Record<string, unknown>> {
  const all = [...calls.values()].map((g) => g.start)
  const some = (k: number) => shuffle([...all]).slice(0, k)
  return {
    everything_default_order: {},
    newest_page: { sort_by: [{ field: 'started_at', direction: 'desc' }], limit: 50, offset: 10 },
    op_names_exact_and_any_version: { filter: { op_names: [`weave:///${P}/op/alpha:*`, 'plain_op'] } },
    trace_ids: { filter: { trace_ids: some(5).map((s) => s.trace_id) } },
    call_ids: { filter: { call_ids: some(30).map((s) => s.id) }, sort_by: [{ field: 'id', direction: 'asc' }] },
    parent_ids: { filter: { parent_ids: some(20).map((s) => s.id) } },
    trace_roots_only: {
      filter: { trace_roots_only: true },
      sort_by: [
        { field: 'op_name', direction: 'asc' },
        { field: 'started_at', direction: 'desc' },
      ],
    },
    started_range: {
      query: { $expr: { $and: [{ $gte: [field('started_at'), lit(T0 + 60)] }, { $lt: [field('started_at'), lit(T0 + 200)] }] } },
    },
    eq_json_string: { query: { $expr: { $eq: [field('inputs.s'), lit('hello')] } } },
    gt_converted: { query: { $expr: { $gt: [{ $convert: { input: field('inputs.n'), to: 'double' } }, lit(40)] } } },
    not_of_failed_convert: { query: { $expr: { $not: [{ $gt: [{ $convert: { input: field('inputs.maybe'), to: 'int' } }, lit(3)] }] } } },
    not_some_true_some_unknown: { query: { $expr: { $not: [{ $gt: [{ $convert: { input: field('inputs.s'), to: 'int' } }, lit(50)] }] } } },
    contains_ci: { query: { $expr: { $contains: { input: field('inputs.s'), substr: lit('HELLO'), case_insensitive: true } } } },
    contains_empty: { query: { $expr: { $contains: { input: field('inputs.nested.k.2.deep'), substr: lit('') } } } },
    in_list: { query: { $expr: { $in: [field('attributes.env'), [lit('prod'), lit('staging')]] } } },
    nested_index: { query: { $expr: { $eq: [field('inputs.nested.k.2.deep'), lit('b')] } } },
    parent_null: { query: { $expr: { $eq: [field('parent_id'), lit(null)] } } },
    status_error: { query: { $expr: { $eq: [field('summary.weave.status'), lit('error')] } } },
    status_descendant_or_running: {
      query: {
        $expr: { $or: [{ $eq: [field('summary.weave.status'), lit('descendant_error')] }, { $eq: [field('ended_at'), lit(null)] }] },
      },
    },
    exists_and_bool: {
      query: {
        $expr: {
          $and: [{ $convert: { input: field('inputs.maybe'), to: 'exists' } }, { $convert: { input: field('inputs.flag'), to: 'bool' } }],
        },
      },
    },
    output_root_string: { query: { $expr: { $eq: [field('output'), lit('done')] } } },
    size_of_array: { query: { $expr: { $eq: [{ $size: field('inputs.nested.k') }, lit(3)] } }, limit: 20 },
    usage_json: { query: { $expr: { $gt: [{ $convert: { input: field('summary.usage.gpt-4o.total_tokens'), to: 'int' } }, lit(300)] } } },
    hostile_literal: { query: { $expr: { $eq: [field('inputs.s'), lit("'); DROP TABLE call_parts; --")] } } },
    sort_display_name: { sort_by: [{ field: 'display_name', direction: 'desc' }], limit: 40 },
    sort_exception_then_latency: {
      sort_by: [
        { field: 'exception', direction: 'asc' },
        { field: 'summary.weave.latency_ms', direction: 'desc' },
      ],
      limit: 60,
    },
    sort_json_mixed: { sort_by: [{ field: 'inputs.maybe', direction: 'desc' }], limit: 80, offset: 5 },
    thread_filter: { filter: { thread_ids: ['thread-a'] }, sort_by: [{ field: 'started_at', direction: 'asc' }] },
  }
}

function partsOf(calls: Map<string, Gen>, user: string): { items: Record<string, unknown>[]; parts: CallPart[] } {
  const items: Record<string, unknown>[] = []
  for (const g of calls.values()) {
    items.push({ mode: 'start', req: { start: g.start } })
    if (g.end) items.push({ mode: 'end', req: { end: g.end } })
  }
  shuffle(items)
  const parts = items.map((i) =>
    i.mode === 'start' ? startPart((i.req as { start: never }).start, user) : endPart((i.req as { end: never }).end),
  )
  return { items, parts }
}

const available = chdbResolvable(FROM)
if (!available) t.comment('chdb is not installed (npm --prefix bench/peer-deps install): ClickHouse backend tests skipped')
// One chdb process for the file: starting one loads ClickHouse (~2 s on this machine).
let shared: Promise<ChdbExecutor> | null = null
const chdbDir = tempDir('weft-chdb-')
const chdb = () => (shared ??= ChdbExecutor.open({ path: chdbDir, resolveFrom: FROM }))
t.teardown(async () => {
  if (shared) await (await shared).close()
  await rm(chdbDir, { recursive: true, force: true })
})

t.test('ClickHouse calls backend answers as the embedded store does', { skip: !available && 'chdb not installed' }, async (t) => {
  const calls = generate()
  let mark = performance.now()
  const phase = (name: string) => {
    t.comment(`${name}: ${(performance.now() - mark).toFixed(0)} ms`)
    mark = performance.now()
  }
  // One after the other: a server starting on a loaded machine needs the cores (it has 60 s to listen).
  const s = await startServer()
  t.teardown(() => s.stop())
  phase('server started')
  const exec = await chdb()
  phase('chdb started')

  // The server's user for its key: startPart takes it as the server's ingest does.
  const probe = await postJson(s, '/call/start', {
    start: { project_id: 'probe/p', op_name: 'probe', started_at: new Date().toISOString(), attributes: {}, inputs: {} },
  })
  t.equal(probe.status, 200)
  const [probed] = await streamQuery(s, { project_id: 'probe/p' })
  const user = probed.svc_user_id as string

  const { items, parts } = partsOf(calls, user)
  for (let i = 0; i < items.length; i += 97) {
    const r = await postJson(s, '/call/upsert_batch', { batch: items.slice(i, i + 97) })
    t.equal(r.status, 200, r.text)
  }
  phase('ingested into the server')
  const backend = await ClickHouseCalls.open(exec, { database: 'weft_test' })
  phase('migrations applied')
  // Several inserts, as several requests would be; end parts often land before their starts.
  for (let i = 0; i < parts.length; i += 61) await backend.ingest(parts.slice(i, i + 61))
  phase('ingested into ClickHouse')

  const doomed = shuffle([...calls.keys()]).slice(0, 8)
  const del = await postJson(s, '/calls/delete', { project_id: P, call_ids: doomed })
  t.equal(del.status, 200)
  const gone = withDescendants(calls, doomed)
  t.equal(del.json.num_deleted, gone.length, 'the server deleted the descendants the tree says')
  const now = (BigInt(Date.now()) * 1000n).toString()
  await backend.ingest(gone.map((id): CallPart => ({ kind: 'delete', project_id: P, id, deleted_us: now })))

  let compared = 0
  const spent = { duckdb: 0, chdb: 0 }
  const timed = async <T>(k: keyof typeof spent, f: () => Promise<T>): Promise<T> => {
    const t0 = performance.now()
    const out = await f()
    spent[k] += performance.now() - t0
    return out
  }
  for (const [name, q] of Object.entries(queries(calls))) {
    const expected = await timed('duckdb', () => streamQuery(s, { project_id: P, ...q }))
    const got = await timed('chdb', () => backend.query(P, q as never))
    t.same(
      got.map((c) => c.id),
      expected.map((c) => c.id),
      `${name}: same ids in the same order (${expected.length})`,
    )
    t.same(got, expected, `${name}: same calls`)
    compared += expected.length
    if (!q.filter && !q.query) continue
    const counted = { filter: q.filter, query: q.query, limit: q.limit }
    const stats = await postJson(s, '/calls/query_stats', { project_id: P, ...counted })
    t.equal(await backend.count(P, counted as never), stats.json.count, `${name}: same count`)
  }
  t.comment(`queries: DuckDB server ${spent.duckdb.toFixed(0)} ms, chdb ${spent.chdb.toFixed(0)} ms`)
  t.ok(compared > 1000, `compared ${compared} calls in all`)
  t.ok((await backend.query(P, {})).length > 200, 'a few hundred live calls')

  const one = [...calls.keys()].find((id) => !gone.includes(id))!
  t.same(await backend.read(P, one), (await postJson(s, '/call/read', { project_id: P, id: one })).json.call, 'read by id')
  t.equal(await backend.read(P, gone[0]!), null, 'a deleted call reads as null')
  t.equal(await backend.read(P, '0123456789abcdef'), null, 'an unknown call reads as null')

  const usage = await exec.query(
    `SELECT sum(total_tokens) AS total, count() AS n FROM (SELECT * FROM weft_test.call_usage FINAL) WHERE project_id = {p:String}`,
    { p: P },
  )
  const expectTotal = [...calls.values()].reduce((a, g) => {
    const u = (g.end?.summary as { usage?: Record<string, { total_tokens: number }> } | undefined)?.usage
    return a + (u ? Object.values(u).reduce((b, x) => b + x.total_tokens, 0) : 0)
  }, 0)
  t.equal(Number(usage[0]!.total), expectTotal, 'typed usage rows sum to the usage sent')

  t.same(await migrate(exec, { database: 'weft_test' }), [], 'migrations already applied are not applied again')
  await exec.command('TRUNCATE TABLE weft_test.weft_migrations')
  // Every migration there is (others append theirs): all re-run.
  const all = MIGRATIONS.map((m) => m.version)
  t.ok(all.length >= 2)
  t.same(await migrate(exec, { database: 'weft_test' }), all, 'a lost record re-runs them, harmlessly (idempotent DDL)')
  t.equal((await backend.query(P, {})).length, (await streamQuery(s, { project_id: P })).length, 'and the data is untouched')
})

t.test('bad input: a clear error, nothing changed', { skip: !available && 'chdb not installed' }, async (t) => {
  const exec = await chdb()
  const backend = await ClickHouseCalls.open(exec, { database: 'weft_bad' })
  await t.rejects(backend.query(P, { query: { $expr: { $gt: [field('inputs.n'), lit(3)] } } }), { status: 400, message: /\$convert/ })
  await t.rejects(backend.query(P, { query: { $expr: { $eq: [field("x'); DROP TABLE x; --"), lit(1)] } } }), { status: 403, message: /./ })
  await t.rejects(backend.query(P, { sort_by: [{ field: 'nope', direction: 'asc' }] }), { status: 403, message: /./ })
  await t.rejects(backend.query(P, { query: { $expr: { $bogus: [] } } }), { status: 400, message: /./ })
  await t.rejects(backend.query(P, { filter: { call_ids: Array.from({ length: 1001 }, () => hex(16)) } }), { status: 400, message: /./ })
  t.equal((await exec.query('SELECT count() AS n FROM weft_bad.call_parts'))[0]!.n, '0')
})

t.test('chdb runs off the event loop', { skip: !available && 'chdb not installed' }, async (t) => {
  const exec = await chdb()
  const h = monitorEventLoopDelay({ resolution: 10 })
  h.enable()
  const t0 = performance.now()
  await exec.query('SELECT count() AS n FROM numbers({n:UInt64}) WHERE sipHash64(number) % 7 = 3', { n: 5_000_000 })
  const ms = performance.now() - t0
  h.disable()
  const maxDelay = h.max / 1e6
  t.comment(
    `a ${ms.toFixed(0)} ms chdb query; event-loop delay max ${maxDelay.toFixed(1)} ms, p99 ${(h.percentile(99) / 1e6).toFixed(1)} ms`,
  )
  t.ok(maxDelay < Math.max(100, ms / 2), 'the event loop kept turning while chdb worked')
  t.match(await exec.version(), /^\d+\.\d+\./, "ClickHouse's version")
})
