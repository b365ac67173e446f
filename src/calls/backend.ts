import type { ArrowStream } from './store.js'
import type { CallPart, CallRecord, QueryOptions } from './model.js'

/**
 * What the call routes (api/calls.ts) need of a calls backend: the embedded store (CallStore) has
 * all of it; the ClickHouse backend (clickhouse/backend.ts) the required part. The optional members
 * are features a backend may not serve yet; the routes answer 501 naming the backend without them.
 */
export interface CallBackend {
  /** Parts framed as a log record (calls/ingest/prepare.ts); resolves once the write is durable. */
  ingestRecord(record: Uint8Array, count: number): Promise<void>
  ingest(parts: CallPart[]): Promise<void>
  /** A call by id, merged; null when unknown or deleted. */
  read(project: string, id: string): Promise<CallRecord | null>
  query(project: string, opts: QueryOptions): Promise<CallRecord[]>
  stream(project: string, opts: QueryOptions): Promise<AsyncIterable<CallRecord[]>>
  count(project: string, opts: QueryOptions): Promise<number>
  /** The given live calls and all their live descendants. */
  withDescendants(project: string, ids: string[]): Promise<string[]>
  /**
   * The distinct refs (`weave:///…`) at JSON paths (`['inputs', 'example']`) of the live calls a filter
   * matches, at most `limit`: what expand_columns in queries and sorts resolves first.
   */
  distinctRefs?(project: string, filter: QueryOptions['filter'], paths: string[][], limit: number): Promise<string[]>
  /** `total_storage_size_bytes` of /calls/query_stats. */
  traceStorageBytes?(project: string, opts: QueryOptions): Promise<number>
  /** /calls/stream_query as Arrow IPC. */
  streamArrow?(project: string, opts: QueryOptions & { columns?: string[] | null }): Promise<ArrowStream>
}

/** The storage backends weft runs on (core/config.ts StorageKind). */
export type BackendName = 'embedded' | 'clickhouse' | 'chdb'
