import { postJson, traceAuth } from './http.js'
import { uuidv7 } from './random.js'

/** A call as the parts /call/upsert_batch takes: its start and its end. */
export interface CallRecord {
  id: string
  started: number
  ended: number
  opName: string
  inputs: Record<string, unknown>
  output: unknown
  attributes: Record<string, unknown>
  summary: Record<string, unknown>
  exception: string | null
}

/** The batch items of calls, one start and one end each; the ids of the parent and the trace set. */
export function batchItems(project: string, traceId: string, parentId: string | null, calls: CallRecord[]): unknown[] {
  return calls.flatMap((c) => [
    {
      mode: 'start',
      req: {
        start: {
          project_id: project,
          id: c.id,
          trace_id: traceId,
          parent_id: parentId,
          op_name: c.opName,
          started_at: new Date(c.started).toISOString(),
          attributes: c.attributes,
          inputs: c.inputs,
        },
      },
    },
    {
      mode: 'end',
      req: {
        end: {
          project_id: project,
          id: c.id,
          ended_at: new Date(c.ended).toISOString(),
          output: c.output,
          summary: c.summary,
          exception: c.exception,
        },
      },
    },
  ])
}

/**
 * Sends a run's calls to a Weave-compatible trace server: the run's own call first (so the requests have a
 * parent), the requests in batches as they finish, the run's end with its summary last.
 */
export class TraceSink {
  readonly traceId = uuidv7().replaceAll('-', '')
  readonly runId = uuidv7()
  private pending: CallRecord[] = []
  private sending: Promise<void> = Promise.resolve()
  private failures: string[] = []
  private readonly headers: Record<string, string>
  constructor(
    private readonly url: string,
    private readonly project: string,
    key: string | undefined,
  ) {
    this.headers = traceAuth(key)
  }

  private post(items: unknown[]): Promise<void> {
    this.sending = this.sending.then(async () => {
      try {
        const r = await postJson<{ res?: { error?: string }[] }>(this.url + '/call/upsert_batch', { batch: items }, this.headers)
        const bad = r?.res?.find((x) => x && typeof x === 'object' && 'error' in x)
        if (bad) this.failures.push(String(bad.error))
      } catch (e) {
        this.failures.push((e as Error).message)
      }
    })
    return this.sending
  }

  /** Starts the run's call (its end comes with `end`). */
  start(opName: string, inputs: Record<string, unknown>, started: number): Promise<void> {
    const start = batchItems(this.project, this.traceId, null, [
      {
        id: this.runId,
        started,
        ended: started,
        opName,
        inputs,
        output: null,
        attributes: { weft: { kind: 'bench.run' } },
        summary: {},
        exception: null,
      },
    ])[0]
    return this.post([start])
  }

  add(call: CallRecord): void {
    this.pending.push(call)
    if (this.pending.length >= 100) void this.flush()
  }

  flush(): Promise<void> {
    const calls = this.pending.splice(0)
    return calls.length ? this.post(batchItems(this.project, this.traceId, this.runId, calls)) : this.sending
  }

  /** Ends the run's call; resolves with what the trace server refused, if anything. */
  async end(output: unknown, summary: Record<string, unknown>, ended: number): Promise<string[]> {
    await this.flush()
    await this.post([
      { mode: 'end', req: { end: { project_id: this.project, id: this.runId, ended_at: new Date(ended).toISOString(), output, summary } } },
    ])
    return this.failures
  }
}
