import type { CallBackend } from '../calls/backend.js'
import type { ArrowStream } from '../calls/store.js'
import type { CallPart, CallRecord, QueryOptions } from '../calls/model.js'
import { ClickHouseCalls, type ClickHouseCallsOptions } from './calls.js'
import { ChdbExecutor, type ChdbOptions } from './chdb-executor.js'
import type { Executor } from './executor.js'
import { HttpExecutor, type HttpOptions } from './http-executor.js'
import { partsOfRecord } from './record.js'

/** Which ClickHouse, and where its tables are. */
export type ClickHouseTarget =
  ({ kind: 'clickhouse'; http: HttpOptions } & ClickHouseCallsOptions) | ({ kind: 'chdb'; chdb: ChdbOptions } & ClickHouseCallsOptions)

/**
 * The HTTP client gives up on a request after its own timeout: past the server's query timeout, so a
 * slow query ends as ClickHouse's TIMEOUT_EXCEEDED (a 504, settings.ts), not as a dropped socket.
 */
function httpOptions(target: { http: HttpOptions; queryTimeoutMs?: number }): HttpOptions {
  const { http, queryTimeoutMs } = target
  if (queryTimeoutMs === undefined) return http
  return { ...http, requestTimeoutMs: Math.max(http.requestTimeoutMs ?? 30_000, queryTimeoutMs + 5_000) }
}

/**
 * The call routes' backend (calls/backend.ts) on ClickHouse. Ingest bodies are parsed and validated
 * in the worker pool as for the embedded store; the record they produce is turned back into parts
 * here and inserted.
 */
export class ClickHouseCallBackend implements CallBackend {
  private constructor(
    readonly name: 'clickhouse' | 'chdb',
    readonly calls: ClickHouseCalls,
  ) {}

  /**
   * `include_total_storage_size` of /calls/query_stats: answered by the statistics side (stats-engines.ts),
   * which the routes' composition hands in; unset, the route answers 501 naming the backend.
   */
  traceStorageBytes?: (project: string, opts: QueryOptions) => Promise<number>

  /** Connects (or starts chdb) and applies pending migrations. */
  static async open(target: ClickHouseTarget): Promise<ClickHouseCallBackend> {
    const exec: Executor = target.kind === 'chdb' ? await ChdbExecutor.open(target.chdb) : new HttpExecutor(httpOptions(target))
    try {
      return new ClickHouseCallBackend(target.kind, await ClickHouseCalls.open(exec, target))
    } catch (e) {
      await exec.close().catch(() => {})
      throw e
    }
  }

  ingestRecord(record: Uint8Array): Promise<void> {
    return this.calls.ingest(partsOfRecord(record))
  }

  ingest(parts: CallPart[]): Promise<void> {
    return this.calls.ingest(parts)
  }

  read(project: string, id: string): Promise<CallRecord | null> {
    return this.calls.read(project, id)
  }

  query(project: string, opts: QueryOptions): Promise<CallRecord[]> {
    return this.calls.query(project, opts)
  }

  /** The first batch is read before answering, so ClickHouse's errors get a status rather than cut a stream. */
  async stream(project: string, opts: QueryOptions): Promise<AsyncIterable<CallRecord[]>> {
    const batches = this.calls.stream(project, opts)
    const first = await batches.next()
    return (async function* () {
      if (first.done) return
      yield first.value
      yield* batches
    })()
  }

  /** As stream: the first batch is read before answering. */
  async streamArrow(project: string, opts: QueryOptions & { columns?: string[] | null }): Promise<ArrowStream> {
    const { schema, batches } = this.calls.streamArrow(project, opts)
    const first = await batches.next()
    return {
      schema,
      batches: (async function* () {
        if (first.done) return
        yield first.value
        yield* batches
      })(),
    }
  }

  count(project: string, opts: QueryOptions): Promise<number> {
    return this.calls.count(project, opts)
  }

  distinctRefs(project: string, filter: QueryOptions['filter'], paths: string[][], limit: number): Promise<string[]> {
    return this.calls.distinctRefs(project, filter, paths, limit)
  }

  withDescendants(project: string, ids: string[]): Promise<string[]> {
    return this.calls.withDescendants(project, ids)
  }

  /** ClickHouse's version (`SELECT version()`). */
  version(): Promise<string> {
    return this.calls.exec.version()
  }

  close(): Promise<void> {
    return this.calls.exec.close()
  }
}
