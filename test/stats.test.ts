import t, { type Test } from 'tap'
import { postJson, startServer, type TestServer } from './helpers/server.js'

// No chat in this file: its servers start without the built-in model (about 1 s of CPU less per start).
process.env.WEFT_MODEL ??= 'none'

/**
 * /calls/stats and /calls/query_stats against values computed here, independently, from the calls
 * the test sends. The server flushes every 100 parts, so the data sits in rollups, segments and
 * the tail at once, and the answers must not depend on where.
 */
let s: TestServer
t.before(async () => {
  s = await startServer({ env: { WEFT_CALLS_FLUSH_ROWS: '100' } })
})
t.teardown(() => s.stop())

const P = 'acme/stats'
const BASE = Date.parse('2026-03-06T00:00:00Z')
const H = 3_600_000
const OPS = [
  'weave:///acme/stats/op/plan:v1',
  'weave:///acme/stats/op/search:v1',
  'weave:///acme/stats/op/answer:v1',
  'weave:///acme/stats/op/judge:v2',
]
const MODELS = ['gpt-4o', 'claude-3-5-sonnet-20241022', 'in-house-model']
/** Default book prices (assets/prices.json), USD per token. */
const PRICE: Record<string, [number, number]> = { 'gpt-4o': [2.5e-6, 10e-6], 'claude-3-5-sonnet-20241022': [3e-6, 15e-6] }

function rng(seed: number) {
  let x = seed >>> 0
  return () => {
    x = (x + 0x6d2b79f5) >>> 0
    let z = x
    z = Math.imul(z ^ (z >>> 15), z | 1)
    z ^= z + Math.imul(z ^ (z >>> 7), z | 61)
    return ((z ^ (z >>> 14)) >>> 0) / 4294967296
  }
}

interface Call {
  id: string
  trace_id: string
  parent_id: string | null
  op: string
  user: string
  started: number
  latency: number | null
  error: boolean
  usage: Record<string, Record<string, number>>
  deleted?: boolean
}

const uuid = (n: number) => `01900000-0000-7000-8000-${n.toString(16).padStart(12, '0')}`
const r = rng(42)
const calls: Call[] = []
// 400 calls over three days, and 600 more within two hours of the second day: dense enough that
// every minute tier slot and partial minute of a range there holds calls.
for (let i = 0; i < 1000; i++) {
  const root = i % 4 === 0 || calls.length === 0
  const parent = root ? null : calls[calls.length - 1 - (i % 4 === 1 ? 0 : Math.floor(r() * (i % 4)))]!
  const usage: Call['usage'] = {}
  for (const m of MODELS) {
    if (r() < 0.45) {
      // Both provider spellings occur; statistics sum them.
      usage[m] =
        r() < 0.5
          ? { prompt_tokens: Math.floor(r() * 2000), completion_tokens: Math.floor(r() * 500), requests: 1 }
          : { input_tokens: Math.floor(r() * 2000), output_tokens: Math.floor(r() * 500), total_tokens: 0, requests: 1 }
      if (r() < 0.3) usage[m]!.cache_read_input_tokens = Math.floor(r() * 300)
    }
  }
  calls.push({
    id: uuid(i + 1),
    trace_id: parent ? parent.trace_id : uuid(100_000 + i),
    parent_id: parent?.id ?? null,
    op: OPS[Math.floor(r() * OPS.length)]!,
    user: 'admin',
    started: i < 400 ? BASE + Math.floor(r() * 3 * 24 * H) : BASE + 40 * H + Math.floor(r() * 2 * H),
    latency: r() < 0.05 ? null : Math.floor(Math.exp(3 + r() * 6)),
    error: r() < 0.05,
    usage,
  })
}
for (const c of calls) if (c.usage['gpt-4o']?.input_tokens !== undefined) c.usage['gpt-4o']!.total_tokens = 0

/**
 * The rollup tiers differ by backend: on ClickHouse (WEFT_STORAGE=chdb|clickhouse) call metrics, token
 * metrics and costs (filtered by op names and roots at most, over whole UTC hours) come from its rollups
 * (materialized views, docs/clickhouse.md); every other answer is aggregated directly from the merged calls
 * and says `scan`. The values are checked the same on both backends; only the path differs.
 * `onClickHouseToo`: the request is one ClickHouse answers from its rollups too.
 */
const ON_CLICKHOUSE = process.env.WEFT_STORAGE === 'chdb' || process.env.WEFT_STORAGE === 'clickhouse'
function rollupPath(t: Test, path: string | null, msg = 'answered from the rollups', onClickHouseToo = false) {
  if (ON_CLICKHOUSE && !onClickHouseToo) t.equal(path, 'scan', `${msg} (ClickHouse: aggregated directly)`)
  else t.equal(path, 'rollup', msg)
}

async function post(path: string, body: unknown) {
  const r = await postJson(s, path, body)
  return { ...r, path: r.headers.get('x-weft-stats-path') }
}

const iso = (ms: number) => new Date(ms).toISOString()

function items(c: Call) {
  const out: unknown[] = [
    {
      mode: 'start',
      req: {
        start: {
          project_id: P,
          id: c.id,
          trace_id: c.trace_id,
          parent_id: c.parent_id,
          op_name: c.op,
          started_at: iso(c.started),
          attributes: {},
          inputs: { i: c.id },
        },
      },
    },
  ]
  if (c.latency !== null) {
    out.push({
      mode: 'end',
      req: {
        end: {
          project_id: P,
          id: c.id,
          ended_at: iso(c.started + c.latency),
          output: 'ok',
          summary: { usage: c.usage },
          ...(c.error ? { exception: 'ValueError: boom' } : {}),
        },
      },
    })
  }
  return out
}

// --- the independent computation --------------------------------------------------------------

const live = () => calls.filter((c) => !c.deleted)
const sum = (xs: number[]) => xs.reduce((a, b) => a + b, 0)
function quantileCont(xs: number[], p: number): number | null {
  if (!xs.length) return null
  const v = [...xs].sort((a, b) => a - b)
  const pos = (p / 100) * (v.length - 1)
  const lo = Math.floor(pos)
  const hi = Math.ceil(pos)
  return v[lo]! + (pos - lo) * (v[hi]! - v[lo]!)
}
const inTok = (u: Record<string, number>) => (u.prompt_tokens ?? 0) + (u.input_tokens ?? 0)
const outTok = (u: Record<string, number>) => (u.completion_tokens ?? 0) + (u.output_tokens ?? 0)

function expectedCalls(bounds: number[], end: number, pick: (c: Call) => boolean = () => true) {
  return bounds.map((b, i) => {
    const hi = i + 1 < bounds.length ? bounds[i + 1]! : end
    const cs = live().filter((c) => c.started >= Math.max(b, bounds[0]!) && c.started < hi && pick(c))
    const lat = cs.filter((c) => c.latency !== null).map((c) => c.latency!)
    return {
      timestamp: iso(b),
      count: cs.length,
      sum_latency_ms: sum(lat),
      avg_latency_ms: lat.length ? sum(lat) / lat.length : 0,
      min_latency_ms: lat.length ? Math.min(...lat) : null,
      max_latency_ms: lat.length ? Math.max(...lat) : null,
      count_latency_ms: lat.length,
      p50_latency_ms: quantileCont(lat, 50),
      p95_latency_ms: quantileCont(lat, 95),
      p99_latency_ms: quantileCont(lat, 99),
      sum_call_count: cs.length,
      sum_error_count: cs.filter((c) => c.error && c.latency !== null).length,
    }
  })
}

const CALL_METRICS = [
  { metric: 'latency_ms', aggregations: ['sum', 'avg', 'min', 'max', 'count'], percentiles: [50, 95, 99] },
  { metric: 'call_count', aggregations: ['sum'] },
  { metric: 'error_count', aggregations: ['sum'] },
]

function compareCalls(t: Test, got: any[], want: ReturnType<typeof expectedCalls>, label: string) {
  t.equal(got.length, want.length, `${label}: ${want.length} buckets`)
  let bad = 0
  for (let i = 0; i < want.length; i++) {
    const g = got[i]
    const w = want[i]!
    for (const [k, v] of Object.entries(w)) {
      if (k.startsWith('p') && typeof v === 'number') {
        // Percentiles come from sketches: within 1% of the exact (interpolated) value.
        if (typeof g[k] !== 'number' || Math.abs(g[k] - v) > 0.01 * Math.abs(v) + 1e-9) {
          if (bad++ < 5) t.fail(`${label} bucket ${w.timestamp} ${k}: got ${g[k]}, want ${v} ±1%`)
        }
      } else if (typeof v === 'number' && typeof g[k] === 'number' ? Math.abs(g[k] - v) > 1e-9 * Math.max(1, Math.abs(v)) : g[k] !== v) {
        if (bad++ < 5) t.fail(`${label} bucket ${w.timestamp} ${k}: got ${JSON.stringify(g[k])}, want ${JSON.stringify(v)}`)
      }
    }
  }
  t.equal(bad, 0, `${label}: every value of every bucket matches`)
}

function hours(from: number, to: number, step = H): number[] {
  const out: number[] = []
  for (let x = from; x < to; x += step) out.push(x)
  return out
}

t.test('ingest the calls (in batches, so flushes and a compaction happen along the way)', async (t) => {
  const all = calls.flatMap(items)
  // Ends before starts in some batches: the merged view does not care.
  for (let i = 0; i < all.length; i += 37) {
    const batch = all.slice(i, i + 37)
    const r = await post('/call/upsert_batch', { batch: i % 2 ? batch.reverse() : batch })
    t.equal(r.status, 200)
    t.notOk(
      r.json.res.some((x: any) => x.error),
      'every item accepted',
    )
  }
})

t.test('hourly buckets over three days: exact sums, counts, min/max/avg; percentiles within 1%', async (t) => {
  const end = BASE + 72 * H
  const req = { project_id: P, start: iso(BASE), end: iso(end), granularity: 3600, call_metrics: CALL_METRICS }
  const r = await post('/calls/stats', req)
  t.equal(r.status, 200, r.text.slice(0, 300))
  rollupPath(t, r.path, 'answered from the rollups', true)
  t.equal(r.json.granularity, 3600)
  t.equal(r.json.timezone, 'UTC')
  compareCalls(t, r.json.call_buckets, expectedCalls(hours(BASE, end), end), 'rollup')
  // A filter the rollups do not hold (trace ids) scans; the answer is the same.
  const traces = [...new Set(calls.map((c) => c.trace_id))]
  const scanned = await post('/calls/stats', { ...req, filter: { trace_ids: traces } })
  t.equal(scanned.path, 'scan')
  compareCalls(t, scanned.json.call_buckets, expectedCalls(hours(BASE, end), end), 'scan')
})

t.test('partial hours at both ends come from the per-call tier and are added to the whole hours', async (t) => {
  const start = BASE + 90 * 60_000 + 17_000
  const end = BASE + 50 * H + 13 * 60_000
  const r = await post('/calls/stats', { project_id: P, start: iso(start), end: iso(end), granularity: 21600, call_metrics: CALL_METRICS })
  t.equal(r.status, 200)
  rollupPath(t, r.path, undefined, true)
  const bounds = hours(BASE, end, 6 * H)
  const want = expectedCalls(bounds, end).map((b, i) => (i === 0 ? expectedCalls([start, BASE + 6 * H], end)[0]! : b))
  want[0]!.timestamp = iso(BASE)
  compareCalls(t, r.json.call_buckets, want, 'partial')
  t.equal(r.json.start, iso(start), 'start as requested')
  t.equal(r.json.end, iso(end))
})

t.test('day buckets follow local midnight across a DST change (America/New_York, 2026-03-08)', async (t) => {
  const end = BASE + 80 * H
  const r = await post('/calls/stats', {
    project_id: P,
    start: iso(BASE),
    end: iso(end),
    granularity: 86400,
    timezone: 'America/New_York',
    call_metrics: CALL_METRICS,
  })
  t.equal(r.status, 200)
  // Local midnights: EST (UTC-5) until 2026-03-08 02:00, EDT (UTC-4) after: the 8th is 23 hours long.
  const bounds = [
    '2026-03-05T05:00:00.000Z',
    '2026-03-06T05:00:00.000Z',
    '2026-03-07T05:00:00.000Z',
    '2026-03-08T05:00:00.000Z',
    '2026-03-09T04:00:00.000Z',
  ].map(Date.parse)
  t.same(
    r.json.call_buckets.map((b: any) => b.timestamp),
    bounds.map(iso),
  )
  const want = expectedCalls(bounds, end)
  // The first bucket starts before the range: only calls from `start` on count (they all do: none before BASE).
  compareCalls(t, r.json.call_buckets, want, 'new york days')
  rollupPath(t, r.path, 'local midnights are whole UTC hours here', true)
  t.equal(
    sum(r.json.call_buckets.map((b: any) => b.count)),
    live().filter((c) => c.started < end).length,
    'every call in exactly one bucket',
  )
})

t.test('hour buckets in a half-hour zone (Asia/Kolkata) start at :30 UTC: answered by the per-call tier', async (t) => {
  const start = BASE + 5 * H
  const end = BASE + 29 * H
  const r = await post('/calls/stats', {
    project_id: P,
    start: iso(start),
    end: iso(end),
    granularity: 3600,
    timezone: 'Asia/Kolkata',
    call_metrics: CALL_METRICS,
  })
  t.equal(r.status, 200)
  rollupPath(t, r.path)
  const bounds = [start - 30 * 60_000, ...hours(start + 30 * 60_000, end)]
  t.same(
    r.json.call_buckets.map((b: any) => b.timestamp),
    bounds.map(iso),
  )
  const want = expectedCalls([start, ...bounds.slice(1)], end)
  want[0]!.timestamp = iso(bounds[0]!)
  compareCalls(t, r.json.call_buckets, want, 'kolkata')
})

t.test('filters the rollups hold: op names and trace roots', async (t) => {
  const end = BASE + 72 * H
  const f = { op_names: [OPS[1], OPS[3]], trace_roots_only: true }
  const r = await post('/calls/stats', {
    project_id: P,
    start: iso(BASE),
    end: iso(end),
    granularity: 43200,
    call_metrics: CALL_METRICS,
    filter: f,
  })
  rollupPath(t, r.path, undefined, true)
  compareCalls(
    t,
    r.json.call_buckets,
    expectedCalls(hours(BASE, end, 12 * H), end, (c) => f.op_names.includes(c.op) && c.parent_id === null),
    'op+roots',
  )
  const count = await post('/calls/query_stats', { project_id: P, filter: { op_names: [OPS[1]] } })
  t.same(count.json, { count: live().filter((c) => c.op === OPS[1]).length, has_more: false })
  const capped = await post('/calls/query_stats', { project_id: P, filter: { op_names: [OPS[1]] }, limit: 3 })
  t.equal(capped.json.count, 3, 'capped at limit')
})

t.test('user and run filters: the per-user tier, or the per-call tier for latency percentiles', async (t) => {
  const end = BASE + 72 * H
  const noPct = CALL_METRICS.map((m) => ({ ...m, percentiles: [] }))
  const strip = (rows: ReturnType<typeof expectedCalls>) =>
    rows.map(({ p50_latency_ms: _a, p95_latency_ms: _b, p99_latency_ms: _c, ...rest }) => rest)
  const mine = await post('/calls/stats', {
    project_id: P,
    start: iso(BASE),
    end: iso(end),
    granularity: 86400,
    call_metrics: noPct,
    filter: { svc_user_ids: ['admin'] },
  })
  rollupPath(t, mine.path, 'answered from the rollups (on ClickHouse too: its user tier)', true)
  compareCalls(t, mine.json.call_buckets, strip(expectedCalls(hours(BASE, end, 24 * H), end)) as never, 'user admin')
  const alias = await post('/calls/stats', {
    project_id: P,
    start: iso(BASE),
    end: iso(end),
    granularity: 86400,
    call_metrics: noPct,
    filter: { wb_user_ids: ['someone-else'] },
  })
  t.same(
    alias.json.call_buckets.map((b: any) => b.count),
    [0, 0, 0],
    'wb_user_ids is the same filter; nobody else wrote',
  )
  const pct = await post('/calls/stats', {
    project_id: P,
    start: iso(BASE),
    end: iso(end),
    granularity: 86400,
    call_metrics: CALL_METRICS,
    filter: { svc_user_ids: ['admin'] },
  })
  rollupPath(t, pct.path, 'latency percentiles by user come from the per-call tier (ClickHouse: the user tier’s bins)', true)
  compareCalls(t, pct.json.call_buckets, expectedCalls(hours(BASE, end, 24 * H), end), 'user admin, percentiles')
  const runs = await post('/calls/query_stats', { project_id: P, filter: { svc_run_ids: ['run-1'] } })
  t.equal(runs.json.count, 0, 'no call has a run')
})

function expectedUsage(bounds: number[], end: number, price: (model: string, started: number) => [number, number] | null) {
  const models = new Set<string>()
  for (const c of live())
    if (c.latency !== null && c.started >= bounds[0]! && c.started < end) for (const m of Object.keys(c.usage)) models.add(m)
  const rows: Record<string, unknown>[] = []
  bounds.forEach((b, i) => {
    const hi = i + 1 < bounds.length ? bounds[i + 1]! : end
    for (const m of [...models].sort()) {
      const pairs = live().filter((c) => c.latency !== null && c.started >= b && c.started < hi && c.usage[m])
      const costs = pairs
        .map((c) => price(m, c.started))
        .map((p, j) => (p ? inTok(pairs[j]!.usage[m]!) * p[0] + outTok(pairs[j]!.usage[m]!) * p[1] : null))
      const priced = costs.filter((x): x is number => x !== null)
      rows.push({
        timestamp: iso(b),
        model: m,
        count: pairs.length,
        sum_input_tokens: sum(pairs.map((c) => inTok(c.usage[m]!))),
        max_output_tokens: pairs.length ? Math.max(...pairs.map((c) => outTok(c.usage[m]!))) : null,
        sum_cache_read_input_tokens: sum(pairs.map((c) => c.usage[m]!.cache_read_input_tokens ?? 0)),
        count_cache_read_input_tokens: pairs.filter((c) => c.usage[m]!.cache_read_input_tokens !== undefined).length,
        sum_total_cost: sum(priced),
      })
    }
  })
  return rows
}

function compareRows(t: Test, got: any[], want: Record<string, unknown>[], label: string) {
  t.equal(got.length, want.length, `${label}: ${want.length} rows (every bucket × every model seen)`)
  let bad = 0
  want.forEach((w, i) => {
    for (const [k, v] of Object.entries(w)) {
      const g = got[i]?.[k]
      const ok = typeof v === 'number' ? typeof g === 'number' && Math.abs(g - v) <= 1e-9 * Math.max(1, Math.abs(v)) : g === v
      if (!ok && bad++ < 5)
        t.fail(`${label} row ${i} (${w.timestamp} ${w.model}) ${k}: got ${JSON.stringify(g)}, want ${JSON.stringify(v)}`)
    }
  })
  t.equal(bad, 0, `${label}: every row matches`)
}

const USAGE_METRICS = [
  { metric: 'input_tokens', aggregations: ['sum'] },
  { metric: 'output_tokens', aggregations: ['max'] },
  { metric: 'cache_read_input_tokens', aggregations: ['sum', 'count'] },
  { metric: 'total_cost', aggregations: ['sum'] },
]

t.test('usage per bucket and model: both token spellings summed, default prices, unpriced models cost 0', async (t) => {
  const end = BASE + 72 * H
  const r = await post('/calls/stats', { project_id: P, start: iso(BASE), end: iso(end), granularity: 21600, usage_metrics: USAGE_METRICS })
  t.equal(r.status, 200)
  rollupPath(t, r.path, undefined, true)
  t.same(r.json.call_buckets, [], 'no call metrics asked, none given')
  compareRows(
    t,
    r.json.usage_buckets,
    expectedUsage(hours(BASE, end, 6 * H), end, (m) => PRICE[m] ?? null),
    'usage',
  )
  const scanned = await post('/calls/stats', {
    project_id: P,
    start: iso(BASE),
    end: iso(end),
    granularity: 21600,
    usage_metrics: USAGE_METRICS,
    filter: { call_ids: calls.map((c) => c.id) },
  })
  t.equal(scanned.path, 'scan')
  compareRows(
    t,
    scanned.json.usage_buckets,
    expectedUsage(hours(BASE, end, 6 * H), end, (m) => PRICE[m] ?? null),
    'usage by scan',
  )
})

t.test(
  'latency one aggregation at a time, and percentiles alone (each reads only its parts of the latency), across all three tiers',
  async (t) => {
    const start = BASE + 20 * H + 7 * 60_000 + 23_456
    const end = BASE + 50 * H + 52 * 60_000 + 41_000
    const bounds = [start, ...hours(BASE + 21 * H, end, H)]
    const want = expectedCalls(bounds, end).map((w, i) => (i === 0 ? { ...w, timestamp: iso(BASE + 20 * H) } : w))
    const asks: [string, { aggregations: string[]; percentiles?: number[] }, string[]][] = [
      ...['sum', 'count', 'avg', 'min', 'max'].map(
        (agg) => [agg, { aggregations: [agg] }, [`${agg}_latency_ms`]] as [string, { aggregations: string[] }, string[]],
      ),
      ['percentiles', { aggregations: [], percentiles: [50, 95, 99] }, ['p50_latency_ms', 'p95_latency_ms', 'p99_latency_ms']],
    ]
    for (const [label, spec, keys] of asks) {
      const r = await post('/calls/stats', {
        project_id: P,
        start: iso(start),
        end: iso(end),
        granularity: 3600,
        call_metrics: [{ metric: 'latency_ms', ...spec }],
      })
      t.equal(r.status, 200)
      rollupPath(t, r.path, `${label}: answered from the rollups`, true)
      const pick = want.map((w) => Object.fromEntries(['timestamp', 'count', ...keys].map((k) => [k, (w as Record<string, unknown>)[k]])))
      compareCalls(t, r.json.call_buckets, pick as ReturnType<typeof expectedCalls>, `latency ${label}`)
      // A bucket of one call: its percentiles are its latency exactly (the estimate held to the bucket's extremes).
      const single = want.filter((w) => w.count_latency_ms === 1)
      if (label === 'percentiles') {
        t.ok(single.length > 0, 'some buckets hold one call')
        const got = new Map(r.json.call_buckets.map((b: any) => [b.timestamp, b]))
        t.ok(
          single.every((w) => keys.every((k) => (got.get(w.timestamp) as any)?.[k] === w.sum_latency_ms)),
          'one call: every percentile equals its latency',
        )
      }
    }
  },
)

/** Every aggregation of the input and output tokens per bucket and model, computed from what was sent (no prices). */
function expectedTokenAggs(bounds: number[], end: number, agg: string) {
  const rows = expectedUsage(bounds, end, () => null)
  return rows.map((r) => {
    const i = bounds.indexOf(Date.parse(String(r.timestamp)))
    const hi = i + 1 < bounds.length ? bounds[i + 1]! : end
    const m = String(r.model)
    const pairs = live().filter((c) => c.latency !== null && c.started >= bounds[i]! && c.started < hi && c.usage[m])
    const out: Record<string, unknown> = { timestamp: r.timestamp, model: m, count: pairs.length }
    for (const [name, tok] of [
      ['input_tokens', inTok],
      ['output_tokens', outTok],
    ] as const) {
      const xs = pairs.map((c) => tok(c.usage[m]!))
      out[`${agg}_${name}`] = {
        sum: sum(xs),
        count: xs.length,
        avg: xs.length ? sum(xs) / xs.length : 0,
        min: xs.length ? Math.min(...xs) : null,
        max: xs.length ? Math.max(...xs) : null,
      }[agg]
    }
    return out
  })
}

t.test(
  'usage without costs, one aggregation at a time (each reads only its parts of the token columns), across all three tiers',
  async (t) => {
    // Mid-minute ends: the hour, minute and per-call tiers all answer part of the range.
    const start = BASE + 20 * H + 7 * 60_000 + 23_456
    const end = BASE + 50 * H + 52 * 60_000 + 41_000
    const bounds = hours(BASE + 18 * H, end, 6 * H)
    for (const agg of ['sum', 'count', 'avg', 'min', 'max']) {
      const metrics = ['input_tokens', 'output_tokens'].map((metric) => ({ metric, aggregations: [agg] }))
      const r = await post('/calls/stats', { project_id: P, start: iso(start), end: iso(end), granularity: 21600, usage_metrics: metrics })
      t.equal(r.status, 200)
      rollupPath(t, r.path, `${agg}: answered from the rollups`, true)
      const want = expectedTokenAggs([start, ...bounds.slice(1)], end, agg).map((w) =>
        w.timestamp === iso(start) ? { ...w, timestamp: iso(bounds[0]!) } : w,
      )
      compareRows(t, r.json.usage_buckets, want, `tokens ${agg}`)
    }
  },
)

t.test('partial hours cut mid-minute: whole minutes from the minute tier, partial minutes from the per-call tier', async (t) => {
  const start = BASE + 40 * H + 7 * 60_000 + 23_456
  const end = BASE + 41 * H + 52 * 60_000 + 41_000
  for (const granularity of [3600, 900]) {
    const first = BASE + 40 * H
    const bounds = hours(first, end, granularity * 1000)
    const r = await post('/calls/stats', {
      project_id: P,
      start: iso(start),
      end: iso(end),
      granularity,
      call_metrics: CALL_METRICS,
      usage_metrics: USAGE_METRICS,
    })
    t.equal(r.status, 200)
    rollupPath(t, r.path)
    const want = expectedCalls([start, ...bounds.slice(1)], end)
    want[0]!.timestamp = iso(first)
    compareCalls(t, r.json.call_buckets, want, `calls, ${granularity} s buckets`)
    const usage = expectedUsage([start, ...bounds.slice(1)], end, (m) => PRICE[m] ?? null).map((u) =>
      u.timestamp === iso(start) ? { ...u, timestamp: iso(first) } : u,
    )
    compareRows(t, r.json.usage_buckets, usage, `usage, ${granularity} s buckets`)
    const roots = await post('/calls/stats', {
      project_id: P,
      start: iso(start),
      end: iso(end),
      granularity,
      call_metrics: CALL_METRICS,
      filter: { trace_roots_only: true },
    })
    const wantRoots = expectedCalls([start, ...bounds.slice(1)], end, (c) => c.parent_id === null)
    wantRoots[0]!.timestamp = iso(first)
    compareCalls(t, roots.json.call_buckets, wantRoots, `trace roots, ${granularity} s buckets`)
  }
})

t.test('3-hour buckets in Asia/Kolkata: hours and minute runs interleave (more runs than branches)', async (t) => {
  const start = BASE
  const end = BASE + 72 * H
  const r = await post('/calls/stats', {
    project_id: P,
    start: iso(start),
    end: iso(end),
    granularity: 10800,
    timezone: 'Asia/Kolkata',
    call_metrics: CALL_METRICS,
    usage_metrics: USAGE_METRICS,
  })
  t.equal(r.status, 200)
  rollupPath(t, r.path, undefined, true)
  const bounds = r.json.call_buckets.map((b: any) => Date.parse(b.timestamp))
  t.ok(bounds.length >= 24 && bounds.slice(1).every((b: number) => b % H === 30 * 60_000), 'buckets start at :30 UTC')
  const want = expectedCalls([start, ...bounds.slice(1)], end)
  want[0]!.timestamp = iso(bounds[0])
  compareCalls(t, r.json.call_buckets, want, 'kolkata 3 h')
  const usage = expectedUsage([start, ...bounds.slice(1)], end, (m) => PRICE[m] ?? null).map((u) =>
    u.timestamp === iso(start) ? { ...u, timestamp: iso(bounds[0]) } : u,
  )
  compareRows(t, r.json.usage_buckets, usage, 'kolkata 3 h usage')
})

t.test('a project price from a mid-hour effective date applies to calls from then on', async (t) => {
  const from = BASE + 30 * H + 20 * 60_000
  const created = await post('/cost/create', {
    project_id: P,
    costs: {
      'gpt-4o': { prompt_token_cost: 1e-5, completion_token_cost: 2e-5, effective_date: iso(from) },
      'in-house-model': { prompt_token_cost: 1e-7, completion_token_cost: 1e-7, effective_date: iso(BASE - 24 * H) },
    },
  })
  t.equal(created.status, 200, created.text)
  t.equal(created.json.ids.length, 2)
  t.same(created.json.ids.map((x: string[]) => x[1]).sort(), ['gpt-4o', 'in-house-model'])
  const price = (m: string, at: number): [number, number] | null => {
    if (m === 'gpt-4o') return at >= from ? [1e-5, 2e-5] : PRICE[m]!
    if (m === 'in-house-model') return [1e-7, 1e-7]
    return PRICE[m] ?? null
  }
  const end = BASE + 72 * H
  const r = await post('/calls/stats', { project_id: P, start: iso(BASE), end: iso(end), granularity: 21600, usage_metrics: USAGE_METRICS })
  rollupPath(t, r.path, 'still the rollups: the hour holding the price change is scanned', true)
  compareRows(t, r.json.usage_buckets, expectedUsage(hours(BASE, end, 6 * H), end, price), 'usage with project prices')
  const q = await post('/cost/query', { project_id: P })
  t.equal(q.json.results.length, 2)
  t.same(q.json.results.map((x: any) => x.llm_id).sort(), ['gpt-4o', 'in-house-model'])
  const fields = await post('/cost/query', {
    project_id: P,
    fields: ['llm_id', 'prompt_token_cost'],
    query: { $expr: { $eq: [{ $getField: 'llm_id' }, { $literal: 'gpt-4o' }] } },
  })
  t.same(fields.json.results, [{ llm_id: 'gpt-4o', prompt_token_cost: 1e-5 }])
  t.equal(
    (await post('/cost/purge', { project_id: P, query: { $expr: { $eq: [{ $getField: 'llm_id' }, { $literal: 'gpt-4o' }] } } })).status,
    400,
    'purge only by id',
  )
  const inHouse = q.json.results.find((x: any) => x.llm_id === 'in-house-model').id
  t.equal(
    (await post('/cost/purge', { project_id: P, query: { $expr: { $in: [{ $getField: 'id' }, [{ $literal: inHouse }]] } } })).status,
    200,
  )
  t.same(
    (await post('/cost/query', { project_id: P })).json.results.map((x: any) => x.llm_id),
    ['gpt-4o'],
  )
  t.same((await post('/cost/query', { project_id: 'other/project' })).json.results, [], "another project's prices are its own")
})

t.test('include_costs on reads: the price in effect when the call started; none for unpriced or unfinished calls', async (t) => {
  const priced = live().find((c) => c.latency !== null && c.usage['gpt-4o'] && c.started >= BASE + 31 * H)!
  const r = await post('/call/read', { project_id: P, id: priced.id, include_costs: true })
  const costs = r.json.call.summary.weave.costs
  t.ok(costs['gpt-4o'], 'costs for the priced model')
  t.equal(costs['gpt-4o'].prompt_token_cost, 1e-5, 'the project price, effective before the call started')
  t.equal(costs['gpt-4o'].pricing_level, 'project')
  const u = priced.usage['gpt-4o']!
  t.equal(costs['gpt-4o'].prompt_tokens_total_cost, (u.prompt_tokens ?? u.input_tokens!) * 1e-5)
  t.notOk(costs['in-house-model'], 'the purged price is gone')
  const early = live().find((c) => c.latency !== null && c.usage['gpt-4o'] && c.started < BASE + 29 * H)!
  const e = await post('/calls/stream_query', { project_id: P, filter: { call_ids: [early.id] }, include_costs: true })
  const call = JSON.parse(e.text.trim())
  t.equal(call.summary.weave.costs['gpt-4o'].prompt_token_cost, 2.5e-6, 'before the project price: the default book')
  t.equal(call.summary.weave.costs['gpt-4o'].pricing_level, 'default')
  const plain = await post('/call/read', { project_id: P, id: priced.id })
  t.notOk(plain.json.call.summary.weave.costs, 'no costs unless asked')
  const running = live().find((c) => c.latency === null)!
  t.notOk(
    (await post('/call/read', { project_id: P, id: running.id, include_costs: true })).json.call.summary.weave.costs,
    'an unfinished call has no costs',
  )
})

t.test('empty ranges: every bucket present, zero-filled; min, max and percentiles null', async (t) => {
  const start = Date.parse('2025-01-01T00:00:00Z')
  const r = await post('/calls/stats', {
    project_id: P,
    start: iso(start),
    end: iso(start + 2 * H),
    call_metrics: CALL_METRICS,
    usage_metrics: USAGE_METRICS,
  })
  t.equal(r.status, 200)
  t.equal(r.json.granularity, 300, 'two hours: 5-minute buckets')
  t.equal(r.json.call_buckets.length, 24)
  t.same(r.json.call_buckets[0], {
    timestamp: iso(start),
    sum_latency_ms: 0,
    avg_latency_ms: 0,
    min_latency_ms: null,
    max_latency_ms: null,
    count_latency_ms: 0,
    p50_latency_ms: null,
    p95_latency_ms: null,
    p99_latency_ms: null,
    sum_call_count: 0,
    sum_error_count: 0,
    count: 0,
  })
  t.same(r.json.usage_buckets, [], 'no model seen in range, no usage rows')
})

t.test('granularity: chosen from the range, raised past 10,000 buckets', async (t) => {
  const cases: [number, number | undefined, number][] = [
    [2 * H, undefined, 300],
    [12 * H, undefined, 3600],
    [3 * 24 * H, undefined, 21600],
    [14 * 24 * H, undefined, 43200],
    [30 * 24 * H, undefined, 86400],
    [30 * 24 * H, 60, 260],
  ]
  for (const [span, g, want] of cases) {
    const r = await post('/calls/stats', {
      project_id: P,
      start: iso(BASE),
      end: iso(BASE + span),
      granularity: g,
      call_metrics: [{ metric: 'call_count' }],
    })
    t.equal(r.json.granularity, want, `${span / H} h${g ? ` asked ${g} s` : ''} → ${want} s`)
    t.ok(r.json.call_buckets.length <= 10_000)
  }
})

t.test('deletes after the data is in the rollups are subtracted at once, min/max stay exact', async (t) => {
  // The calls with the largest and smallest latencies of the first day (and their descendants).
  const day = live().filter((c) => c.started < BASE + 24 * H && c.latency !== null)
  const extremes = [day.reduce((a, b) => (a.latency! > b.latency! ? a : b)), day.reduce((a, b) => (a.latency! < b.latency! ? a : b))]
  const r = await post('/calls/delete', { project_id: P, call_ids: extremes.map((c) => c.id) })
  t.equal(r.status, 200)
  // Descendants go too.
  const gone = new Set(extremes.map((c) => c.id))
  for (let grew = true; grew;) {
    grew = false
    for (const c of calls) if (c.parent_id && gone.has(c.parent_id) && !gone.has(c.id)) (gone.add(c.id), (grew = true))
  }
  for (const c of calls) if (gone.has(c.id)) c.deleted = true
  t.equal(r.json.num_deleted, gone.size)
  const end = BASE + 72 * H
  const got = await post('/calls/stats', { project_id: P, start: iso(BASE), end: iso(end), granularity: 86400, call_metrics: CALL_METRICS })
  compareCalls(t, got.json.call_buckets, expectedCalls(hours(BASE, end, 24 * H), end), 'after deletes')
  const count = await post('/calls/query_stats', { project_id: P })
  t.equal(count.json.count, live().length)
})

t.test('a call acknowledged a moment ago is counted at once', async (t) => {
  const c: Call = {
    id: uuid(9_999),
    trace_id: uuid(199_999),
    parent_id: null,
    op: OPS[0]!,
    user: 'admin',
    started: BASE + 5 * H + 1234,
    latency: 77_777,
    error: false,
    usage: { 'gpt-4o': { prompt_tokens: 5, completion_tokens: 6 } },
  }
  const before = (await post('/calls/query_stats', { project_id: P, filter: { op_names: [OPS[0]] } })).json.count
  const r = await post('/call/upsert_batch', { batch: items(c) })
  t.equal(r.status, 200)
  calls.push(c)
  t.equal((await post('/calls/query_stats', { project_id: P, filter: { op_names: [OPS[0]] } })).json.count, before + 1)
  const end = BASE + 72 * H
  const got = await post('/calls/stats', { project_id: P, start: iso(BASE), end: iso(end), granularity: 86400, call_metrics: CALL_METRICS })
  // (min/max after the deletes above are scanned until a compaction: the path may be either.)
  compareCalls(t, got.json.call_buckets, expectedCalls(hours(BASE, end, 24 * H), end), 'with the new call')
  const sums = await post('/calls/stats', {
    project_id: P,
    start: iso(BASE),
    end: iso(end),
    granularity: 86400,
    call_metrics: [{ metric: 'call_count' }],
  })
  rollupPath(t, sums.path, 'counts: the rollups plus the fresh correction', true)
  t.equal(sums.json.call_buckets[0].sum_call_count, live().filter((x) => x.started < BASE + 24 * H).length)
  // The rollups and their /admin/stats entry are the embedded store's; ClickHouse has none to show.
  if (!ON_CLICKHOUSE) {
    const admin = (await (await fetch(s.url + '/admin/stats', { headers: s.basic() })).json()) as {
      rollups: { ready: boolean; origin: string; x: number; parts_past_x: number }
    }
    t.match(admin.rollups, { ready: true, origin: /^(loaded|rebuilt)$/, x: Number, parts_past_x: Number }, '/admin/stats shows the rollups')
  }
  t.equal(got.json.call_buckets[0].max_latency_ms, 77_777, 'its latency is the new maximum')
})

t.test('query_stats: storage size of the matching traces', async (t) => {
  const r = await post('/calls/query_stats', { project_id: P, filter: { trace_roots_only: true }, include_total_storage_size: true })
  t.equal(r.status, 200)
  t.equal(r.json.count, live().filter((c) => c.parent_id === null).length)
  t.ok(r.json.total_storage_size_bytes > 0, `${r.json.total_storage_size_bytes} bytes`)
  const none = await post('/calls/query_stats', {
    project_id: P,
    filter: { op_names: ['weave:///acme/stats/op/none:v1'] },
    include_total_storage_size: true,
  })
  t.same(none.json, { count: 0, has_more: false, total_storage_size_bytes: 0 })
})

t.test('bad input: the reference errors, and nothing changes', async (t) => {
  const ok = { project_id: P, start: iso(BASE), end: iso(BASE + H), call_metrics: [{ metric: 'call_count' }] }
  const cases: [string, Record<string, unknown>, number, RegExp?][] = [
    ['range over 31 days', { end: iso(BASE + 32 * 24 * H) }, 422, /31 days/],
    ['start after end', { start: iso(BASE + 2 * H) }, 400, /before end/],
    ['unknown timezone', { timezone: 'Mars/Olympus_Mons' }, 400, /timezone/],
    ['percentile over 100', { call_metrics: [{ metric: 'latency_ms', percentiles: [101] }] }, 400, /\[0, 100\]/],
    ['negative percentile', { call_metrics: [{ metric: 'latency_ms', percentiles: [-1] }] }, 400],
    ['unknown metric', { call_metrics: [{ metric: 'tokens_per_second' }] }, 422],
    ['unknown aggregation', { call_metrics: [{ metric: 'latency_ms', aggregations: ['median'] }] }, 422],
    ['aggregation not offered', { call_metrics: [{ metric: 'latency_ms', aggregations: ['count_true'] }] }, 400],
    ['granularity 0', { granularity: 0 }, 422],
    ['not a timestamp', { start: 'yesterday' }, 422],
  ]
  for (const [what, change, status, msg] of cases) {
    const r = await post('/calls/stats', { ...ok, ...change })
    t.equal(r.status, status, `${what} → ${status}`)
    if (msg) t.match(r.text, msg, what)
  }
  t.equal((await post('/calls/query_stats', { project_id: P, limit: 0 })).status, 400, 'query_stats limit 0 → 400')
  t.equal((await post('/calls/query_stats', { project_id: P, limit: -1 })).status, 400, 'query_stats limit -1 → 400')
  t.equal(
    (await post('/cost/create', { project_id: P, costs: { x: { prompt_token_cost: -1, completion_token_cost: 0 } } })).status,
    422,
    'negative price',
  )
  t.equal((await post('/cost/query', { project_id: P, sort_by: [{ field: 'nope', direction: 'asc' }] })).status, 400, 'unknown cost field')
  t.equal((await post('/calls/stats', { ...ok, filter: { op_names: ["x' OR 1=1 --"] } })).status, 200, 'hostile filter strings are values')
  const many = Array.from({ length: 1001 }, (_, i) => `weave:///acme/stats/op/o${i}:v1`)
  t.equal(
    (await post('/calls/stats', { ...ok, filter: { op_names: many } })).status,
    400,
    'over 1000 op names: 400, on the rollup path too',
  )
  t.equal((await post('/calls/query_stats', { project_id: P, filter: { svc_user_ids: many } })).status, 400, 'over 1000 user ids: 400')
})
