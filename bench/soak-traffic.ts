/** The soak's clients: each route's loop, and what every answer was (latency, status) by route. */
import { Tally, ingestLoop, type IngestState } from '../src/bench/trace-load.js'
import type { TraceOptions } from '../src/bench/trace-options.js'

/** Statuses a server under load is meant to answer (too many requests, busy): counted apart from errors. */
export const INTENDED = new Set([429, 503])

/** One route's answers: latency (ms), when each came (s since the start) and the statuses ('network' for no answer). */
export class RouteLog {
  readonly ms: number[] = []
  readonly at: number[] = []
  readonly statuses: Record<string, number> = {}
  readonly samples: string[] = []
  /** How `/calls/stats` answers were computed (their `x-weft-stats-path`: rollup, scan, ...), counted. */
  readonly statsPaths: Record<string, number> = {}
  record(t0: number, started: number, status: number | 'network', detail?: string, statsPath?: string | null): void {
    const now = performance.now()
    this.ms.push(now - started)
    this.at.push((now - t0) / 1000)
    this.statuses[status] = (this.statuses[status] ?? 0) + 1
    if (statsPath) this.statsPaths[statsPath] = (this.statsPaths[statsPath] ?? 0) + 1
    const ok = typeof status === 'number' && status < 400
    if (!ok && detail && this.samples.length < 5) this.samples.push(`${status}: ${detail.slice(0, 200)}`)
  }
}

export interface Ctx {
  url: string
  headers: Record<string, string>
  project: string
  objectId: string
  tableDigest: string
  tableRows: number
  t0: number
  state: { stop: boolean }
  logs: Map<string, RouteLog>
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms))

function log(c: Ctx, route: string): RouteLog {
  let l = c.logs.get(route)
  if (!l) c.logs.set(route, (l = new RouteLog()))
  return l
}

/** One POST, its whole answer read (streamed ones too), timed and logged under `route`. */
async function post(c: Ctx, route: string, path: string, body: unknown): Promise<void> {
  const started = performance.now()
  try {
    const res = await fetch(c.url + path, {
      method: 'POST',
      headers: { ...c.headers, 'content-type': 'application/json' },
      body: JSON.stringify(body),
    })
    const text = await res.text()
    log(c, route).record(c.t0, started, res.status, text, res.headers.get('x-weft-stats-path'))
  } catch (e) {
    log(c, route).record(c.t0, started, 'network', (e as Error).message)
  }
}

/** Repeats `fn` every `everyMs` (from start to start) until the soak stops. */
async function every(c: Ctx, everyMs: number, fn: (i: number) => Promise<void>): Promise<void> {
  for (let i = 0; !c.state.stop; i++) {
    const next = performance.now() + everyMs
    await fn(i)
    while (!c.state.stop && performance.now() < next) await sleep(Math.min(200, next - performance.now()))
  }
}

const hourAgo = () => new Date(Date.now() - 3600_000).toISOString()

/** The reads a dashboard and an SDK make while ingest runs, and chat streams from the built-in tiny model. */
export function readers(c: Ctx): Promise<void>[] {
  const p = c.project
  return [
    every(c, 1000, () =>
      post(c, 'calls/stream_query', '/calls/stream_query', {
        project_id: p,
        limit: 100,
        sort_by: [{ field: 'started_at', direction: 'desc' }],
      }),
    ),
    every(c, 2000, () => post(c, 'calls/query_stats', '/calls/query_stats', { project_id: p })),
    every(c, 2000, () =>
      post(c, 'calls/stats', '/calls/stats', {
        project_id: p,
        start: hourAgo(),
        call_metrics: [{ metric: 'latency_ms', aggregations: ['avg'], percentiles: [50, 99] }, { metric: 'call_count' }],
        usage_metrics: [{ metric: 'total_tokens' }],
      }),
    ),
    every(c, 1000, () => post(c, 'obj/read', '/obj/read', { project_id: p, object_id: c.objectId, digest: 'latest' })),
    every(c, 1000, (i) =>
      post(c, 'table/query', '/table/query', {
        project_id: p,
        digest: c.tableDigest,
        limit: 100,
        offset: (i * 100) % Math.max(1, c.tableRows - 100),
      }),
    ),
    every(c, 500, (i) =>
      post(c, 'chat stream', '/v1/chat/completions', {
        model: 'weft-tiny',
        messages: [{ role: 'user', content: `soak question ${i}` }],
        max_tokens: 32,
        stream: true,
      }),
    ),
  ]
}

/** Ingest paced at `rate` calls/s over `connections`, until the soak stops: `weft bench trace`'s own loop. */
export function ingest(c: Ctx, o: TraceOptions): { state: IngestState; done: Promise<void> } {
  const state: IngestState = { acked: 0, ackedPerSecond: [], offered: 0, stop: false, tally: new Tally(c.t0) }
  const stopper = setInterval(() => c.state.stop && (state.stop = true), 100)
  const done = Promise.all(Array.from({ length: o.connections }, () => ingestLoop(o, state, c.headers, c.t0))).then(() =>
    clearInterval(stopper),
  )
  return { state, done }
}

/** The ingest tally as a route log: statuses from its error strings ("HTTP 429: …"), 200 otherwise. */
export function ingestLog(t: Tally): RouteLog {
  const l = new RouteLog()
  l.ms.push(...t.ms)
  l.at.push(...t.at)
  for (const e of t.errors) {
    const m = /^HTTP (\d+)/.exec(e)
    const status = m ? m[1]! : /refused/.test(e) ? 'refused in body' : 'network'
    l.statuses[status] = (l.statuses[status] ?? 0) + 1
    if (l.samples.length < 5) l.samples.push(e.slice(0, 200))
  }
  l.statuses['200'] = (l.statuses['200'] ?? 0) + t.ms.length - t.errors.length
  return l
}
