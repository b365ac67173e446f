import { uuidv7 } from './random.js'
import { batchItems, type CallRecord } from './trace-sink.js'
import type { TraceOptions } from './trace-options.js'

/** Latencies (ms) and failures of one kind of request, and when each answer came (s since `t0`, for plots over time). */
export class Tally {
  readonly ms: number[] = []
  readonly errors: string[] = []
  readonly at: number[] = []
  constructor(readonly t0 = performance.now()) {}
  record(ms: number, error: string | null): void {
    this.ms.push(ms)
    this.at.push((performance.now() - this.t0) / 1000)
    if (error) this.errors.push(error)
  }
}

const MODELS = ['gpt-4o', 'claude-3-5-sonnet', 'llama-3.1-70b', 'gemini-1.5-pro', 'mistral-large']

/**
 * A batch's JSON with holes for the ids and times, made once: filling it is a join, so the load generator spends
 * its CPU on sending, not on serializing (~2 MB per batch of 1,000 calls of 1 KB).
 */
function template(o: TraceOptions): string[] {
  const calls: CallRecord[] = []
  for (let i = 0; i < o.batchSize; i++) {
    const model = MODELS[i % Math.min(o.models, MODELS.length)]!
    calls.push({
      id: `@@ID${i}@@`,
      started: 0,
      ended: 0,
      opName: 'weave:///bench/trace/op/chat:v1',
      inputs: { model, messages: [{ role: 'user', content: 'q'.repeat(o.payloadBytes) }] },
      output: { content: 'a'.repeat(o.payloadBytes) },
      attributes: { weave: { source: 'weft bench trace' } },
      summary: { usage: { [model]: { requests: 1, prompt_tokens: 250, completion_tokens: 120, total_tokens: 370 } } },
      exception: null,
    })
  }
  const json = JSON.stringify({ batch: batchItems(o.project, '@@TRACE@@', null, calls) })
  return json.replaceAll(new Date(0).toISOString(), '@@T@@').split(/@@(ID\d+|TRACE|T)@@/)
}

const templates = new WeakMap<TraceOptions, string[]>()

/** One batch of fresh calls (new ids every time), each with about `payloadBytes` of inputs and of output. */
export function ingestBody(o: TraceOptions): string {
  let parts = templates.get(o)
  if (!parts) templates.set(o, (parts = template(o)))
  const now = Date.now()
  const at = new Date(now).toISOString()
  const ids = Array.from({ length: o.batchSize }, () => uuidv7(now))
  const trace = uuidv7(now).replaceAll('-', '')
  // split() with a capture group leaves the holes' names at the odd places.
  return parts.map((p, i) => (i % 2 === 0 ? p : p === 'TRACE' ? trace : p === 'T' ? at : ids[Number(p.slice(2))]!)).join('')
}

/** Calls the server acknowledged in a batch: both parts answered without an error (every call on a 2xx without per-item results). */
export function acknowledged(body: unknown, calls: number): number {
  const res = (body as { res?: unknown[] } | null)?.res
  if (!Array.isArray(res)) return calls
  let ok = 0
  for (let i = 0; i + 1 < res.length; i += 2) {
    const bad = (x: unknown) => x !== null && typeof x === 'object' && 'error' in x
    if (!bad(res[i]) && !bad(res[i + 1])) ok++
  }
  return ok
}

export interface IngestState {
  acked: number
  /** Calls acknowledged in each whole second since the start (index: second). */
  ackedPerSecond: number[]
  offered: number
  stop: boolean
  tally: Tally
}

/** One connection's loop: post a batch, wait for its answer, again, paced by the rate shared by all connections. */
export async function ingestLoop(o: TraceOptions, s: IngestState, headers: Record<string, string>, t0: number): Promise<void> {
  while (!s.stop && (o.count === null || s.offered < o.count)) {
    const seq = s.offered
    s.offered += o.batchSize
    const due = t0 + (seq / o.rate) * 1000
    if (Number.isFinite(o.rate) && due > performance.now()) await new Promise((r) => setTimeout(r, due - performance.now()))
    if (s.stop) break
    const body = ingestBody(o)
    const start = performance.now()
    let error: string | null = null
    try {
      const res = await fetch(o.baseUrl + '/call/upsert_batch', {
        method: 'POST',
        headers: { ...headers, 'content-type': 'application/json' },
        body,
      })
      const text = await res.text()
      if (!res.ok) error = `HTTP ${res.status}: ${text.slice(0, 200)}`
      else {
        const n = acknowledged(JSON.parse(text), o.batchSize)
        s.acked += n
        const sec = Math.floor((performance.now() - t0) / 1000)
        s.ackedPerSecond[sec] = (s.ackedPerSecond[sec] ?? 0) + n
        if (n < o.batchSize) error = `${o.batchSize - n} of ${o.batchSize} calls refused: ${text.slice(0, 200)}`
      }
    } catch (e) {
      error = (e as Error).message
    }
    s.tally.record(performance.now() - start, error)
  }
}

/** One read while ingest runs: its latency and failure into the tally. */
async function timedPost(url: string, body: unknown, headers: Record<string, string>, tally: Tally): Promise<void> {
  const start = performance.now()
  let error: string | null = null
  try {
    const res = await fetch(url, {
      method: 'POST',
      headers: { ...headers, 'content-type': 'application/json' },
      body: JSON.stringify(body),
    })
    const text = await res.text()
    if (!res.ok) error = `HTTP ${res.status}: ${text.slice(0, 200)}`
  } catch (e) {
    error = (e as Error).message
  }
  tally.record(performance.now() - start, error)
}

/** The reads dashboards make while ingest runs: the newest page of calls, and an hour of statistics. */
export async function readLoop(
  o: TraceOptions,
  s: IngestState,
  headers: Record<string, string>,
  pages: Tally,
  stats: Tally,
): Promise<void> {
  if (o.queryInterval <= 0) return
  while (!s.stop) {
    const next = performance.now() + o.queryInterval * 1000
    await Promise.all([
      timedPost(
        o.baseUrl + '/calls/stream_query',
        { project_id: o.project, limit: 100, sort_by: [{ field: 'started_at', direction: 'desc' }] },
        headers,
        pages,
      ),
      timedPost(
        o.baseUrl + '/calls/stats',
        {
          project_id: o.project,
          start: new Date(Date.now() - 3600_000).toISOString(),
          call_metrics: [{ metric: 'latency_ms', aggregations: ['avg'], percentiles: [50, 99] }, { metric: 'call_count' }],
          usage_metrics: [{ metric: 'total_tokens' }],
        },
        headers,
        stats,
      ),
    ])
    const wait = next - performance.now()
    if (wait > 0 && !s.stop) await new Promise((r) => setTimeout(r, wait))
  }
}
