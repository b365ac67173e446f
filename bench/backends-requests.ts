/**
 * The requests the both-backends bench sends to each server, and how their answers are compared.
 * Statistics as a dashboard asks for them (counts, errors, latency percentiles, token usage; with and
 * without filters, by op and by user; daily, 6-hourly, hourly buckets; a half-hour time zone), counts, pages of calls
 * (newest first, an op filter and a `$expr`, the first page and a deep one), one trace's calls, usage.
 */

export interface BenchRequest {
  path: string
  body: Record<string, unknown>
  /** `/calls/stream_query`: the answer is JSON lines. */
  lines?: boolean
}

export interface RequestContext {
  project: string
  op: string
  /** The user the calls were sent as (the bench key's: every call). The generator makes no runs, so no run filter. */
  user: string
  /** The statistics ranges end here (a whole second after the newest call). */
  end: number
  roots: string[]
  traceId: string
  /** Offset of the deep page (9/10 of the matches). */
  deepOffset: number
}

const DAY = 86_400_000
const iso = (ms: number) => new Date(ms).toISOString()
const USAGE = ['input_tokens', 'output_tokens', 'total_tokens'].map((metric) => ({ metric, aggregations: ['sum'] }))
const CALLS = [
  { metric: 'latency_ms', aggregations: ['avg', 'max'], percentiles: [50, 95, 99] },
  { metric: 'call_count', aggregations: ['sum'] },
  { metric: 'error_count', aggregations: ['sum'] },
]
const COUNTS = [{ metric: 'call_count', aggregations: ['sum'] }]
const COSTS = ['input_cost', 'output_cost', 'total_cost'].map((metric) => ({ metric, aggregations: ['sum', 'avg'] }))
/**
 * The page a trace UI asks for: one op, slow calls, newest first, 100 of them. Only `started_at`: that is
 * the order the embedded page index serves (another key would measure its merge path); both backends
 * break ties by id, and `tiesById` puts equal start times in one order before answers are compared.
 */
const SLOW = { $expr: { $gt: [{ $getField: 'summary.weave.latency_ms' }, { $literal: 1000 }] } }
const NEWEST = [{ field: 'started_at', direction: 'desc' }]

/** The page's filter and `$expr`, also counted to place the deep page. */
export const pageFilter = (c: Pick<RequestContext, 'project' | 'op'>) => ({
  project_id: c.project,
  filter: { op_names: [c.op] },
  query: SLOW,
})

export function benchRequests(c: RequestContext): Record<string, BenchRequest> {
  const stats = (days: number, g: number, extra: Record<string, unknown>) => ({
    path: '/calls/stats',
    body: { project_id: c.project, start: iso(c.end - days * DAY), end: iso(c.end), granularity: g, ...extra },
  })
  const page = pageFilter(c)
  return {
    stats_30d_daily: stats(30, 86_400, { usage_metrics: USAGE, call_metrics: CALLS }),
    stats_24h_hourly: stats(1, 3600, { usage_metrics: USAGE, call_metrics: CALLS }),
    stats_7d_6h_op: stats(7, 21_600, { usage_metrics: USAGE, call_metrics: CALLS, filter: { op_names: [c.op] } }),
    stats_7d_6h_user: stats(7, 21_600, { usage_metrics: USAGE, call_metrics: CALLS, filter: { svc_user_ids: [c.user] } }),
    stats_30d_costs: stats(30, 86_400, { usage_metrics: COSTS }),
    stats_7d_usage_pcts: stats(7, 86_400, {
      usage_metrics: [{ metric: 'total_tokens', aggregations: ['avg', 'min', 'max'], percentiles: [50, 90] }],
    }),
    counts_30d_daily: stats(30, 86_400, { call_metrics: COUNTS }),
    counts_30d_roots_op: stats(30, 86_400, { call_metrics: COUNTS, filter: { op_names: [c.op], trace_roots_only: true } }),
    counts_7d_hourly_kolkata: stats(7, 3600, { call_metrics: COUNTS, timezone: 'Asia/Kolkata' }),
    query_stats_all: { path: '/calls/query_stats', body: { project_id: c.project } },
    query_stats_op_expr: { path: '/calls/query_stats', body: page },
    page_first: { path: '/calls/stream_query', lines: true, body: { ...page, sort_by: NEWEST, limit: 100 } },
    page_deep: { path: '/calls/stream_query', lines: true, body: { ...page, sort_by: NEWEST, limit: 100, offset: c.deepOffset } },
    trace_calls: {
      path: '/calls/stream_query',
      lines: true,
      body: {
        project_id: c.project,
        filter: { trace_ids: [c.traceId] },
      },
    },
    usage_100_roots: { path: '/calls/usage', body: { project_id: c.project, call_ids: c.roots } },
    trace_usage: { path: '/trace/usage', body: { project_id: c.project, filter: { trace_ids: [c.traceId] } } },
  }
}

/** Calls of an answer with equal start times put in id order, so a tie ordered either way compares equal. */
export function tiesById(calls: { id: string; started_at: string }[]): { id: string; started_at: string }[] {
  const out = [...calls]
  for (let i = 0; i < out.length;) {
    let j = i + 1
    while (j < out.length && out[j]!.started_at === out[i]!.started_at) j++
    if (j - i > 1) out.splice(i, j - i, ...out.slice(i, j).sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0)))
    i = j
  }
  return out
}

/**
 * Where two answers differ (the first few): numbers equal to 1e-9 relative (the engines add floating
 * point in different orders), everything else exactly, arrays in order (the requests sort with ties broken).
 */
export function differences(a: unknown, b: unknown, max = 5): string[] {
  const out: string[] = []
  const walk = (x: unknown, y: unknown, at: string): void => {
    if (out.length >= max) return
    if (typeof x === 'number' && typeof y === 'number') {
      if (Math.abs(x - y) > 1e-9 * Math.max(1, Math.abs(x), Math.abs(y))) out.push(`${at}: ${x} vs ${y}`)
    } else if (Array.isArray(x) && Array.isArray(y)) {
      if (x.length !== y.length) out.push(`${at}: ${x.length} vs ${y.length} items`)
      for (let i = 0; i < Math.min(x.length, y.length); i++) walk(x[i], y[i], `${at}[${i}]`)
    } else if (x && y && typeof x === 'object' && typeof y === 'object' && !Array.isArray(x) && !Array.isArray(y)) {
      for (const k of new Set([...Object.keys(x), ...Object.keys(y)]))
        walk((x as Record<string, unknown>)[k], (y as Record<string, unknown>)[k], `${at}.${k}`)
    } else if (x !== y) out.push(`${at}: ${JSON.stringify(x)?.slice(0, 120)} vs ${JSON.stringify(y)?.slice(0, 120)}`)
  }
  walk(a, b, '')
  return out
}
