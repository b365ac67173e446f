import fs from 'node:fs/promises'
import path from 'node:path'
import { DuckDBInstance, blobValue, listValue, type DuckDBConnection, type DuckDBPreparedStatement } from '@duckdb/node-api'
import { Wal, takeLock, walRecord } from './wal.js'
import {
  MANIFEST as MANIFEST_FILE,
  checkName,
  fileName,
  fsyncPath,
  readManifest,
  writeManifest,
  type Manifest,
  type Segment,
} from './segments.js'
import { DomainError } from '../core/errors.js'
import { isoFromMicros } from '../core/time.js'
import type { CallSource } from './source.js'
import type { RawJson } from './raw-json.js'
import { PARTS_JSON_TYPE, USAGE_FIELDS, encodeParts, type UsageRow } from './parts.js'
import { CALL_COLUMNS, DERIVED, Params, compileQuery, fieldSql } from '../query/expr.js'

/**
 * One part of a call as it arrives: a start, an end, a display-name update or a delete. Parts are
 * appended, never changed; a call is the merge of its parts (reference §5.1–5.2). JSON-valued
 * fields are kept as JSON text (or, from the ingest fast path, as the bytes sent: RawJson);
 * timestamps as microseconds since the epoch.
 */
export interface CallPart {
  /** merged: several parts of one call folded into one (compaction; parts of a call sent in one batch). */
  kind: 'start' | 'end' | 'update' | 'delete' | 'merged'
  project_id: string
  id: string
  trace_id?: string | null
  parent_id?: string | null
  thread_id?: string | null
  turn_id?: string | null
  op_name?: string | null
  display_name?: string | null
  /** Microseconds since the epoch. */
  started_us?: string | number | null
  ended_us?: string | number | null
  deleted_us?: string | number | null
  attributes?: string | RawJson | null
  inputs?: string | RawJson | null
  output?: string | RawJson | null
  summary?: string | null
  exception?: string | null
  user_id?: string | null
  run_id?: string | null
  run_step?: number | null
  run_step_end?: number | null
  input_refs?: string[]
  output_refs?: string[]
  /** summary.usage as typed rows, one per model (see usageRows). */
  usage?: UsageRow[]
}

export interface CallFilter {
  op_names?: string[] | null
  input_refs?: string[] | null
  output_refs?: string[] | null
  parent_ids?: string[] | null
  trace_ids?: string[] | null
  call_ids?: string[] | null
  thread_ids?: string[] | null
  turn_ids?: string[] | null
  trace_roots_only?: boolean | null
  svc_user_ids?: string[] | null
  wb_user_ids?: string[] | null
  svc_run_ids?: string[] | null
  wb_run_ids?: string[] | null
}

export interface QueryOptions {
  filter?: CallFilter | null
  query?: { $expr: unknown } | null
  sort_by?: { field: string; direction: 'asc' | 'desc' }[] | null
  limit?: number | null
  offset?: number | null
}

export type CallRecord = Record<string, unknown>

/** More conditions for matching(): on the merged call (`m.`), on single parts (see filterSql), and heavy columns to merge. */
export interface Extra {
  where?: string[]
  narrow?: string[]
  /** Conditions every part of a matching call meets (e.g. an id range): they prune the merge's scan. */
  parts?: string[]
  columns?: string[]
  /** Merge only these columns (and those the conditions name), for callers that read few. */
  only?: string[]
}

const MAX_FILTER_LIST = 1000
/** Pages up to this many calls (limit + offset) are found by id first (see pageSql). */
const PAGE_IDS = 10_000

export const PART_COLUMNS = `
  seq BIGINT NOT NULL, kind VARCHAR NOT NULL, project_id VARCHAR NOT NULL, id VARCHAR NOT NULL,
  trace_id VARCHAR, parent_id VARCHAR, thread_id VARCHAR, turn_id VARCHAR, op_name VARCHAR, display_name VARCHAR,
  started_at TIMESTAMP, ended_at TIMESTAMP, deleted_at TIMESTAMP,
  attributes VARCHAR, inputs VARCHAR, output VARCHAR, summary VARCHAR, exception VARCHAR,
  user_id VARCHAR, run_id VARCHAR, run_step BIGINT, run_step_end BIGINT,
  input_refs VARCHAR[], output_refs VARCHAR[],
  usage STRUCT(model VARCHAR, ${USAGE_FIELDS.map((f) => `${f} BIGINT`).join(', ')})[]`
/** Tail rows also carry the number of the log they were appended to, so a flush takes exactly that log's parts. */
const TAIL_COLUMNS = PART_COLUMNS + ', wal_gen INTEGER NOT NULL'

/**
 * Fault injection for tests: with WEFT_FAILPOINTS=tail-insert, a batch holding this marker fails to
 * reach the tail (as a DuckDB error would), after it was logged and acknowledged.
 */
const TAIL_MARKER = Buffer.from('weft-failpoint:tail-insert')
/** Log records a replay could not add to the tail, kept (framed as in the log) rather than lost or blocking starts. */
const QUARANTINE = 'quarantine.log'
const tailFailpoint = (process.env.WEFT_FAILPOINTS ?? '').split(',').includes('tail-insert')

/**
 * Encoded batches (see encodeParts) reach the tail in two steps: each is put in a one-row-per-batch
 * stage table, then one statement parses every staged batch and moves its parts into the tail. (A
 * batch bound straight into the insert as a parameter is a constant to DuckDB's optimizer, which then
 * folds the whole parse into one giant value and derives statistics from it: 3× the cost.)
 */
const STAGE_COLUMNS = 'b BLOB NOT NULL, base BIGINT NOT NULL, gen INTEGER NOT NULL'
const STAGE_SQL = 'INSERT INTO call_parts_stage VALUES ($1, $2, $3)'
const MOVE_SQL = `INSERT INTO call_parts
  SELECT base + i - 1, p.kind, p.project_id, p.id, p.trace_id, p.parent_id, p.thread_id, p.turn_id, p.op_name, p.display_name,
    make_timestamp(p.started_us), make_timestamp(p.ended_us), make_timestamp(p.deleted_us),
    p.attributes, p.inputs, p.output, p.summary, p.exception, p.user_id, p.run_id, p.run_step, p.run_step_end,
    p.input_refs, p.output_refs, p.usage, gen
  FROM (SELECT base, gen, unnest(j) AS p, generate_subscripts(j, 1) AS i
    FROM (SELECT base, gen, from_json(decode(b), '${PARTS_JSON_TYPE}') AS j FROM call_parts_stage))`

/** Segment files. (Row groups of 16,384 instead of the default 122,880 made compaction 2-3× slower and statistics no faster.) */
const PARQUET = 'FORMAT parquet, COMPRESSION zstd'

/** Latest non-null value of each field over a call's parts, in arrival order. */
export const latest = (c: string) => `arg_max(${c}, seq) FILTER (WHERE ${c} IS NOT NULL) AS ${c}`
const FOLDED = [
  'trace_id',
  'parent_id',
  'thread_id',
  'turn_id',
  'op_name',
  'display_name',
  'started_at',
  'ended_at',
  'attributes',
  'inputs',
  'output',
  'summary',
  'exception',
  'user_id',
  'run_id',
  'run_step',
  'run_step_end',
  'usage',
]
/** Large JSON columns: a page of calls merges them only for the calls on the page. */
const HEAVY = new Set(['attributes', 'inputs', 'output', 'summary', 'usage'])
const REF_LISTS = ['input_refs', 'output_refs']

/** The merged calls (latest non-null value per field over each call's parts), with the given folded columns. */
export function merged(columns: readonly string[] = FOLDED, refs = true): string {
  const lists = refs
    ? REF_LISTS.map((c) => `,\n    list_distinct(flatten(list(${c}) FILTER (WHERE ${c} IS NOT NULL))) AS ${c}`).join('')
    : ''
  return `
  SELECT project_id, id,
    ${columns.map(latest).join(',\n    ')},
    max(deleted_at) AS deleted_at${lists}
  FROM all_parts`
}
const MERGED = merged()

const SELECT_OUT = `m.id, m.project_id, m.op_name, nullif(m.display_name, '') AS display_name, m.trace_id, m.parent_id, m.thread_id, m.turn_id,
  epoch_us(m.started_at) AS started_us, epoch_us(m.ended_at) AS ended_us, m.attributes, m.inputs, m.output, m.summary, m.exception,
  m.user_id, m.run_id, m.run_step, m.run_step_end, ${DERIVED['summary.weave.status']!.sql} AS d_status,
  ${DERIVED['summary.weave.latency_ms']!.sql} AS d_latency, ${DERIVED['summary.weave.trace_name']!.sql} AS d_trace_name`

export interface StoreOptions {
  /** Flush the in-memory tail to a Parquet segment once it holds this many parts. */
  flushRows?: number
  /** …or once its parts' encoded bytes pass this (bounds the tail's memory whatever the calls' size). */
  flushBytes?: number
  /** …or once its oldest part is this old (ms); 0 turns the timer off. */
  flushIntervalMs?: number
  /** Past this many segments, they are compacted into one. */
  maxSegments?: number
  /** A query waiting this long (ms) on DuckDB is interrupted: 504. */
  queryTimeoutMs?: number
  /** Parts per compacted segment (one id range each); bounds the memory a compaction takes. */
  compactParts?: number
  /** Bytes of acknowledged batches not yet in the tail table past which writes wait for it. */
  maxUnmovedBytes?: number
}

/**
 * The calls store. Every acknowledged part is first in a write-ahead log (fsynced, group commit),
 * then in an in-memory DuckDB table, the tail. The tail is flushed to immutable Parquet segments
 * listed in an atomically written manifest, after which its logs are dropped. Queries read a view
 * over the segments and the tail, so they see every acknowledged write. On start the manifest's
 * logs are replayed into the tail.
 */
export class CallStore implements CallSource {
  private seq = 0n
  private tailRows = 0
  private tailSince = 0
  private flushChain: Promise<unknown> = Promise.resolve()
  /** A size-triggered flush is queued and has not started: later batches need not queue another. */
  private sizeFlushQueued = false
  private timer?: NodeJS.Timeout
  private closed = false
  /** Batches logged or being logged but not yet in the tail, per log generation (see flushOnce). */
  private readonly pendingByGen = new Map<number, number>()
  private pendingDrained: (() => void)[] = []
  /** Batches waiting for the tail; they go in together, one statement for all (see drainInserts). */
  private staged: { batch: Buffer; base: bigint; gen: number; resolve: (n: number) => void; reject: (e: unknown) => void }[] = []
  private inserting = false
  private insertStmts?: { stage: DuckDBPreparedStatement; move: DuckDBPreparedStatement }
  /** Batches handed to the tail, and those through (in order: groups go in FIFO). */
  private stagedTotal = 0
  private movedTotal = 0
  private stagedBytes = 0
  private visibleWaiters: { target: number; resolve: () => void }[] = []
  /** Set when a logged batch could not be added to the tail; see drainInserts. */
  private tailFailure: unknown = null
  /** Parts acknowledged per log generation, for the tail's size after a flush. */
  private readonly partsByGen = new Map<number, { parts: number; bytes: number }>()
  private tailBytes = 0
  private readonly hooks: ((event: 'flush' | 'compact') => Promise<void>)[] = []

  private constructor(
    private readonly dir: string,
    private manifest: Manifest,
    private wal: Wal,
    private readonly db: DuckDBInstance,
    private readonly writer: DuckDBConnection,
    private readonly maint: DuckDBConnection,
    private readonly opts: Required<StoreOptions>,
    readonly recovered: { records: number; parts: number; truncatedBytes: number; segments: number; quarantined: number },
  ) {}

  static async open(dataDir: string, options: StoreOptions = {}): Promise<CallStore> {
    const opts = {
      flushRows: options.flushRows ?? 200_000,
      flushBytes: options.flushBytes ?? 256 * 2 ** 20,
      flushIntervalMs: options.flushIntervalMs ?? 30_000,
      maxSegments: options.maxSegments ?? 8,
      queryTimeoutMs: options.queryTimeoutMs ?? 30_000,
      compactParts: options.compactParts ?? 2_000_000,
      maxUnmovedBytes: options.maxUnmovedBytes ?? 8 * 2 ** 20,
    }
    const dir = path.join(dataDir, 'calls')
    await fs.mkdir(dir, { recursive: true })
    await takeLock(path.join(dir, 'LOCK'))
    let manifest = await readManifest(dir)
    if (!manifest) {
      manifest = { version: 1, segments: [], wals: [fileName('wal', 1)], next_file: 2 }
      await writeManifest(dir, manifest)
    }
    // Files a crash left behind before the manifest named them (or after it stopped naming them).
    const live = new Set([MANIFEST_FILE, 'LOCK', QUARANTINE, ...manifest.segments.map((x) => x.file), ...manifest.wals])
    for (const f of await fs.readdir(dir)) if (!live.has(f)) await fs.rm(path.join(dir, f), { force: true })
    const db = await DuckDBInstance.create(':memory:')
    const writer = await db.connect()
    // Segment files never change once named (names are never reused): their footers can be cached,
    // which saves re-reading ten footers for every query of a large store.
    await writer.run('SET GLOBAL parquet_metadata_cache = true')
    await writer.run(`CREATE TABLE call_parts (${TAIL_COLUMNS})`)
    await writer.run(`CREATE TEMP TABLE call_parts_stage (${STAGE_COLUMNS})`)
    const maint = await db.connect()
    const recovered = { records: 0, parts: 0, truncatedBytes: 0, segments: manifest.segments.length, quarantined: 0 }
    // Replay every log the manifest still lists; only the last one takes appends.
    const logs: { wal: Wal; records: Buffer[] }[] = []
    for (const name of manifest.wals) {
      const opened = await Wal.open(path.join(dir, checkName(name)))
      logs.push(opened)
      recovered.truncatedBytes += opened.truncatedBytes
    }
    for (const l of logs.slice(0, -1)) await l.wal.close()
    const store = new CallStore(dir, manifest, logs[logs.length - 1]!.wal, db, writer, maint, opts, recovered)
    store.seq = BigInt(manifest.segments.reduce((m, seg) => Math.max(m, seg.max_seq), 0))
    await store.refreshView()
    for (const [i, l] of logs.entries()) {
      const gen = walNumber(manifest.wals[i]!)
      for (const r of l.records) {
        let n: number
        try {
          n = await store.insert(r, store.seq + 1n, gen)
        } catch (e) {
          // A record DuckDB cannot read would stop every start: it is set aside, whole, for inspection.
          await fs.appendFile(path.join(dir, QUARANTINE), walRecord(r))
          await fsyncPath(path.join(dir, QUARANTINE))
          await fsyncPath(dir)
          process.emitWarning(`calls store: a logged batch DuckDB cannot read was moved to ${QUARANTINE}: ${(e as Error).message}`)
          store.tailFailure = null
          recovered.quarantined++
          continue
        }
        store.seq += BigInt(n)
        store.counted(gen, n, r.length + 8)
        recovered.records++
        recovered.parts += n
      }
    }
    if (opts.flushIntervalMs > 0) {
      store.timer = setInterval(
        () => {
          if (store.tailRows > 0 && Date.now() - store.tailSince >= opts.flushIntervalMs) void store.flush().catch(() => {})
        },
        Math.min(opts.flushIntervalMs, 5_000),
      )
      store.timer.unref()
    }
    return store
  }

  stats() {
    return {
      tail_parts: this.tailRows,
      tail_bytes: this.tailBytes,
      tail_unmoved_bytes: this.stagedBytes,
      tail_failure: this.tailFailure ? String((this.tailFailure as Error).message) : null,
      segments: this.manifest.segments.length,
      segment_rows: this.manifest.segments.reduce((a, x) => a + x.rows, 0),
      segment_bytes: this.manifest.segments.reduce((a, x) => a + x.bytes, 0),
      wal_bytes: this.wal.bytes,
    }
  }

  get segments(): readonly Manifest['segments'][number][] {
    return this.manifest.segments
  }

  /** Durable, then acknowledged: resolves once the parts are fsynced in the log (reads see them; see visible). */
  async ingest(parts: CallPart[]): Promise<void> {
    if (parts.length === 0) return
    await this.ingestRecord(walRecord(encodeParts(parts)), parts.length)
  }

  /**
   * The same for a batch already encoded by encodeParts and framed as a log record by walRecord (the
   * ingest workers do that, so the event loop neither parses, serialises nor checksums call bodies). Seq numbers are taken in log order, so a
   * replay after a restart numbers every part as it was numbered here.
   *
   * A write is acknowledged once it is in the log; it reaches the tail table in the background,
   * together with whatever else arrived meanwhile (one insert for all: DuckDB's cost per insert is
   * high, and waiting for it held every write to one insert at a time). Reads first wait for the
   * batches acknowledged before them (visible), so a read still sees every acknowledged write.
   * Batches not yet in the tail are bounded in bytes: past the bound a write waits for the tail.
   */
  async ingestRecord(record: Buffer, count: number): Promise<void> {
    if (count === 0) return
    if (this.closed) throw new DomainError(503, 'The calls store is closed')
    if (this.tailFailure) throw this.failedError()
    // Log and generation are taken together: a flush may switch logs while this append waits.
    const wal = this.wal
    const gen = walNumber(this.manifest.wals[this.manifest.wals.length - 1]!)
    const base = this.seq + 1n
    this.seq += BigInt(count)
    this.pendingByGen.set(gen, (this.pendingByGen.get(gen) ?? 0) + 1)
    try {
      await wal.appendRecord(record)
    } catch (e) {
      this.released(gen)
      throw e
    }
    this.counted(gen, count, record.length)
    void this.insert(record.subarray(8), base, gen).then(
      () => this.released(gen),
      () => this.released(gen),
    )
    if (this.stagedBytes > this.opts.maxUnmovedBytes) await this.visible()
    if ((this.tailRows >= this.opts.flushRows || this.tailBytes >= this.opts.flushBytes) && !this.sizeFlushQueued) {
      // One queued flush takes the whole tail when it runs; a flush per batch over the threshold
      // would, under load, queue a train of tiny segments (and compactions).
      this.sizeFlushQueued = true
      const run = this.flushChain.then(() => {
        this.sizeFlushQueued = false
        return this.flushOnce()
      })
      this.flushChain = run.catch(() => {})
      void run.catch(() => {})
    }
  }

  /** Parts and bytes now in the tail (or on their way to it), for when to flush. */
  private counted(gen: number, parts: number, bytes: number): void {
    if (this.tailRows === 0) this.tailSince = Date.now()
    this.tailRows += parts
    this.tailBytes += bytes
    const n = this.partsByGen.get(gen) ?? { parts: 0, bytes: 0 }
    this.partsByGen.set(gen, { parts: n.parts + parts, bytes: n.bytes + bytes })
  }

  private released(gen: number): void {
    const left = this.pendingByGen.get(gen)! - 1
    if (left === 0) this.pendingByGen.delete(gen)
    else this.pendingByGen.set(gen, left)
    if (left === 0) for (const wake of this.pendingDrained.splice(0)) wake()
  }

  /** Resolves once no batch of these log generations is between its log append and the tail. */
  private async settled(gens: number[]): Promise<void> {
    while (gens.some((g) => this.pendingByGen.has(g))) await new Promise<void>((r) => this.pendingDrained.push(r))
  }

  /** Resolves once every batch acknowledged so far is in the tail table (reads call it first). */
  async visible(): Promise<void> {
    const target = this.stagedTotal
    if (this.movedTotal >= target) return
    await new Promise<void>((resolve) => this.visibleWaiters.push({ target, resolve }))
  }

  private failedError(): DomainError {
    return new DomainError(
      503,
      `The calls store could not add acknowledged writes to its tail (${(this.tailFailure as Error).message}); they are kept in its log and come back at the next start: restart the server`,
    )
  }

  /**
   * Adds an encoded batch to the tail; resolves with the number of parts its group added. DuckDB
   * parses the JSON on its own threads. Batches that arrive while an insert runs go in together with
   * the next one (a replay awaits each record, so there a group is one record and the number is its own).
   */
  private insert(batch: Buffer, base: bigint, gen: number): Promise<number> {
    this.stagedTotal++
    this.stagedBytes += batch.length
    return new Promise((resolve, reject) => {
      this.staged.push({ batch, base, gen, resolve, reject })
      if (!this.inserting) void this.drainInserts()
    })
  }

  private async drainInserts(): Promise<void> {
    this.inserting = true
    while (this.staged.length > 0) {
      const group = this.staged
      this.staged = []
      try {
        this.insertStmts ??= { stage: await this.writer.prepare(STAGE_SQL), move: await this.writer.prepare(MOVE_SQL) }
        const { stage, move } = this.insertStmts
        let n: number
        try {
          if (tailFailpoint && group.some((g) => g.batch.includes(TAIL_MARKER))) throw new Error('failpoint tail-insert')
          for (const g of group) {
            stage.bind([blobValue(g.batch), g.base, g.gen])
            await stage.run()
          }
          n = Number((await move.runAndReadAll()).getRowsJS()[0]?.[0] ?? 0)
        } finally {
          await this.writer.run('DELETE FROM call_parts_stage')
        }
        for (const g of group) g.resolve(n)
      } catch (e) {
        // The batches are in the log but not in the tail: a flush now would drop them with the log.
        // Nothing more is acknowledged or flushed; a restart replays the log.
        this.tailFailure ??= e
        process.emitWarning(`calls store: a logged batch did not reach the tail: ${(e as Error).message}`)
        for (const g of group) g.reject(e)
      }
      this.movedTotal += group.length
      for (const g of group) this.stagedBytes -= g.batch.length
      this.visibleWaiters = this.visibleWaiters.filter((w) => (w.target <= this.movedTotal ? (w.resolve(), false) : true))
    }
    this.inserting = false
  }

  /**
   * Moves the tail into a new Parquet segment. Steps, each safe to crash after: (1) new appends go
   * to a fresh log, listed in the manifest next to the old ones; (2) the parts of the old logs are
   * written to a segment file, fsynced; (3) the manifest swaps the old logs for the segment;
   * (4) the old logs are deleted. A restart replays whatever logs the manifest lists.
   */
  flush(): Promise<void> {
    const run = this.flushChain.then(() => this.flushOnce())
    this.flushChain = run.catch(() => {})
    return run
  }

  private async flushOnce(): Promise<void> {
    if (this.tailRows === 0 || this.closed) return
    if (this.tailFailure) throw this.failedError()
    const oldWals = [...this.manifest.wals]
    const newWal = fileName('wal', this.manifest.next_file++)
    const previous = this.wal
    this.wal = (await Wal.open(path.join(this.dir, newWal))).wal
    this.manifest = { ...this.manifest, wals: [...oldWals, newWal] }
    await writeManifest(this.dir, this.manifest)
    await previous.close()
    // Every batch logged in the old logs is in the tail before the tail is copied.
    await this.settled(oldWals.map(walNumber))
    // A batch of these logs that missed the tail would be dropped with them: keep the logs (both stay listed).
    if (this.tailFailure) throw this.failedError()
    const gens = oldWals.map(walNumber).join(', ')
    const segName = fileName('seg', this.manifest.next_file++)
    const segPath = path.join(this.dir, segName)
    const tmp = segPath + '.tmp'
    await this.maint.run(
      `COPY (SELECT * EXCLUDE (wal_gen) FROM call_parts WHERE wal_gen IN (${gens}) ORDER BY project_id, id, seq) TO '${tmp}' (${PARQUET})`,
    )
    await fsyncPath(tmp)
    await fs.rename(tmp, segPath)
    await fsyncPath(this.dir)
    const stats = (
      await this.maint.runAndReadAll(`SELECT count(*)::BIGINT AS n, min(seq) AS lo, max(seq) AS hi FROM read_parquet('${segPath}')`)
    ).getRowObjectsJS()[0]!
    const bytes = (await fs.stat(segPath)).size
    const empty = Number(stats.n) === 0
    if (empty) await fs.rm(segPath, { force: true })
    this.manifest = {
      ...this.manifest,
      segments: empty
        ? this.manifest.segments
        : [
            ...this.manifest.segments,
            { file: segName, rows: Number(stats.n), min_seq: Number(stats.lo ?? 0), max_seq: Number(stats.hi ?? 0), bytes },
          ],
      wals: this.manifest.wals.filter((w) => !oldWals.includes(w)),
    }
    await writeManifest(this.dir, this.manifest)
    await this.refreshView()
    await this.maint.run(`DELETE FROM call_parts WHERE wal_gen IN (${gens})`)
    for (const g of oldWals.map(walNumber)) {
      const n = this.partsByGen.get(g)
      this.tailRows -= n?.parts ?? 0
      this.tailBytes -= n?.bytes ?? 0
      this.partsByGen.delete(g)
    }
    this.tailSince = Date.now()
    for (const w of oldWals) await fs.rm(path.join(this.dir, w), { force: true })
    for (const hook of this.hooks) await hook('flush').catch(() => {})
    if (this.manifest.segments.filter((x) => !x.level).length > this.opts.maxSegments) await this.compactOnce()
  }

  /** Compacts every segment into one (see compactOnce); runs in turn with flushes. */
  compact(): Promise<void> {
    const run = this.flushChain.then(() => this.compactOnce())
    this.flushChain = run.catch(() => {})
    return run
  }

  /**
   * Folds all segments into compacted ones, each call's parts merged into a single part row whose seq
   * is its parts' highest, so parts arriving later still win field by field. Deleted calls stay, as
   * tombstones: a late part of a deleted call must not bring it back. The work is split into id
   * ranges of about `compactParts` parts, one output segment each, so memory stays bounded whatever
   * the store's size (a single GROUP BY over 10M calls ran DuckDB out of memory).
   */
  private async compactOnce(): Promise<void> {
    const old = this.manifest.segments
    // Nothing flushed since the last compaction: the segments are already one row per call.
    if (!old.some((x) => !x.level) || this.closed) return
    const files = old.map((x) => `'${path.join(this.dir, checkName(x.file))}'`).join(', ')
    const totalRows = old.reduce((a, x) => a + x.rows, 0)
    const bounds = await this.idBounds(old, Math.ceil(totalRows / this.opts.compactParts))
    const made: Segment[] = []
    for (let i = 0; i <= bounds.length; i++) {
      const params = new Params()
      const range = [
        i > 0 ? `id >= ${params.add(bounds[i - 1]!)}` : 'true',
        i < bounds.length ? `id < ${params.add(bounds[i]!)}` : 'true',
      ].join(' AND ')
      const segName = fileName('seg', this.manifest.next_file++)
      const segPath = path.join(this.dir, segName)
      const tmp = segPath + '.tmp'
      const copy = await this.maint.prepare(
        `COPY (SELECT max(seq) AS seq, 'merged' AS kind, project_id, id, ${FOLDED.map(latest).join(', ')},
          max(deleted_at) AS deleted_at,
          nullif(list_distinct(flatten(list(input_refs) FILTER (WHERE input_refs IS NOT NULL))), []) AS input_refs,
          nullif(list_distinct(flatten(list(output_refs) FILTER (WHERE output_refs IS NOT NULL))), []) AS output_refs
        FROM read_parquet([${files}], union_by_name = true) WHERE ${range}
        GROUP BY project_id, id ORDER BY project_id, id) TO '${tmp}' (${PARQUET})`,
      )
      copy.bind(params.values)
      await copy.run()
      const stats = (
        await this.maint.runAndReadAll(`SELECT count(*)::BIGINT AS n, min(seq) AS lo, max(seq) AS hi FROM read_parquet('${tmp}')`)
      ).getRowObjectsJS()[0]!
      if (Number(stats.n) === 0) {
        await fs.rm(tmp, { force: true })
        continue
      }
      await fsyncPath(tmp)
      await fs.rename(tmp, segPath)
      made.push({
        file: segName,
        rows: Number(stats.n),
        min_seq: Number(stats.lo ?? 0),
        max_seq: Number(stats.hi ?? 0),
        bytes: (await fs.stat(segPath)).size,
        level: 1,
      })
    }
    await fsyncPath(this.dir)
    // The flushed segments' highest seq must survive in the manifest (a restart numbers new parts after it).
    if (made.length) made[made.length - 1]!.max_seq = Math.max(made[made.length - 1]!.max_seq, ...old.map((x) => x.max_seq))
    this.manifest = { ...this.manifest, segments: made }
    await writeManifest(this.dir, this.manifest)
    await this.refreshView()
    // Queries that bound the old view may still be reading the old files: remove them a little later
    // (a restart removes any that are left).
    const stale = old.map((x) => path.join(this.dir, x.file))
    setTimeout(() => void Promise.all(stale.map((f) => fs.rm(f, { force: true }))), 30_000).unref()
    for (const hook of this.hooks) await hook('compact').catch(() => {})
  }

  /**
   * Runs `hook` after every flush and compaction, in turn with them (so segments do not change
   * while it runs). Statistics keep their pre-aggregates current this way.
   */
  onSegments(hook: (event: 'flush' | 'compact') => Promise<void>): void {
    this.hooks.push(hook)
  }

  /** Runs fn in turn with flushes and compactions. */
  exclusive<T>(fn: () => Promise<T>): Promise<T> {
    const run = this.flushChain.then(fn)
    this.flushChain = run.catch(() => {})
    return run
  }

  /** The data directory the store lives in (its files are under `calls/`). */
  get dataDir(): string {
    return path.dirname(this.dir)
  }

  /** The highest seq given to a part so far: every acknowledged part is at or below it. */
  get lastSeq(): number {
    return Number(this.seq)
  }

  /** The highest seq held in segments: every part at or below it is in Parquet and never changes. */
  get flushedSeq(): number {
    return this.manifest.segments.reduce((m, x) => Math.max(m, x.max_seq), 0)
  }

  /** The DuckDB instance holding the tail and the `all_parts` view, for modules that keep tables beside them. */
  get duck(): DuckDBInstance {
    return this.db
  }

  /** A new connection to the database holding `all_parts` (see CallSource). */
  connect(): Promise<DuckDBConnection> {
    return this.db.connect()
  }

  /** Parts held in segments. */
  get segmentRows(): number {
    return this.manifest.segments.reduce((a, s) => a + s.rows, 0)
  }

  /** See merged(). */
  mergedSql(columns: readonly string[] = FOLDED, refs = true): string {
    return merged(columns, refs)
  }

  /** Id ranges splitting the segments into about n parts (see idBounds). */
  idRanges(n: number): Promise<string[]> {
    return this.idBounds(this.manifest.segments, n)
  }

  /**
   * Up to n - 1 ids splitting the segments' parts into n ranges of similar size, from the row-group
   * statistics in the Parquet footers (segments are sorted by id, so no data is read).
   */
  private async idBounds(segments: readonly Segment[], n: number): Promise<string[]> {
    if (n <= 1) return []
    const files = segments.map((x) => `'${path.join(this.dir, checkName(x.file))}'`).join(', ')
    const mins = (
      await this.maint.runAndReadAll(
        `SELECT stats_min AS id FROM parquet_metadata([${files}]) WHERE path_in_schema = 'id' AND stats_min IS NOT NULL ORDER BY stats_min`,
      )
    )
      .getRowObjectsJS()
      .map((r) => String(r.id))
    const out: string[] = []
    for (let i = 1; i < n; i++) {
      const b = mins[Math.floor((i * mins.length) / n)]
      if (b !== undefined && b !== out[out.length - 1] && b > (out[out.length - 1] ?? '')) out.push(b)
    }
    return out
  }

  /** The relation queries read: every segment, then the tail. File names come from the manifest and are checked. */
  private async refreshView(): Promise<void> {
    const files = this.manifest.segments.map((s) => `'${path.join(this.dir, checkName(s.file))}'`)
    const sql = files.length
      ? `CREATE OR REPLACE VIEW all_parts AS SELECT * FROM read_parquet([${files.join(', ')}], union_by_name = true) UNION ALL BY NAME SELECT * EXCLUDE (wal_gen) FROM call_parts`
      : 'CREATE OR REPLACE VIEW all_parts AS SELECT * EXCLUDE (wal_gen) FROM call_parts'
    await this.maint.run(sql)
  }

  /**
   * The filter as conditions on the merged call (`m.`), and as conditions on single parts that a
   * matching call must have at least one part meeting: a merged field is one of its parts' values,
   * so these narrow the calls to merge before merging, without changing the answer.
   */
  private filterSql(f: CallFilter | null | undefined, params: Params): { where: string[]; narrow: string[] } {
    const where: string[] = []
    const narrow: string[] = []
    if (!f) return { where, narrow }
    const list = (name: string, values: string[] | null | undefined, column: string) => {
      if (!values) return
      checkFilterList(name, values)
      const l = params.add(listValue(values))
      where.push(`list_contains(${l}, m.${column})`)
      narrow.push(`list_contains(${l}, ${column})${rangeOf(values, column, params)}`)
    }
    if (f.op_names) {
      const any = opNamesSql(f.op_names, params)
      where.push(any.replaceAll('op_name', 'm.op_name'))
      narrow.push(any)
    }
    list('parent_ids', f.parent_ids, 'parent_id')
    list('trace_ids', f.trace_ids, 'trace_id')
    list('call_ids', f.call_ids, 'id')
    list('thread_ids', f.thread_ids, 'thread_id')
    list('turn_ids', f.turn_ids, 'turn_id')
    list('svc_user_ids', union(f.svc_user_ids, f.wb_user_ids), 'user_id')
    list('svc_run_ids', union(f.svc_run_ids, f.wb_run_ids), 'run_id')
    for (const name of ['input_refs', 'output_refs'] as const) {
      const v = f[name]
      if (!v) continue
      checkFilterList(name, v)
      where.push(`list_has_any(m.${name}, ${params.add(listValue(v))})`)
    }
    if (f.trace_roots_only) where.push('m.parent_id IS NULL')
    return { where, narrow }
  }

  /**
   * The merged, live calls of a project that match, as SQL with its parameters. `light` merges only
   * the columns the filter, query and sort read (the large JSON ones are left out unless named).
   */
  private matching(project: string, opts: QueryOptions, params: Params, light = false, orderSql = '', extra: Extra = {}): string {
    const p = params.add(project)
    const { where: filters, narrow: narrowed } = this.filterSql(opts.filter, params)
    const narrow = [...narrowed, ...(extra.narrow ?? [])]
    const where = ['m.started_at IS NOT NULL', 'm.deleted_at IS NULL', ...filters, ...(extra.where ?? [])]
    if (opts.query) where.push(`coalesce(${compileQuery(opts.query, params)}, false)`)
    const inner = [`project_id = ${p}`]
    // A condition on the id itself holds for every part of the call: it filters the merge's input directly.
    for (const n of narrow)
      inner.push(/^list_contains\(\$\d+, id\)/.test(n) ? n : `id IN (SELECT id FROM all_parts WHERE project_id = ${p} AND ${n})`)
    inner.push(...(extra.parts ?? []))
    const text = where.join(' ') + ' ' + orderSql + ' ' + (extra.columns ?? []).map((c) => `m.${c}`).join(' ')
    const named = (c: string) => new RegExp(`\\bm\\.${c}\\b`).test(text)
    // `only`: the caller reads just these (plus what the conditions name); fewer columns, a cheaper merge.
    const columns = extra.only
      ? FOLDED.filter((c) => extra.only!.includes(c) || named(c))
      : light
        ? FOLDED.filter((c) => !HEAVY.has(c) || named(c))
        : FOLDED
    const refs = !light || /\bm\.(input|output)_refs\b/.test(text)
    return `(${merged(columns, refs)} WHERE ${inner.join(' AND ')} GROUP BY project_id, id) m WHERE ${where.join(' AND ')}`
  }

  private orderBy(sort: QueryOptions['sort_by'], params: Params): string {
    if (sort === undefined || sort === null) return 'ORDER BY m.started_at ASC, m.id ASC'
    if (sort.length === 0) return ''
    const keys: string[] = []
    for (const s of sort) {
      const dir = s.direction === 'desc' ? 'DESC' : 'ASC'
      const f = fieldSql(s.field, params)
      if (f.json || f.type === 'string') {
        // Numbers before strings, missing last, in either direction (reference §3.5, mixed-type rule).
        keys.push(
          `(${f.sql}) IS NULL ASC`,
          `TRY_CAST(${f.sql} AS DOUBLE) IS NULL ASC`,
          `TRY_CAST(${f.sql} AS DOUBLE) ${dir}`,
          `(${f.sql}) ${dir}`,
        )
      } else keys.push(`(${f.sql}) ${dir} NULLS LAST`)
    }
    return `ORDER BY ${keys.join(', ')}, m.id ASC`
  }

  /** A fresh connection for one read (a streaming result holds its connection) and its timeout guard. */
  private async readConn(): Promise<{ conn: DuckDBConnection; guarded: <T>(p: () => Promise<T>) => Promise<T> }> {
    await this.visible()
    const conn = await this.db.connect()
    return { conn, guarded: interruptAfter(conn, this.opts.queryTimeoutMs) }
  }

  private async readAll(sql: string, params: Params): Promise<Record<string, unknown>[]> {
    const { conn, guarded } = await this.readConn()
    try {
      const reader = await guarded(() => conn.runAndReadAll(sql, params.values))
      return objects(reader.columnNames(), reader.getRowsJS())
    } finally {
      conn.closeSync()
    }
  }

  private selectSql(project: string, opts: QueryOptions, params: Params): string {
    const order = this.orderBy(opts.sort_by, params)
    let sql = `SELECT ${SELECT_OUT} FROM ${this.matching(project, opts, params, false, order)} ${order}`
    if (opts.limit !== undefined && opts.limit !== null) sql += ` LIMIT ${params.add(opts.limit)}`
    if (opts.offset) sql += ` OFFSET ${params.add(opts.offset)}`
    return sql
  }

  /**
   * A page (limit + offset up to PAGE_IDS) is found in two steps: the ids of the page from a merge of
   * the light columns only, then the whole calls for those ids. The large JSON columns of a project
   * are then merged for a page, not for every matching call.
   */
  private async pageSql(project: string, opts: QueryOptions): Promise<{ sql: string; params: Params } | null> {
    if (opts.limit === undefined || opts.limit === null || opts.limit + (opts.offset ?? 0) > PAGE_IDS) return null
    const params = new Params()
    const order = this.orderBy(opts.sort_by, params)
    let sql = `SELECT m.id FROM ${this.matching(project, opts, params, true, order)} ${order} LIMIT ${params.add(opts.limit)}`
    if (opts.offset) sql += ` OFFSET ${params.add(opts.offset)}`
    const ids = (await this.readAll(sql, params)).map((r) => String(r.id))
    // An empty list has no element type for DuckDB to bind; an empty page needs no second step.
    if (ids.length === 0) return { sql: 'SELECT 1 WHERE false', params: new Params() }
    const out = new Params()
    const p = out.add(project)
    const l = out.add(listValue(ids))
    return {
      sql: `SELECT ${SELECT_OUT} FROM (${MERGED} WHERE project_id = ${p} AND list_contains(${l}, id) GROUP BY project_id, id) m
        WHERE m.deleted_at IS NULL ORDER BY list_position(${l}, m.id)`,
      params: out,
    }
  }

  async query(project: string, opts: QueryOptions): Promise<CallRecord[]> {
    const page = await this.pageSql(project, opts)
    if (page) return (await this.readAll(page.sql, page.params)).map(toCall)
    const params = new Params()
    return (await this.readAll(this.selectSql(project, opts, params), params)).map(toCall)
  }

  /**
   * The same as query, a chunk (~2048 calls) at a time, pulled as the consumer asks: memory stays
   * bounded whatever the result size. The first chunk is fetched before this resolves, so a bad
   * query fails before any response is sent.
   */
  async stream(project: string, opts: QueryOptions): Promise<AsyncGenerator<CallRecord[]>> {
    const page = await this.pageSql(project, opts)
    let sql: string
    let params: Params
    if (page) ({ sql, params } = page)
    else {
      params = new Params()
      sql = this.selectSql(project, opts, params)
    }
    const { conn, guarded } = await this.readConn()
    try {
      const result = await guarded(() => conn.stream(sql, params.values))
      const names = result.columnNames()
      const chunks = result.yieldRowsJs()
      const first = await guarded(() => chunks.next())
      return (async function* () {
        try {
          for (let next = first; !next.done; next = await guarded(() => chunks.next())) yield objects(names, next.value).map(toCall)
        } finally {
          conn.closeSync()
        }
      })()
    } catch (e) {
      conn.closeSync()
      throw e
    }
  }

  /**
   * The merged, live calls of a project matching a filter and query, with only the light columns
   * plus `extra.columns`, as a relation (`... m WHERE ...`) for other modules' SQL (statistics).
   */
  relation(project: string, opts: QueryOptions, params: Params, extra: Extra = {}): string {
    return this.matching(project, opts, params, true, '', extra)
  }

  /** Runs a read (with the store's query timeout) and returns its rows. */
  rows(sql: string, params: Params): Promise<Record<string, unknown>[]> {
    return this.readAll(sql, params)
  }

  async count(project: string, opts: QueryOptions): Promise<number> {
    const params = new Params()
    const limit = opts.limit ? ` LIMIT ${params.add(opts.limit)}` : ''
    const sql = `SELECT count(*)::BIGINT AS n FROM (SELECT 1 FROM ${this.matching(project, opts, params, true)}${limit})`
    return Number((await this.readAll(sql, params))[0]!.n)
  }

  /**
   * `total_storage_size_bytes` (reference §3.6): over the matching root calls, the JSON bytes
   * (attributes, inputs, output, summary) of every live call of their traces.
   */
  async traceStorageBytes(project: string, opts: QueryOptions): Promise<number> {
    const params = new Params()
    const limit = opts.limit ? ` LIMIT ${params.add(opts.limit)}` : ''
    const roots = `SELECT m.trace_id FROM ${this.matching(project, opts, params, true, '', { where: ['m.parent_id IS NULL'] })}${limit}`
    const p = params.add(project)
    const sql = `SELECT coalesce(sum(coalesce(octet_length(encode(m.attributes)), 0) + coalesce(octet_length(encode(m.inputs)), 0)
        + coalesce(octet_length(encode(m.output)), 0) + coalesce(octet_length(encode(m.summary)), 0)), 0)::BIGINT AS n
      FROM (${MERGED} WHERE project_id = ${p} AND id IN (SELECT id FROM all_parts WHERE project_id = ${p} AND trace_id IN (${roots})) GROUP BY project_id, id) m
      WHERE m.deleted_at IS NULL AND m.started_at IS NOT NULL`
    return Number((await this.readAll(sql, params))[0]!.n)
  }

  async read(project: string, id: string): Promise<CallRecord | null> {
    const [call] = await this.query(project, { filter: { call_ids: [id] }, limit: 1 })
    return call ?? null
  }

  /** The given live calls and all their live descendants. */
  async withDescendants(project: string, ids: string[]): Promise<string[]> {
    const params = new Params()
    const p = params.add(project)
    const l = params.add(listValue(ids))
    const sql = `WITH RECURSIVE m AS (SELECT * FROM (${merged(['parent_id'], false)} WHERE project_id = ${p} GROUP BY project_id, id) WHERE deleted_at IS NULL),
      d(id) AS (SELECT id FROM m WHERE list_contains(${l}, id) UNION SELECT m.id FROM m JOIN d ON m.parent_id = d.id)
      SELECT id FROM d`
    return (await this.readAll(sql, params)).map((r) => String(r.id))
  }

  async close(): Promise<void> {
    if (this.timer) clearInterval(this.timer)
    await this.flushChain
    this.closed = true
    await this.settled([...this.pendingByGen.keys()])
    await this.wal.close()
    this.writer.closeSync()
    this.maint.closeSync()
    this.db.closeSync()
    await fs.rm(path.join(this.dir, 'LOCK'), { force: true })
  }
}

/**
 * Wraps each wait on DuckDB so that one running past `ms` is interrupted and answers 504. An
 * interrupted streaming query does not always fail: its next fetch may simply find no more rows.
 * So the flag, not the outcome, decides — a timed-out read never passes for a complete one.
 */
function interruptAfter(conn: DuckDBConnection, ms: number) {
  let timedOut = false
  const fail = () => new DomainError(504, `Query took longer than ${ms} ms and was stopped; narrow the filter or page with limit`)
  return async <T>(p: () => Promise<T>): Promise<T> => {
    if (timedOut) throw fail()
    const t = setTimeout(() => {
      timedOut = true
      conn.interrupt()
    }, ms)
    try {
      const out = await p()
      if (timedOut) throw fail()
      return out
    } catch (e) {
      if (timedOut) throw fail()
      throw e
    } finally {
      clearTimeout(t)
    }
  }
}

/** Filter lists are bounded (each becomes a bound list parameter): past the bound, 400. */
export function checkFilterList(name: string, values: readonly unknown[]): void {
  if (values.length > MAX_FILTER_LIST) throw new DomainError(400, `filter.${name} has more than ${MAX_FILTER_LIST} entries`)
}

/** `filter.op_names` as a condition on a column `op_name`; `weave:///e/p/op/name:*` matches every version. */
export function opNamesSql(names: string[], params: Params): string {
  checkFilterList('op_names', names)
  const exact = names.filter((n) => !n.endsWith(':*'))
  // An empty list literal has no element type for DuckDB to bind: leave the term out instead.
  const ors = exact.length ? [`list_contains(${params.add(listValue(exact))}, op_name)`] : []
  for (const n of names.filter((x) => x.endsWith(':*'))) ors.push(`starts_with(op_name, ${params.add(n.slice(0, -1))})`)
  return ors.length ? `(${ors.join(' OR ')})` : 'false'
}

/**
 * ` AND column BETWEEN min AND max` of a list filter: segments are sorted by id (and UUIDv7 ids and
 * trace ids follow time), so DuckDB's row-group statistics skip what lies outside — a list match
 * alone cannot use them. Only for ASCII values, where JavaScript's order is DuckDB's byte order.
 */
export function rangeOf(values: string[], column: string, params: Params): string {
  if (values.length === 0 || values.some((v) => !/^[\x20-\x7e]*$/.test(v))) return ''
  let lo = values[0]!
  let hi = values[0]!
  for (const v of values) {
    if (v < lo) lo = v
    if (v > hi) hi = v
  }
  return ` AND ${column} >= ${params.add(lo)} AND ${column} <= ${params.add(hi)}`
}

/**
 * Rows as objects. DuckDB's own row-object conversion costs several times more than its row arrays
 * (150 ms against 20 for 10,000 calls with usage lists), so objects are built here.
 */
function objects(names: string[], rows: unknown[][]): Record<string, unknown>[] {
  const out: Record<string, unknown>[] = new Array(rows.length)
  for (let i = 0; i < rows.length; i++) {
    const row = rows[i]!
    const o: Record<string, unknown> = {}
    for (let j = 0; j < names.length; j++) o[names[j]!] = row[j]
    out[i] = o
  }
  return out
}

function walNumber(name: string): number {
  return Number(/^wal-(\d{6})\.log$/.exec(name)![1])
}

function union(a: string[] | null | undefined, b: string[] | null | undefined): string[] | undefined {
  if (!a && !b) return undefined
  return [...new Set([...(a ?? []), ...(b ?? [])])]
}

const parse = (v: unknown) => (v === null || v === undefined ? null : JSON.parse(String(v)))

function toCall(r: Record<string, unknown>): CallRecord {
  const summary = (parse(r.summary) as Record<string, unknown> | null) ?? {}
  const weave: Record<string, unknown> = { ...((summary.weave as Record<string, unknown>) ?? {}) }
  weave.status = r.d_status
  weave.trace_name = r.d_trace_name
  if (r.d_latency !== null && r.d_latency !== undefined) weave.latency_ms = Number(r.d_latency)
  if (r.display_name) weave.display_name = r.display_name
  return {
    id: r.id,
    project_id: r.project_id,
    op_name: r.op_name,
    display_name: r.display_name ?? null,
    trace_id: r.trace_id,
    parent_id: r.parent_id ?? null,
    thread_id: r.thread_id ?? null,
    turn_id: r.turn_id ?? null,
    started_at: isoFromMicros(r.started_us as bigint),
    ended_at: isoFromMicros((r.ended_us as bigint) ?? null),
    attributes: parse(r.attributes) ?? {},
    inputs: parse(r.inputs) ?? {},
    output: parse(r.output),
    exception: r.exception ?? null,
    summary: { ...summary, weave },
    svc_user_id: r.user_id ?? null,
    svc_run_id: r.run_id ?? null,
    svc_run_step: r.run_step === null || r.run_step === undefined ? null : Number(r.run_step),
    svc_run_step_end: r.run_step_end === null || r.run_step_end === undefined ? null : Number(r.run_step_end),
    deleted_at: null,
  }
}

export { CALL_COLUMNS }
