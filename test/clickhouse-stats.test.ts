// Statistics, usage and costs on the ClickHouse backend (`--storage chdb`) give the embedded
// backend's answers: the same calls go to one server of each kind, and every answer is compared,
// value by value (floating-point sums to 1e-9 relative: the engines add in different orders).
// test/stats.test.ts, usage.test.ts and otel.test.ts check both against independent computations
// (WEFT_STORAGE=chdb runs them on ClickHouse); this file checks that the two agree on more shapes.
import path from 'node:path'
import t, { type Test } from 'tap'
import { chdbResolvable } from '../src/clickhouse/chdb-executor.js'
import { ROOT, postJson, startServer, type TestServer } from './helpers/server.js'

process.env.WEFT_MODEL ??= 'none'
const available = chdbResolvable([ROOT, path.join(ROOT, 'bench', 'peer-deps')].map((d) => path.join(d, 'package.json')))
if (!available) t.comment('chdb is not installed (npm --prefix bench/peer-deps install): ClickHouse statistics tests skipped')

const P = 'ch-stats/proj'
const BASE = Date.parse('2026-03-07T00:00:00Z')
const H = 3_600_000
const OPS = ['weave:///ch-stats/proj/op/a:v1', 'weave:///ch-stats/proj/op/b:v1', 'weave:///ch-stats/proj/op/c:v2']
const MODELS = ['gpt-4o', 'claude-3-5-sonnet-20241022', 'local-model']
const iso = (ms: number) => new Date(ms).toISOString()
const uuid = (n: number) => `01900000-0000-7000-8000-${n.toString(16).padStart(12, '0')}`

function rng(seed: number) {
  let x = seed >>> 0
  return () => {
    x = (x + 0x6d2b79f5) >>> 0
    let z = Math.imul(x ^ (x >>> 15), x | 1)
    z ^= z + Math.imul(z ^ (z >>> 7), z | 61)
    return ((z ^ (z >>> 14)) >>> 0) / 4294967296
  }
}

/** 300 calls over two days (the second day's DST change in New York included), in trees of up to 5; three runs and calls in none. */
function makeItems(): { items: unknown[]; ids: string[]; roots: string[] } {
  const r = rng(7)
  const items: unknown[] = []
  const ids: string[] = []
  const roots: string[] = []
  let root = ''
  let trace = ''
  for (let i = 0; i < 300; i++) {
    const id = uuid(i + 1)
    const isRoot = i % 5 === 0
    if (isRoot) [root, trace] = [id, uuid(50_000 + i)]
    const started = BASE + Math.floor(r() * 48 * H)
    const usage: Record<string, Record<string, number>> = {}
    for (const m of MODELS)
      if (r() < 0.5)
        usage[m] =
          r() < 0.5
            ? { prompt_tokens: Math.floor(r() * 900), completion_tokens: Math.floor(r() * 300), requests: 1 }
            : { input_tokens: Math.floor(r() * 900), output_tokens: Math.floor(r() * 300), cache_read_input_tokens: Math.floor(r() * 50) }
    const run = i % 4 === 0 ? {} : { wb_run_id: `run-${i % 3}` }
    const start = {
      project_id: P,
      id,
      trace_id: trace,
      parent_id: isRoot ? null : root,
      op_name: OPS[i % 3],
      started_at: iso(started),
      ...run,
    }
    items.push({ mode: 'start', req: { start: { ...start, attributes: {}, inputs: { i } } } })
    if (r() < 0.93) {
      const end = { project_id: P, id, ended_at: iso(started + Math.floor(Math.exp(2 + r() * 7))), output: i, summary: { usage } }
      items.push({ mode: 'end', req: { end: r() < 0.06 ? { ...end, exception: 'ValueError' } : end } })
    }
    ids.push(id)
    if (isRoot) roots.push(id)
  }
  return { items, ids, roots }
}

/** Numbers equal to 1e-9 relative, everything else exactly; the first few differences are reported. */
function compare(t: Test, a: unknown, b: unknown, label: string, ignore: string[] = []): void {
  const diffs: string[] = []
  const walk = (x: unknown, y: unknown, at: string) => {
    if (typeof x === 'number' && typeof y === 'number') {
      if (Math.abs(x - y) > 1e-9 * Math.max(1, Math.abs(x), Math.abs(y))) diffs.push(`${at}: ${x} vs ${y}`)
    } else if (x && y && typeof x === 'object' && typeof y === 'object') {
      const keys = new Set([...Object.keys(x), ...Object.keys(y)])
      for (const k of keys)
        if (!ignore.includes(k)) walk((x as Record<string, unknown>)[k], (y as Record<string, unknown>)[k], `${at}.${k}`)
    } else if (x !== y) diffs.push(`${at}: ${JSON.stringify(x)} vs ${JSON.stringify(y)}`)
  }
  walk(a, b, '')
  t.same(diffs.slice(0, 5), [], `${label}: embedded and ClickHouse agree`)
}

t.test('the same calls on both backends, the same answers', { skip: !available && 'chdb not installed' }, async (t) => {
  const servers: TestServer[] = []
  t.teardown(() => Promise.all(servers.map((s) => s.stop())))
  // The embedded server flushes often, so its answers come from rollups, segments and the tail at once.
  const [emb, ch] = await Promise.all([
    startServer({ env: { WEFT_STORAGE: '', WEFT_CALLS_FLUSH_ROWS: '60' } }),
    startServer({ args: ['--storage', 'chdb'] }),
  ])
  servers.push(emb!, ch!)
  // A second user: the server takes a start's user from the API key, so every other batch is sent with bob's.
  const made = await Promise.all([emb!, ch!].map((s) => postJson(s, '/admin/keys', { user_id: 'bob', entities: ['ch-stats'] })))
  const bob = [emb!, ch!].map((s, i) => s.basic(made[i]!.json.key))
  const both = async (route: string, body: unknown, asBob = false) => {
    const [a, b] = await Promise.all([
      postJson(emb!, route, body, asBob ? bob[0] : undefined),
      postJson(ch!, route, body, asBob ? bob[1] : undefined),
    ])
    return { a, b }
  }
  const { items, ids, roots } = makeItems()
  for (let i = 0; i < items.length; i += 80) {
    const { a, b } = await both('/call/upsert_batch', { batch: items.slice(i, i + 80) }, (i / 80) % 2 === 1)
    t.same([a.status, b.status], [200, 200], 'batch written to both')
  }
  const same = async (t: Test, route: string, body: unknown, label: string, ignore: string[] = []) => {
    const { a, b } = await both(route, body)
    t.same([a.status, b.status], [a.status, a.status], `${label}: the same status (${a.status})`)
    t.equal(a.status, 200, `${label}: ${a.text.slice(0, 200)}`)
    compare(t, a.json, b.json, label, ignore)
    return b
  }

  const CALLS = [
    { metric: 'latency_ms', aggregations: ['sum', 'avg', 'min', 'max', 'count'], percentiles: [0, 50, 95, 99.9, 100] },
    { metric: 'call_count', aggregations: ['sum', 'avg'], percentiles: [50] },
    { metric: 'error_count', aggregations: ['sum', 'min', 'max'] },
  ]
  const USAGE = ['input_tokens', 'output_tokens', 'total_tokens', 'cache_read_input_tokens', 'input_cost', 'total_cost'].map((metric) => ({
    metric,
    aggregations: ['sum', 'avg', 'min', 'max', 'count'],
  }))
  const range = { project_id: P, start: iso(BASE + 17 * 60_000 + 3_456), end: iso(BASE + 47 * H + 5 * 60_000) }
  // Costs the rollups answer (no percentile, no extreme of total_cost): every call is in the `call_ids` of the scan to compare with.
  const COSTS = [
    { metric: 'input_cost', aggregations: ['sum', 'avg', 'min', 'max', 'count'] },
    { metric: 'output_cost', aggregations: ['sum', 'max'] },
    { metric: 'total_cost', aggregations: ['sum', 'avg', 'count'] },
    { metric: 'output_tokens', aggregations: ['sum'] },
  ]
  const fromRollups = async (t: Test, body: Record<string, unknown>, label: string, path = 'rollup') => {
    const b = await same(t, '/calls/stats', body, label)
    t.equal(b.headers.get('x-weft-stats-path'), path, `${label}: answered by the ${path}`)
    const filter = { ...(body.filter as object | undefined), call_ids: ids }
    const scan = await postJson(ch!, '/calls/stats', { ...body, filter })
    t.equal(scan.headers.get('x-weft-stats-path'), 'scan')
    compare(t, b.json, scan.json, `${label}: the rollups and ClickHouse's scan`)
    return b
  }

  await t.test('/calls/stats: call metrics, every granularity and time zone shape', async (t) => {
    for (const [granularity, timezone] of [
      [3600, 'UTC'],
      [900, 'UTC'],
      [86400, 'America/New_York'],
      [10800, 'Asia/Kolkata'],
    ] as const) {
      const b = await same(t, '/calls/stats', { ...range, granularity, timezone, call_metrics: CALLS }, `${granularity} s in ${timezone}`)
      const path = granularity < 3600 ? 'scan' : 'rollup'
      t.equal(b.headers.get('x-weft-stats-path'), path, `latency, errors and counts answered by the ${path}`)
      t.ok(
        b.json.call_buckets.some((x: { count: number }) => x.count > 0),
        'buckets hold calls',
      )
    }
  })

  await t.test('/calls/stats: filters (op names, roots, users, trace and call ids)', async (t) => {
    const filters = [
      { op_names: [OPS[0], OPS[2]] },
      { trace_roots_only: true },
      { svc_user_ids: ['admin'] },
      { trace_ids: [uuid(50_000), uuid(50_005)] },
      { call_ids: ids.slice(0, 40) },
      { op_names: ["x' OR 1=1 --"] },
    ]
    for (const filter of filters)
      await same(
        t,
        '/calls/stats',
        { ...range, granularity: 21600, call_metrics: CALLS, usage_metrics: USAGE, filter },
        JSON.stringify(filter),
      )
    // Users and runs from the user tier's rollups (total_cost's extremes, in USAGE, are always a scan).
    const tokens = USAGE.filter((u) => u.metric !== 'total_cost')
    for (const filter of [
      { svc_user_ids: ['bob'] },
      { wb_user_ids: ['admin'], svc_run_ids: ['run-1'] },
      { wb_run_ids: ['run-1', 'run-2', "r' --"], op_names: [OPS[1]], trace_roots_only: true },
      { svc_user_ids: ['bob', 'nobody'], wb_user_ids: ['admin'], svc_run_ids: [''] },
    ]) {
      const label = `users and runs ${JSON.stringify(filter)}`
      const b = await fromRollups(t, { ...range, granularity: 21600, call_metrics: CALLS, usage_metrics: tokens, filter }, label)
      const n = b.json.call_buckets.reduce((a: number, x: { count: number }) => a + x.count, 0)
      t.equal(n > 0, !('svc_run_ids' in filter && filter.svc_run_ids?.[0] === ''), `${label}: ${n} calls`)
    }
    // Empty user and run lists filter nothing (the scan's rule, and Weave's `if filter.wb_user_ids:`): every call, from rollups on both.
    for (const [filter, rest] of [
      [{ svc_user_ids: [] }, {}],
      [{ wb_user_ids: [], svc_run_ids: [], op_names: [OPS[1]] }, { op_names: [OPS[1]] }],
    ] as const) {
      const label = `empty lists ${JSON.stringify(filter)}`
      const body = { ...range, granularity: 21600, call_metrics: CALLS, usage_metrics: tokens }
      const b = await fromRollups(t, { ...body, filter }, label)
      const e = await postJson(emb!, '/calls/stats', { ...body, filter })
      t.equal(e.headers.get('x-weft-stats-path'), 'rollup', `${label}: embedded answers from its rollups`)
      compare(t, b.json, (await postJson(emb!, '/calls/stats', { ...body, filter: rest })).json, `${label}: as without the lists`)
    }
  })

  await t.test('/calls/stats: usage with costs, percentiles of tokens and costs, and a mid-hour project price', async (t) => {
    const withPct = [...USAGE, { metric: 'output_tokens', percentiles: [25, 50, 99] }, { metric: 'total_cost', percentiles: [90] }]
    await same(t, '/calls/stats', { ...range, granularity: 21600, usage_metrics: withPct }, 'default prices')
    const costs = {
      'gpt-4o': { prompt_token_cost: 1e-5, completion_token_cost: 3e-5, effective_date: iso(BASE + 20 * H + 13 * 60_000) },
      'local-model': { prompt_token_cost: 2e-7, completion_token_cost: 1e-7, effective_date: iso(BASE - H) },
    }
    const { a, b } = await both('/cost/create', { project_id: P, costs })
    t.same([a.status, b.status], [200, 200])
    t.same(b.json.ids.map((x: string[]) => x[1]).sort(), ['gpt-4o', 'local-model'], 'ids for each model')
    await same(t, '/calls/stats', { ...range, granularity: 3600, usage_metrics: withPct }, 'project prices')
    // The hour holding gpt-4o's new price is scanned; the others priced per hour from the rollup.
    for (const granularity of [3600, 21600])
      await fromRollups(t, { ...range, granularity, usage_metrics: COSTS }, `costs, ${granularity} s`)
    await fromRollups(t, { ...range, granularity: 86400, usage_metrics: COSTS, filter: { op_names: [OPS[1]] } }, 'costs of one op')
    await fromRollups(t, { ...range, granularity: 3600, usage_metrics: COSTS, filter: { svc_user_ids: ['bob'] } }, 'costs of one user')
    const strip = (rows: Record<string, unknown>[]) => rows.map(({ id: _id, ...rest }) => rest)
    const qa = await postJson(emb!, '/cost/query', { project_id: P })
    const qb = await postJson(ch!, '/cost/query', { project_id: P })
    compare(t, strip(qa.json.results), strip(qb.json.results), '/cost/query')
    t.equal(qb.json.results.length, 2)
    const local = (x: { results: { id: string; llm_id: string }[] }) => x.results.find((r) => r.llm_id === 'local-model')!.id
    const pa = await postJson(emb!, '/cost/purge', {
      project_id: P,
      query: { $expr: { $eq: [{ $getField: 'id' }, { $literal: local(qa.json) }] } },
    })
    const pb = await postJson(ch!, '/cost/purge', {
      project_id: P,
      query: { $expr: { $eq: [{ $getField: 'id' }, { $literal: local(qb.json) }] } },
    })
    t.same([pa.status, pb.status], [200, 200])
    t.same(
      (await postJson(ch!, '/cost/query', { project_id: P })).json.results.map((r: { llm_id: string }) => r.llm_id),
      ['gpt-4o'],
      'purged by id',
    )
    await same(t, '/calls/stats', { ...range, granularity: 3600, usage_metrics: withPct }, 'after the purge')
    const bad = await both('/cost/purge', { project_id: P, query: { $expr: { $eq: [{ $getField: 'llm_id' }, { $literal: 'gpt-4o' }] } } })
    t.same([bad.a.status, bad.b.status], [400, 400], 'purge only by id, on both')
    // A price's created_at is when each server stored it: the one field that may differ.
    const reads = { project_id: P, filter: { call_ids: ids.slice(0, 30) }, include_costs: true }
    await same(t, '/calls/query', reads, 'include_costs on reads', ['created_at'])
  })

  await t.test('/calls/usage and /trace/usage, with and without costs', async (t) => {
    const some = [...roots.slice(0, 25), ids[3]!, ids[7]!, 'not-a-call']
    for (const include_costs of [false, true]) {
      await same(t, '/calls/usage', { project_id: P, call_ids: some, include_costs }, `calls/usage costs=${include_costs}`)
      await same(
        t,
        '/calls/usage',
        { project_id: P, call_ids: roots.slice(0, 4), include_costs, limit: 7 },
        `calls/usage in batches, costs=${include_costs}`,
      )
      await same(t, '/trace/usage', { project_id: P, filter: { op_names: [OPS[1]] }, include_costs }, `trace/usage costs=${include_costs}`)
    }
    const { a, b } = await both('/calls/usage', { project_id: P, call_ids: roots.slice(0, 3), limit: 2 })
    t.same([a.status, b.status], [413, 413], 'a trace over the limit: 413 on both')
    const empty = await both('/calls/usage', { project_id: P, call_ids: roots, limit: 0 })
    t.same([empty.a.status, empty.b.status], [400, 400], 'limit 0: 400 on both')
  })

  await t.test('late parts and deletes count at once on both', async (t) => {
    const late = { project_id: P, id: ids[1]!, ended_at: iso(BASE + 30 * H), summary: { usage: { 'gpt-4o': { prompt_tokens: 1e6 } } } }
    t.same(
      Object.values(await both('/call/upsert_batch', { batch: [{ mode: 'end', req: { end: late } }] })).map((r) => r.status),
      [200, 200],
    )
    t.same(
      Object.values(await both('/calls/delete', { project_id: P, call_ids: [roots[4]!, ids[12]!] })).map((r) => r.status),
      [200, 200],
    )
    await same(
      t,
      '/calls/stats',
      { ...range, granularity: 43200, call_metrics: CALLS, usage_metrics: USAGE },
      'after late parts and deletes',
    )
    // A second end and deletes: their emissions' costs taken out, their merged usage priced in.
    const sums = COSTS.map((c) => ({ ...c, aggregations: ['sum', 'avg', 'count'] }))
    await fromRollups(t, { ...range, granularity: 43200, usage_metrics: sums }, 'costs after late parts and deletes')
    await same(t, '/calls/usage', { project_id: P, call_ids: roots.slice(0, 6), include_costs: true }, 'usage after deletes')
    await same(t, '/calls/query_stats', { project_id: P, filter: { trace_roots_only: true } }, 'query_stats count')
    await same(
      t,
      '/calls/query_stats',
      { project_id: P, filter: { svc_user_ids: ['bob'], wb_run_ids: ['run-2'] } },
      'query_stats count by user and run',
    )
  })

  await t.test('call counts from the hourly rollup: retried starts, ends before starts, deletes, updates', async (t) => {
    // The state every call should end in, kept here from what was sent (the latest start wins whole).
    const calls = new Map<string, { started: number; op: string; root: boolean; live: boolean }>()
    for (const it of items as {
      mode: string
      req: { start?: { id: string; started_at: string; op_name: string; parent_id: string | null } }
    }[])
      if (it.mode === 'start') {
        const s = it.req.start!
        calls.set(s.id, { started: Date.parse(s.started_at), op: s.op_name, root: s.parent_id === null, live: true })
      }
    for (const id of [roots[4]!, ...ids.slice(21, 25), ids[12]!]) calls.get(id)!.live = false
    const send = async (batch: unknown[], asBob = false) =>
      t.same(
        Object.values(await both('/call/upsert_batch', { batch }, asBob)).map((r) => r.status),
        [200, 200],
      )
    // Retried starts: ids 30-34 again, 5 hours later, under another op, by bob in another run (and a root made a child).
    const retried = ids.slice(30, 35).map((id, k) => {
      const c = calls.get(id)!
      const op = OPS[(OPS.indexOf(c.op) + 1) % 3]!
      const start = {
        project_id: P,
        id,
        trace_id: uuid(60_000),
        parent_id: k === 0 ? ids[1]! : null,
        op_name: op,
        started_at: iso(c.started + 5 * H),
        wb_run_id: 'run-retried',
      }
      calls.set(id, { started: c.started + 5 * H, op, root: k !== 0, live: true })
      return { mode: 'start', req: { start: { ...start, attributes: {}, inputs: {} } } }
    })
    await send(retried, true)
    // Ends before their starts, in separate requests; one new call deleted, one renamed.
    const fresh = [1, 2, 3, 4].map((k) => ({ id: uuid(70_000 + k), started: BASE + (10 + 7 * k) * H + k * 61_000 }))
    await send(fresh.map((c) => ({ mode: 'end', req: { end: { project_id: P, id: c.id, ended_at: iso(c.started + 500), summary: {} } } })))
    await send(
      fresh.map((c) => ({
        mode: 'start',
        req: {
          start: {
            project_id: P,
            id: c.id,
            trace_id: uuid(70_100),
            op_name: OPS[1],
            started_at: iso(c.started),
            attributes: {},
            inputs: {},
          },
        },
      })),
    )
    for (const c of fresh) calls.set(c.id, { started: c.started, op: OPS[1]!, root: true, live: true })
    t.same(
      Object.values(await both('/calls/delete', { project_id: P, call_ids: [fresh[0]!.id] })).map((r) => r.status),
      [200, 200],
    )
    calls.get(fresh[0]!.id)!.live = false
    const update = { project_id: P, call_id: fresh[1]!.id, display_name: 'renamed' }
    t.same(
      Object.values(await both('/call/update', update)).map((r) => r.status),
      [200, 200],
    )

    const COUNT = [{ metric: 'call_count', aggregations: ['sum', 'avg', 'count'], percentiles: [50] }]
    const TOKENS = USAGE.filter((u) => !u.metric.endsWith('_cost'))
    // Every call's id: a filter the rollups cannot answer that leaves the answer as it is, so ClickHouse scans.
    const everyId = [...calls.keys()]
    // `more`: latency, errors and tokens too (three shapes, for the suite's time).
    for (const [granularity, timezone, filter, more] of [
      [3600, 'UTC', null, true],
      [900, 'UTC', null, false],
      [86400, 'America/New_York', { op_names: [OPS[1]] }, true],
      [10800, 'Asia/Kolkata', { trace_roots_only: true }, true],
      [21600, 'UTC', { op_names: ['weave:///ch-stats/proj/op/a:*', OPS[2]], trace_roots_only: true }, false],
      [43200, 'UTC', { op_names: ["x' OR 1=1 --", "weave:///ch-stats/proj/op/b:*') --"] }, false],
      [21600, 'UTC', { svc_user_ids: ['bob'] }, true],
      [3600, 'UTC', { wb_user_ids: ['admin'], svc_run_ids: ['run-retried', 'run-1'] }, true],
      [86400, 'America/New_York', { wb_run_ids: ['run-retried'], op_names: [OPS[1]] }, false],
    ] as const) {
      const label = `${granularity} s in ${timezone}, filter ${JSON.stringify(filter)}`
      const path = granularity < 3600 ? 'scan' : 'rollup'
      const req = { ...range, granularity, timezone, filter }
      const b = await same(t, '/calls/stats', { ...req, call_metrics: COUNT }, `counts, ${label}`)
      t.equal(b.headers.get('x-weft-stats-path'), path, `counts, ${label}: answered by the ${path}`)
      if (!more) {
        const scan = await postJson(ch!, '/calls/stats', { ...req, call_metrics: COUNT, filter: { ...filter, call_ids: everyId } })
        t.equal(scan.headers.get('x-weft-stats-path'), 'scan')
        compare(t, b.json, scan.json, `counts, ${label}: the rollup and ClickHouse's scan`)
        continue
      }
      // Latency, errors and token metrics: the corrected calls' emissions out, their merged state in. Sums,
      // averages and counts always come from the rollups; an extreme (or a percentile, clamped to them) that a
      // corrected call held cannot, and the buckets where one did are scanned whole (stats-reads.ts rescanBuckets).
      const sums = { aggregations: ['sum', 'avg', 'count'] }
      const plain = {
        ...req,
        call_metrics: ['latency_ms', 'error_count', 'call_count'].map((metric) => ({ metric, ...sums })),
        usage_metrics: TOKENS.map((u) => ({ ...u, ...sums })),
      }
      const f = await same(t, '/calls/stats', plain, `latency, errors, tokens, ${label}`)
      t.equal(f.headers.get('x-weft-stats-path'), path, `latency, errors, tokens, ${label}: answered by the ${path}`)
      const full = { ...req, call_metrics: CALLS, usage_metrics: TOKENS }
      const x = await same(t, '/calls/stats', full, `with extremes and percentiles, ${label}`)
      t.equal(x.headers.get('x-weft-stats-path'), path, `with extremes and percentiles, ${label}: the ${path}, buckets rescanned`)
      const scan = await postJson(ch!, '/calls/stats', { ...plain, filter: { ...filter, call_ids: everyId } })
      t.equal(scan.headers.get('x-weft-stats-path'), 'scan')
      compare(t, f.json, scan.json, `${label}: the rollups and ClickHouse's scan`)
    }
    // Hourly UTC counts worked out here from what was sent.
    const res = await postJson(ch!, '/calls/stats', { ...range, granularity: 3600, call_metrics: COUNT })
    const [lo, hi] = [Date.parse(range.start), Date.parse(range.end)]
    const want = new Map<number, number>()
    for (const c of calls.values())
      if (c.live && c.started >= lo && c.started < hi) {
        const h = c.started - (c.started % H)
        want.set(h, (want.get(h) ?? 0) + 1)
      }
    t.same(
      res.json.call_buckets
        .filter((r: { count: number }) => r.count > 0)
        .map((r: { timestamp: string; count: number }) => [Date.parse(r.timestamp), r.count]),
      [...want.entries()].sort((a, b) => a[0] - b[0]),
      'hourly counts as sent: retried starts counted once, where their latest start puts them; deleted calls not at all',
    )
  })
})
