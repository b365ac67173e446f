import fs from 'node:fs/promises'
import path from 'node:path'
import type { DuckDBConnection, DuckDBInstance } from '@duckdb/node-api'
import { Durations } from '../../core/durations.js'
import { DomainError } from '../../core/errors.js'
import { BlockFileWriter } from './block-file-writer.js'
import { foldSegments, idBounds, overSegmentLimit, planCompaction, swapCompacted } from './compact.js'
import { flushTail } from './flush.js'
import type { StoreOptions } from './options.js'
import { SegmentPins } from './pins.js'
import type { Manifest, Segment } from './segments.js'
import { walNumber, type StorageState } from './state.js'
import type { Tail } from './tail.js'
import type { Wal } from './wal.js'
import { BUDGET_SHARES, memoryLimitSetting, spillDir } from '../../core/duckdb-memory.js'

export type SegmentEvent = 'flush' | 'compact'

/** What the last start found: log records replayed (and parts), bytes of torn log cut off, segments, records set aside. */
export interface Recovered {
  records: number
  parts: number
  truncatedBytes: number
  segments: number
  quarantined: number
}

/**
 * Where the calls live. Every acknowledged part is first in a write-ahead log (fsynced, group
 * commit), then in an in-memory DuckDB table, the tail. The tail is flushed to immutable Parquet
 * segments listed in an atomically written manifest, after which its logs are dropped; segments are
 * compacted in turn with flushes. See open.ts for how a start replays the logs.
 */
export class Storage implements StorageState {
  /** The highest seq given to a part so far (a replay sets it as it goes). */
  seq = 0n
  /**
   * The first seq of each batch between its seq and the tail table (logging, or logged and on its way), in seq
   * order (a Set keeps insertion order, and seqs are taken in order). A batch that failed to reach the tail stays.
   */
  private readonly inFlight = new Set<bigint>()
  /** The highest seq given to a batch whose log append failed: a replay numbers the parts after it lower (see stableSeq). */
  private burnedSeq = 0n
  closed = false
  compactionResplits = 0
  /** DuckDB threads the last compaction's fold ran with (its own instance: compact.ts foldInstance); null before one. */
  foldThreads: number | null = null
  /** The instance's memory limit: its share of the budget (half of it once reader threads run), less what a fold borrows. */
  private memoryShare: number
  private lent = 0
  /** Compactions that failed (the next flush past the segment limit tries again), and the last one's error. */
  private compactionFailures = 0
  private lastCompactionError: string | null = null
  private flushChain: Promise<unknown> = Promise.resolve()
  /** The compaction under way, if any (its fold runs outside the flush chain: see compactOnce). */
  private compacting: Promise<void> | null = null
  /** A size-triggered flush is queued and has not started: later batches need not queue another. */
  private sizeFlushQueued = false
  private timer?: NodeJS.Timeout
  private readonly hooks: ((event: SegmentEvent) => Promise<void>)[] = []
  /**
   * Flushes (with their hooks: the rollups' update), compactions' folds (beside flushes) and their swaps (with hooks),
   * timed: a soak lines slow reads up against them (/admin/stats timings_ms).
   */
  readonly timings = { flushes: new Durations(), folds: new Durations(), swaps: new Durations() }
  /** Segment files held by pooled reads; WEFT_SEGMENT_RETIRE_MS (tests) shortens the wait before a replaced file goes. */
  readonly pins = new SegmentPins(Number(process.env.WEFT_SEGMENT_RETIRE_MS ?? 30_000))
  readonly blockFiles: BlockFileWriter

  constructor(
    readonly dir: string,
    public manifest: Manifest,
    public wal: Wal,
    private readonly db: DuckDBInstance,
    private readonly writer: DuckDBConnection,
    readonly maint: DuckDBConnection,
    readonly tail: Tail,
    readonly opts: Required<StoreOptions>,
    readonly recovered: Recovered,
  ) {
    this.blockFiles = new BlockFileWriter({ memoryLimit: opts.memoryLimit, spillDir: spillDir(path.dirname(dir), 'blocks') })
    this.memoryShare = opts.memoryLimit * BUDGET_SHARES.calls
  }

  /**
   * Appends a batch encoded by encodeParts and framed as a log record by walRecord. Seq numbers are
   * taken in log order, so a replay after a restart numbers every part as it was numbered here.
   * Resolves once the record is fsynced in the log (acknowledged); it reaches the tail in the
   * background (see Tail). Batches not yet in the tail are bounded in bytes: past the bound a write
   * waits for the tail.
   */
  async append(record: Buffer, count: number): Promise<void> {
    if (this.closed) throw new DomainError(503, 'The calls store is closed')
    if (this.tail.failure) throw this.tail.failedError()
    // While the tail is short of memory, batches queue up unmoved: past their bound, refuse before logging
    // rather than hold every writer (nothing refused here was acknowledged, so a client retry adds nothing twice).
    if (this.tail.retrying && this.tail.unmovedBytes > this.opts.maxUnmovedBytes)
      throw new DomainError(503, 'The calls store is short of memory and catching up on its tail; retry shortly', { retryAfterS: 2 })
    // Log and generation are taken together: a flush may switch logs while this append waits.
    const wal = this.wal
    const gen = walNumber(this.manifest.wals[this.manifest.wals.length - 1]!)
    const base = this.seq + 1n
    this.seq += BigInt(count)
    this.tail.pending(gen)
    this.inFlight.add(base)
    try {
      await wal.appendRecord(record)
    } catch (e) {
      this.tail.released(gen)
      this.inFlight.delete(base)
      const last = base + BigInt(count) - 1n
      if (last > this.burnedSeq) this.burnedSeq = last
      throw e
    }
    this.tail.counted(gen, count, record.length)
    void this.tail.insert(record.subarray(8), base, gen, count).then(
      () => {
        this.tail.released(gen)
        this.inFlight.delete(base)
      },
      // A batch that failed to reach the tail stays in flight: stableSeq never passes it (the store stops meanwhile).
      () => this.tail.released(gen),
    )
    if (this.tail.unmovedBytes > this.opts.maxUnmovedBytes) await this.tail.visible()
    if ((this.tail.rows >= this.opts.flushRows || this.tail.bytes >= this.opts.flushBytes) && !this.sizeFlushQueued) {
      // One queued flush takes the whole tail when it runs; a flush per batch over the threshold
      // would, under load, queue a train of tiny segments (and compactions).
      this.sizeFlushQueued = true
      void this.flush(() => (this.sizeFlushQueued = false)).catch(() => {})
    }
  }

  /** Flushes the tail once its oldest part is flushIntervalMs old (checked every few seconds). */
  startTimer(): void {
    const ms = this.opts.flushIntervalMs
    if (ms <= 0) return
    this.timer = setInterval(
      () => {
        if (this.tail.rows > 0 && Date.now() - this.tail.since >= ms) void this.flush().catch(() => {})
      },
      Math.min(ms, 5_000),
    )
    this.timer.unref()
  }

  /**
   * Moves the tail into a new Parquet segment (see flushTail), in turn with other flushes and with the steps of a
   * compaction that change the segments; past the segment limit it then compacts (and waits for that).
   */
  async flush(starting?: () => void): Promise<void> {
    await this.exclusive(() => (starting?.(), this.timings.flushes.time(this.flushOnce())))
    if (overSegmentLimit(this.manifest.segments, this.opts.maxSegments)) await this.compactOnce()
  }

  private async flushOnce(): Promise<void> {
    if (!(await flushTail(this))) return
    for (const hook of this.hooks) await hook('flush').catch(() => {})
  }

  /** Compacts every segment into one (see compactSegments): after any compaction under way, a new one. */
  async compact(): Promise<void> {
    await this.compacting?.catch(() => {})
    return this.compactOnce()
  }

  /**
   * One compaction (joined if one is under way): the segments chosen, and at the end the manifest swapped and the
   * hooks run, in turn with flushes; the fold between, beside them (compact.ts says why).
   */
  private compactOnce(): Promise<void> {
    if (this.compacting) return this.compacting
    const run = (async () => {
      try {
        const old = await this.exclusive(() => planCompaction(this))
        if (!old) return
        const made = await this.timings.folds.time(foldSegments(this, old))
        await this.exclusive(() => this.timings.swaps.time(this.swapOnce(old, made)))
      } catch (e) {
        this.compactionFailures++
        this.lastCompactionError = e instanceof Error ? e.message : String(e)
        throw e
      }
    })().finally(() => (this.compacting = null))
    this.compacting = run
    return run
  }

  /** A compaction's folded segments named in the manifest, then the hooks (in turn with flushes: see compactOnce). */
  private async swapOnce(old: readonly Segment[], made: Segment[]): Promise<void> {
    if (await swapCompacted(this, old, made)) for (const hook of this.hooks) await hook('compact').catch(() => {})
  }

  /**
   * Runs `hook` after every flush and compaction, in turn with them (so segments do not change
   * while it runs). Statistics keep their pre-aggregates current this way.
   */
  onSegments(hook: (event: SegmentEvent) => Promise<void>): void {
    this.hooks.push(hook)
  }

  /** Runs fn in turn with flushes and compactions. */
  exclusive<T>(fn: () => Promise<T>): Promise<T> {
    const run = this.flushChain.then(fn)
    this.flushChain = run.catch(() => {})
    return run
  }

  /** Sets the instance's memory limit (its share shrinks once reader threads take part of it: see readerSplit). */
  async limitMemory(bytes: number): Promise<void> {
    this.memoryShare = bytes
    await this.applyMemoryLimit()
  }

  /**
   * Lends `bytes` of the instance's share to a compaction's fold (compact.ts foldInstance) until it is lent back with
   * 0, so that the process stays within its budget: the fold ran inside this instance's limit before it had one of its own.
   */
  async lendMemory(bytes: number): Promise<void> {
    this.lent = bytes
    await this.applyMemoryLimit()
  }

  private async applyMemoryLimit(): Promise<void> {
    await this.maint.run(`SET GLOBAL memory_limit = '${memoryLimitSetting(Math.max(this.memoryShare - this.lent, this.memoryShare / 2))}'`)
  }

  /** A new connection to the database holding `all_parts`. */
  connect(): Promise<DuckDBConnection> {
    return this.db.connect()
  }

  /** The data directory the store lives in (its files are under `calls/`). */
  get dataDir(): string {
    return path.dirname(this.dir)
  }

  get segments(): readonly Segment[] {
    return this.manifest.segments
  }

  /** The highest seq held in segments: every part at or below it is in Parquet and never changes. */
  get flushedSeq(): number {
    return this.manifest.segments.reduce((m, x) => Math.max(m, x.max_seq), 0)
  }

  /**
   * The highest seq up to which every part is in the tail table or a segment, numbered as a replay of the logs
   * would number it; null when a replay would not (see below). Derived data may cover the tail up to here and still
   * match the store after a crash: every such part was acknowledged (logged and fsynced) before it reached the tail,
   * so a restart replays it, with the same seq. A replay numbers the logs' parts in a row from the flushed seq on;
   * seqs are taken the same way here, except that a batch whose log append failed leaves a gap. While a gap lies
   * past the flushed seq (until a flush takes the parts after it), the parts after it would come back numbered lower.
   */
  get stableSeq(): number | null {
    if (this.burnedSeq > BigInt(this.flushedSeq)) return null
    const first = this.inFlight.values().next()
    return Number(first.done ? this.seq : first.value - 1n)
  }

  /** Parts held in segments. */
  get segmentRows(): number {
    return this.manifest.segments.reduce((a, s) => a + s.rows, 0)
  }

  /** Id ranges splitting the segments into about n parts (see idBounds). */
  idRanges(n: number): Promise<string[]> {
    return idBounds(this.maint, this.dir, this.manifest.segments, n)
  }

  stats() {
    return {
      tail_parts: this.tail.rows,
      tail_bytes: this.tail.bytes,
      tail_unmoved_bytes: this.tail.unmovedBytes,
      tail_failure: this.tail.failure ? String((this.tail.failure as Error).message) : null,
      tail_oom_retries: this.tail.oomRetries,
      segments: this.manifest.segments.length,
      segment_rows: this.segmentRows,
      segment_bytes: this.manifest.segments.reduce((a, x) => a + x.bytes, 0),
      wal_bytes: this.wal.bytes,
      compaction_failures: this.compactionFailures,
      compaction_resplits: this.compactionResplits,
      compaction_fold_threads: this.foldThreads,
      last_compaction_error: this.lastCompactionError,
      block_files: { ...this.blockFiles.stats },
    }
  }

  async close(): Promise<void> {
    if (this.timer) clearInterval(this.timer)
    await this.compacting?.catch(() => {})
    await this.flushChain
    this.closed = true
    await this.blockFiles.close()
    await this.tail.settled(this.tail.pendingGens)
    await this.wal.close()
    this.tail.close()
    this.writer.closeSync()
    this.maint.closeSync()
    this.db.closeSync()
    await fs.rm(path.join(this.dir, 'LOCK'), { force: true })
  }
}
