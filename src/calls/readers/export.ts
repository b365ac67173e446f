import { JSDuckDBValueConverter, type DuckDBDataChunk, type DuckDBType } from '@duckdb/node-api'
import type { RecordBatch, Schema } from 'apache-arrow'
import type { CallRecord, QueryOptions } from '../model.js'
import { toCall } from '../read/to-call.js'
import type { Storage } from '../storage/storage.js'
import { chunkKeys, rowObjects } from './keys.js'
import { mergeRuns, window, type Run, type Slice } from './merge.js'
import type { ReaderPool } from './pool.js'
import type { ReadMessage } from './protocol.js'
import { takeSnapshot } from './snapshot.js'
import { exportStatement } from './statement.js'
import { tailChunks } from './tail-side.js'

/** Pages up to this many calls (limit + offset) stay on the store's own two-step page query (calls/read/order.ts). */
const PAGE_IDS = 10_000

/** Whether a query is an export (read through the pool) rather than a page. */
export function isExport(opts: QueryOptions): boolean {
  return opts.limit === undefined || opts.limit === null || opts.limit + (opts.offset ?? 0) > PAGE_IDS
}

/** How one answer format is built from the worker's messages and from the tail's chunks. */
interface Format<P> {
  name: 'arrow' | 'json'
  fromWorker(bytes: Uint8Array): P
  fromTail(names: string[], types: DuckDBType[], payload: number): (chunk: DuckDBDataChunk) => P
  slice: Slice<P>
  rows(p: P): number
}

export interface PooledDeps {
  storage: Storage
  pool: ReaderPool
}

/**
 * A query's answer read through the reader pool (segments) and the main thread (calls with parts in
 * the tail), merged in order. Null when the project has no segment yet: the caller reads it in-process.
 */
async function pooled<P>(
  d: PooledDeps,
  project: string,
  opts: QueryOptions,
  select: string,
  format: Format<P> & { schema?: (bytes: Uint8Array) => void },
): Promise<AsyncGenerator<P> | null> {
  const st = exportStatement(project, opts, select)
  const snap = await takeSnapshot(d.storage, project)
  if (snap.settled.length + snap.fresh.length === 0) {
    snap.release()
    return null
  }
  let worker: AsyncGenerator<ReadMessage> | undefined
  try {
    worker = await d.pool.read({
      settled: snap.settled,
      fresh: snap.fresh,
      exclude: snap.tailIds,
      project,
      opts,
      select,
      format: format.name,
      withKeys: snap.tailIds.length > 0,
    })
    const tail = snap.tailIds.length ? await tailChunks(d.storage, snap.tailIds, st.sql, st.params) : null
    const first = await worker.next()
    if (!first.done && first.value.type === 'schema') format.schema?.(first.value.bytes)
    const runs = workerRuns(worker, first.done || first.value.type === 'schema' ? null : first.value, format)
    const tailRuns = tail ? tailSide(tail, st.keys.length, format) : empty<Run<P>>()
    const merged = mergeRuns(st.keys, runs, tailRuns, format.slice)
    return released(window(merged, format.rows, format.slice, opts.offset ?? 0, opts.limit ?? null), snap.release, worker)
  } catch (e) {
    await worker?.return(undefined)
    snap.release()
    throw e
  }
}

async function* workerRuns<P>(messages: AsyncGenerator<ReadMessage>, first: ReadMessage | null, format: Format<P>): AsyncGenerator<Run<P>> {
  const take = (m: ReadMessage) =>
    m.type === 'batch' ? { rows: m.rows, keys: m.keys as Run<P>['keys'], payload: format.fromWorker(m.bytes) } : null
  if (first) {
    const r = take(first)
    if (r) yield r
  }
  for await (const m of messages) {
    const r = take(m)
    if (r) yield r
  }
}

async function* tailSide<P>(tail: Awaited<ReturnType<typeof tailChunks>>, nKeys: number, format: Format<P>): AsyncGenerator<Run<P>> {
  const payload = tail.names.length - nKeys
  const build = format.fromTail(tail.names, tail.types, payload)
  for await (const chunk of tail.chunks) yield { rows: chunk.rowCount, keys: chunkKeys(chunk, payload), payload: build(chunk) }
}

async function* empty<T>(): AsyncGenerator<T> {}

/** The answer, unpinning the snapshot and stopping the worker's read when it ends (or the consumer leaves). */
async function* released<P>(answer: AsyncGenerator<P>, release: () => void, worker: AsyncGenerator<ReadMessage>): AsyncGenerator<P> {
  try {
    yield* answer
  } finally {
    await worker.return(undefined)
    release()
  }
}

/** /calls/stream_query as Arrow: record batches of `select` (arrow/calls.ts); the worker's batches pass through as their IPC bytes. */
export async function pooledArrow(
  d: PooledDeps,
  project: string,
  opts: QueryOptions,
  select: string,
): Promise<{ schema: Schema; batches: AsyncGenerator<RecordBatch> } | null> {
  // apache-arrow loads at the first Arrow answer (arrow/media.ts says why).
  const [{ arrowPlan, chunkToBatch }, { batchFromIpc, schemaFromIpc }] = await Promise.all([
    import('../arrow/convert.js'),
    import('../arrow/ipc.js'),
  ])
  let schemaBytes: Uint8Array | undefined
  let schema: Schema | undefined
  const batches = await pooled<RecordBatch>(d, project, opts, select, {
    name: 'arrow',
    schema: (bytes) => {
      schemaBytes = bytes
      schema = schemaFromIpc(bytes)
    },
    fromWorker: (bytes) => batchFromIpc(schemaBytes!, bytes),
    fromTail: (names, types, n) => {
      const plan = arrowPlan(names.slice(0, n), types.slice(0, n))
      return (chunk) => chunkToBatch(plan, chunk)
    },
    slice: (b, from, to) => b.slice(from, to),
    rows: (b) => b.numRows,
  })
  return batches && { schema: schema!, batches }
}

/** /calls/stream_query as JSON: pages of calls (read/to-call.ts), built in the worker for the segments' calls. */
export function pooledCalls(
  d: PooledDeps,
  project: string,
  opts: QueryOptions,
  select: string,
): Promise<AsyncGenerator<CallRecord[]> | null> {
  return pooled<CallRecord[]>(d, project, opts, select, {
    name: 'json',
    fromWorker: (bytes) => JSON.parse(Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).toString('utf8')) as CallRecord[],
    fromTail: (names, _types, n) => (chunk) => rowObjects(names.slice(0, n), chunk.convertRows(JSDuckDBValueConverter)).map(toCall),
    slice: (p, from, to) => p.slice(from, to),
    rows: (p) => p.length,
  })
}
