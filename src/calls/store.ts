import path from 'node:path'
import type { DuckDBConnection } from '@duckdb/node-api'
import type { RecordBatch, Schema, Table } from 'apache-arrow'
import { arrowSelect, keptColumns } from './arrow/calls.js'
import { readerSplit, spillDir } from '../core/duckdb-memory.js'
import { createLogger } from '../core/log.js'
import { Params } from '../query/params.js'
import { encodeParts } from './ingest/encode.js'
import { type CallPart, type CallRecord, type QueryOptions } from './model.js'
import { matchingView, mergedCalls, mergedSinceSql, touchedCalls, touchedSpanSql, windowIdsSql } from './read/facts.js'
import { fetchSql, pagePlan, querySql, selectSql } from './read/order.js'
import { exportWindows } from './read/windows.js'
import { callChunks } from './read/chunk-rows.js'
import { pageCalls } from './read/page-fetch.js'
import { pageBlocksRead } from './storage/page-blocks.js'
import { ensurePageIndex } from './storage/page-index.js'
import { SELECT_OUT } from './read/merged.js'
import { isExport, pooledArrow, pooledCalls, type PooledDeps } from './readers/export.js'
import { ReaderPool } from './readers/pool.js'
import { Reader, type Statement } from './read/reader.js'
import { countSql, descendantsSql, traceBytesSql } from './read/statements.js'
import { toCall } from './read/to-call.js'
import { distinctRefsSql } from './read/expand.js'
import type {
  CallColumn,
  CallRelation,
  CallSession,
  CallSource,
  MatchView,
  SeqBound,
  SinceMerge,
  SinceSpec,
  TouchedSpec,
} from './source.js'
import { openStorage } from './storage/open.js'
import type { StoreOptions } from './storage/options.js'
import { checkName, type Segment } from './storage/segments.js'
import type { SegmentEvent, Storage } from './storage/storage.js'
import { walRecord } from './storage/wal.js'

/**
 * The slow-read log: with WEFT_SLOW_QUERY_MS set, a read statement taking that long or longer to its first rows is
 * logged (warn) with its time and SQL text. The text holds no request values (they are bound parameters, never
 * spliced: test/sql-text), so the log carries no user data; it names the statement shape that was slow.
 */
function slowReads(): { ms: number; report: (ms: number, sql: string) => void } | undefined {
  const ms = Number(process.env.WEFT_SLOW_QUERY_MS)
  if (!(ms >= 0) || process.env.WEFT_SLOW_QUERY_MS === '') return undefined
  const log = createLogger(process.env.WEFT_LOG_LEVEL || 'info')
  return { ms, report: (took, sql) => log.warn({ ms: Math.round(took), sql: sql.replace(/\s+/g, ' ').slice(0, 4000) }, 'slow read') }
}

/** Reader threads for exports unless WEFT_READERS says otherwise: none (see pooled). */
const DEFAULT_READERS = 0

export type { StoreOptions }

/** An Arrow answer: its schema (known before any row) and its record batches, pulled one at a time. */
export interface ArrowStream {
  schema: Schema
  batches: AsyncGenerator<RecordBatch>
}

/**
 * The calls store. Every acknowledged part is first in a write-ahead log (fsynced, group commit),
 * then in an in-memory DuckDB table, the tail. The tail is flushed to immutable Parquet segments
 * listed in an atomically written manifest, after which its logs are dropped. Queries read a view
 * over the segments and the tail, so they see every acknowledged write. On start the manifest's
 * logs are replayed into the tail. This class puts together storage/ (log, tail, segments) and
 * read/ (SQL over the merged calls, and its execution).
 */
export class CallStore implements CallSource {
  private readonly reader: Reader
  /** Reader threads for exports and scans over the segments (started at the first such read; see readers/). */
  private readers?: ReaderPool

  private constructor(private readonly storage: Storage) {
    this.reader = new Reader(
      () => storage.connect(),
      (mark) => storage.tail.visible(mark),
      storage.opts.queryTimeoutMs,
      slowReads(),
    )
  }

  static async open(dataDir: string, options: StoreOptions = {}): Promise<CallStore> {
    return new CallStore(await openStorage(dataDir, options))
  }

  /** What the last start found in the logs (see Recovered). */
  get recovered() {
    return this.storage.recovered
  }

  stats() {
    const t = this.storage.tail.timings
    const s = this.storage.timings
    // Where a read's time goes: waiting for acknowledged batches to reach the tail, then the query itself;
    // what the reads wait on (tail inserts, the tail's rebuild after a flush); and what competes with them for the
    // database (flushes with the rollups' update, compactions' folds and swaps). Summed since the last reset.
    const timings = {
      read_visibility_waits: t.readWaits.json(),
      read_queries: this.reader.queries.json(),
      tail_inserts: t.inserts.json(),
      tail_rebuilds: t.rebuilds.json(),
      flushes: s.flushes.json(),
      compaction_folds: s.folds.json(),
      compaction_swaps: s.swaps.json(),
    }
    return { ...this.storage.stats(), readers: this.readerStats, timings_ms: timings }
  }

  /** Restarts the sums in stats().timings_ms (GET /admin/stats?reset=true). */
  resetTimings(): void {
    for (const d of [...Object.values(this.storage.tail.timings), ...Object.values(this.storage.timings), this.reader.queries]) d.reset()
  }

  get segments(): readonly Segment[] {
    return this.storage.segments
  }

  /** Durable, then acknowledged: resolves once the parts are fsynced in the log (reads see them; see visible). */
  async ingest(parts: CallPart[]): Promise<void> {
    if (parts.length === 0) return
    await this.ingestRecord(walRecord(encodeParts(parts)), parts.length)
  }

  /**
   * The same for a batch already encoded by encodeParts and framed as a log record by walRecord (the
   * ingest workers do that, so the event loop neither parses, serialises nor checksums call bodies).
   * Reads first wait for the batches acknowledged before them (visible), so a read still sees every
   * acknowledged write.
   */
  async ingestRecord(record: Buffer, count: number): Promise<void> {
    if (count === 0) return
    await this.storage.append(record, count)
  }

  /** Resolves once every batch acknowledged so far is in the tail table (reads call it first). */
  visible(): Promise<void> {
    return this.storage.tail.visible()
  }

  /** Moves the tail into a new Parquet segment (see flushTail). */
  flush(): Promise<void> {
    return this.storage.flush()
  }

  /** Compacts every segment into one (see compactSegments); runs in turn with flushes. */
  compact(): Promise<void> {
    return this.storage.compact()
  }

  onSegments(hook: (event: SegmentEvent) => Promise<void>): void {
    this.storage.onSegments(hook)
  }

  exclusive<T>(fn: () => Promise<T>): Promise<T> {
    return this.storage.exclusive(fn)
  }

  /** The data directory the store lives in (its files are under `calls/`). */
  get dataDir(): string {
    return this.storage.dataDir
  }

  /** The highest seq given to a part so far: every acknowledged part is at or below it. */
  get lastSeq(): number {
    return Number(this.storage.seq)
  }

  get flushedSeq(): number {
    return this.storage.flushedSeq
  }

  get stableSeq(): number | null {
    return this.storage.stableSeq
  }

  get closed(): boolean {
    return this.storage.closed
  }

  get replayQuarantined(): number {
    return this.storage.recovered.quarantined
  }

  get segmentRows(): number {
    return this.storage.segmentRows
  }

  connect(): Promise<DuckDBConnection> {
    return this.storage.connect()
  }

  idRanges(n: number): Promise<string[]> {
    return this.storage.idRanges(n)
  }

  /** A session for statistics (source.ts): the connection itself stays inside the store. */
  async session(): Promise<CallSession> {
    const conn = await this.storage.connect()
    return {
      run: async (sql, params) => void (await conn.run(sql, params?.values)),
      read: async (sql, params) => (await conn.runAndReadAll(sql, params?.values)).getRowsJS() as unknown[][],
      interrupt: () => conn.interrupt(),
      close: () => conn.closeSync(),
    }
  }

  async compactedSeq(): Promise<number> {
    return this.storage.segments.reduce((a, s) => (s.level ? Math.max(a, s.max_seq) : a), 0)
  }

  matching(project: string, opts: Parameters<CallSource['matching']>[1], params: Params, view: MatchView): CallRelation {
    return matchingView(project, opts, params, view)
  }

  touched(spec: TouchedSpec, params: Params): CallRelation {
    return touchedCalls(spec, params)
  }

  touchedSpan(spec: TouchedSpec, params: Params): string {
    return touchedSpanSql(spec, params)
  }

  merged(ids: CallRelation, columns: readonly CallColumn[], upTo: SeqBound | null): CallRelation {
    return mergedCalls(ids, columns, upTo)
  }

  mergedSince(spec: SinceSpec, columns: readonly CallColumn[], params: Params, prefix: string): SinceMerge {
    return mergedSinceSql(spec, columns, params, prefix)
  }

  async windowIds(project: string, windows: readonly (readonly [number, number])[]): Promise<({ lo: string; hi: string } | null)[]> {
    if (!windows.length) return []
    const params = new Params()
    const rows = await this.reader.readAll(windowIdsSql(windows, params, project), params)
    const out: ({ lo: string; hi: string } | null)[] = windows.map(() => null)
    for (const r of rows) if (r.lo !== null && r.lo !== undefined) out[Number(r.w)] = { lo: String(r.lo), hi: String(r.hi) }
    return out
  }

  async query(project: string, opts: QueryOptions): Promise<CallRecord[]> {
    const { calls, sql, params, mark } = await this.page(project, opts)
    if (calls) return calls
    return (await this.reader.readAll(sql, params, mark)).map(toCall)
  }

  /**
   * The same as query, a chunk (~2048 calls) at a time, pulled as the consumer asks: memory stays
   * bounded whatever the result size. The first chunk is fetched before this resolves, so a bad
   * query fails before any response is sent.
   */
  async stream(project: string, opts: QueryOptions): Promise<AsyncGenerator<CallRecord[]>> {
    const pool = this.pooled(opts)
    const viaPool = pool && (await pooledCalls(pool, project, opts, SELECT_OUT))
    if (viaPool) return viaPool
    const windows = await this.windowed(project, opts, SELECT_OUT)
    if (windows) return callChunks(await this.reader.streamSeq(windows))
    const { calls, sql, params, mark } = await this.page(project, opts)
    if (calls)
      return (async function* () {
        if (calls.length) yield calls
      })()
    return this.reader.stream(sql, params, toCall, mark)
  }

  /** Window statements exports have run here (see windowed); the reader pool counts its own. */
  private windowsHere = 0

  /** Window statements exports have run, here and in the reader pool (tests). */
  get exportWindows(): number {
    return this.windowsHere + (this.readers?.stats.windows ?? 0)
  }

  /**
   * An export in start-time order as one statement per window of start time (read/windows.ts), or null when
   * it is read whole. The windows come from the compacted segments' row groups.
   */
  private async windowed(project: string, opts: QueryOptions, select: string): Promise<(() => Statement | null) | null> {
    const settled = this.storage.manifest.segments.filter((x) => x.level)
    const files = settled.map((x) => path.join(this.storage.dir, checkName(x.file)))
    const windows = await exportWindows((s, p) => this.reader.readAll(s, p), files, project, opts).catch(() => null)
    if (!windows) return null
    return () => {
      const w = windows.next()
      if (!w) return null
      this.windowsHere++
      const params = new Params()
      return { sql: selectSql(project, opts, params, select, w.window), params, done: (rows) => windows.done(w.calls, rows) }
    }
  }

  /**
   * A query's calls when they are a page the page index located (read/page-fetch.ts: from the block
   * files), else its statement (a page by id, or the whole query), as before. A damaged block file is
   * rebuilt in turn with flushes and compactions.
   */
  private async page(project: string, opts: QueryOptions): Promise<{ calls?: CallRecord[]; sql: string; params: Params; mark: number }> {
    // Its reads follow one another: each sees the writes acknowledged before the first (see Tail.visible).
    const mark = this.storage.tail.mark()
    const readAll = (s: string, p: Params) => this.reader.readAll(s, p, mark)
    const plan = await pagePlan(project, opts, readAll)
    if (!plan) return { ...(await querySql(project, opts, readAll)), mark }
    if (!plan.located.length || !pageBlocksRead()) return { ...fetchSql(project, plan.ids), mark }
    const calls = await pageCalls(this.storage.dir, project, plan, readAll, () => {
      if (!this.storage.closed) void this.storage.exclusive(() => ensurePageIndex(this.storage)).catch(() => {})
    })
    return { calls, sql: '', params: new Params(), mark }
  }

  /**
   * The same as stream, as Arrow record batches built from DuckDB's column chunks (one batch per
   * chunk, ~2,048 calls), pulled as the consumer asks; `columns` as in a query (docs/calls-and-storage.md).
   */
  async streamArrow(project: string, opts: QueryOptions & { columns?: string[] | null }): Promise<ArrowStream> {
    const select = arrowSelect(keptColumns(opts.columns))
    const pool = this.pooled(opts)
    const viaPool = pool && (await pooledArrow(pool, project, opts, select))
    if (viaPool) return viaPool
    const windows = await this.windowed(project, opts, select)
    const result = windows
      ? await this.reader.streamSeq(windows)
      : await (async () => {
          const { sql, params } = await querySql(project, opts, (s, p) => this.reader.readAll(s, p), select)
          return this.reader.streamChunks(sql, params)
        })()
    // apache-arrow loads at the first Arrow answer (arrow/media.ts says why).
    const { arrowPlan, chunkToBatch } = await import('./arrow/convert.js')
    const plan = arrowPlan(result.names, result.types)
    async function* batches() {
      for await (const chunk of result.chunks) yield chunkToBatch(plan, chunk)
    }
    return { schema: plan.schema, batches: batches() }
  }

  /**
   * The reader pool for an export (not a page): the segments' calls are read and converted in worker threads, a
   * window of start time at a time as here (readers/worker-read.ts), the tail's on this one, merged in order
   * (readers/export.ts). Off unless WEFT_READERS names a thread count: on 2 cores a 1M-call export took 1.4-1.8x
   * as long through the pool as in-process, the batches crossing threads as Arrow IPC (docs/calls-and-storage.md, Store).
   */
  private pooled(opts: QueryOptions): PooledDeps | null {
    const threads = Number(process.env.WEFT_READERS ?? DEFAULT_READERS)
    if (!(threads > 0) || this.storage.closed || !isExport(opts)) return null
    this.readers ??= this.startReaders(threads)
    return { storage: this.storage, pool: this.readers }
  }

  /** The pool, with the store's share of the memory budget split between its instance and the readers'. */
  private startReaders(threads: number): ReaderPool {
    const split = readerSplit(this.storage.opts.memoryLimit, threads)
    void this.storage.limitMemory(split.store).catch(() => {})
    return new ReaderPool({
      threads,
      maxQueue: Number(process.env.WEFT_READER_QUEUE ?? 64),
      timeoutMs: this.storage.opts.queryTimeoutMs,
      memoryBytes: split.perReader,
      spillDir: spillDir(path.dirname(this.storage.dir), 'readers'),
    })
  }

  /** Reader pool figures for /admin/stats (null before its first read). */
  get readerStats() {
    return this.readers?.stats ?? null
  }

  /** The same as query, as an apache-arrow Table (for embedding: the analytics user gets columns). */
  async queryArrow(project: string, opts: QueryOptions & { columns?: string[] | null }): Promise<Table> {
    const { schema, batches } = await this.streamArrow(project, opts)
    const all: RecordBatch[] = []
    for await (const b of batches) all.push(b)
    const { Table } = await import('apache-arrow')
    return new Table(schema, all)
  }

  /** Runs a read (with the store's query timeout) and returns its rows. */
  rows(sql: string, params: Params): Promise<Record<string, unknown>[]> {
    return this.reader.readAll(sql, params)
  }

  async count(project: string, opts: QueryOptions): Promise<number> {
    const { sql, params } = countSql(project, opts)
    return Number((await this.reader.readAll(sql, params))[0]!.n)
  }

  /** `total_storage_size_bytes` (docs/calls-and-storage.md); see traceBytesSql. */
  async traceStorageBytes(project: string, opts: QueryOptions): Promise<number> {
    const { sql, params } = traceBytesSql(project, opts)
    return Number((await this.reader.readAll(sql, params))[0]!.n)
  }

  async read(project: string, id: string): Promise<CallRecord | null> {
    const [call] = await this.query(project, { filter: { call_ids: [id] }, limit: 1 })
    return call ?? null
  }

  /** See CallBackend.distinctRefs (expand_columns in filters and sorts). */
  distinctRefs(project: string, filter: QueryOptions['filter'], paths: string[][], limit: number): Promise<string[]> {
    const { sql, params } = distinctRefsSql(project, filter, paths, limit)
    return this.reader.readAll(sql, params).then((rows) => rows.map((r) => String(r.r)))
  }

  /** The given live calls and all their live descendants. */
  async withDescendants(project: string, ids: string[]): Promise<string[]> {
    const { sql, params } = descendantsSql(project, ids)
    return (await this.reader.readAll(sql, params)).map((r) => String(r.id))
  }

  async close(): Promise<void> {
    await this.readers?.close()
    return this.storage.close()
  }
}
