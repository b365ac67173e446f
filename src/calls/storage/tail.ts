import fs from 'node:fs/promises'
import path from 'node:path'
import { listValue, type DuckDBConnection, type DuckDBPreparedStatement } from '@duckdb/node-api'
import { DomainError, diskFull, outOfMemory } from '../../core/errors.js'
import { Durations } from '../../core/durations.js'
import { failpointCount, hit } from '../../core/failpoints.js'
import { PART_COLUMNS, PART_READ_COLUMNS } from '../model.js'
import { ArrowGroupScan, ARROW_SCAN_SQL } from '../arrow/parts-scan.js'
import { isArrowBatch } from './wal.js'

/** Tail rows also carry the number of the log they were appended to, so a flush takes exactly that log's parts. */
const TAIL_COLUMNS = PART_COLUMNS + ', wal_gen INTEGER NOT NULL'

/**
 * Fault injection for tests: with WEFT_FAILPOINTS=tail-insert, a batch holding this marker fails to
 * reach the tail (as a DuckDB error would), after it was logged and acknowledged.
 */
const TAIL_MARKER = Buffer.from('weft-failpoint:tail-insert')
const tailFailpoint = (process.env.WEFT_FAILPOINTS ?? '').split(',').includes('tail-insert')
/** WEFT_FAILPOINTS=tail-oom:N: the first N tail inserts fail as DuckDB does past its memory limit. */
let oomFailpoint = failpointCount('tail-oom') ?? 0

/**
 * How long a batch that runs the tail insert out of memory is retried before the store gives up on it (and
 * stops acknowledging, as for any other failure). Memory comes back as queries finish (their hash tables and sorts
 * held 1.7 of the store's 3 GiB in the soak when a commit could not pin a block) and as a flush empties the tail.
 */
const OOM_RETRY_MS = 120_000
/** Out of memory, or of disk for a group's file (see moveNow): both come back, so the batch is retried (see moveRetrying). */
const shortOfRoom = (e: unknown) => outOfMemory(e) || diskFull(e)
const OOM_BACKOFF_MAX_MS = 2_000

/**
 * Encoded batches (see encodeParts) reach the tail as one JSON file per group: the batches' parts joined into one
 * array, read by DuckDB's JSON reader straight into the tail's columns, each part numbered by its place in the
 * file (WITH ORDINALITY). A group is a run of batches whose seqs follow on (see takeRun), so one number says where
 * the run starts. The former way (each batch a row of a stage table, then one `from_json` of the staged batches
 * into a list of structs, unnested) took ~1.35x the process CPU per part through the store, and ~1.45x in a
 * replay (bench/README, Soak): the list and its unnest go, and so do the stage's insert per batch and its clean-up.
 * The heavy JSON columns mostly arrive as JSON strings (RawJson.exact, encodeParts), which DuckDB copies into their
 * VARCHAR columns; an object or array is parsed and written back as text, which took half the insert's CPU.
 * $1: the group's file, $2: its first part's seq, $3: the log generation, $4: the file's size (no part is larger;
 * DuckDB's reader refuses an object past it, and takes at least its default of 16 MiB).
 */
const MOVE_SQL = `INSERT INTO call_parts
  SELECT $2 + ordinality - 1, kind, project_id, id, trace_id, parent_id, thread_id, turn_id, op_name, display_name,
    make_timestamp(started_us), make_timestamp(ended_us), make_timestamp(deleted_us),
    attributes, inputs, output, summary, exception, user_id, run_id, run_step, run_step_end,
    input_refs, output_refs, usage, $3
  FROM read_json($1, format = 'array', columns = ${PART_READ_COLUMNS}, maximum_object_size = $4) WITH ORDINALITY`
const COMMA = Buffer.from(',')
const OPEN = Buffer.from('[')
const CLOSE = Buffer.from(']')

/**
 * Acknowledged batches wait to move into the tail until `bytes` are staged, a read or a flush needs them (see
 * visible, settled), or the first of them has waited `delayMs` (tests change them). An insert has a fixed cost of ~8-10 ms of
 * DuckDB's time however few parts it adds (planning, the group file, the commit): moved one 100-part batch at a time
 * the tail took 110-130 ms of CPU per 1,000 parts, five batches a time 35-44 (in process, 200 batches); under the
 * soak's 29 batches a second that was ~60 % of a core. Reads still see every acknowledged write (they wait for it).
 */
export const tailMoves = { bytes: 2 * 2 ** 20, delayMs: 100 }

/** A batch (JSON or Arrow: see isArrowBatch), the seq of its first part and its log generation. */
interface Batch {
  batch: Buffer
  base: bigint
  gen: number
}

/**
 * The most parts of Arrow batches in one statement (see moveArrow): the batches' columns are decoded and held until it
 * commits. Their rows are filled in on the event loop a chunk at a time, so a group's size does not hold it.
 */
const ARROW_GROUP_PARTS = 8192

interface Staged extends Batch {
  /** When it was handed over (performance.now()): a batch that has waited `tailMoves.delayMs` moves (see due). */
  at: number
  /** Its parts (unknown in a replay, which inserts one record at a time and counts what the insert added). */
  count?: number
  resolve: (n: number) => void
  reject: (e: unknown) => void
}

/**
 * The tail: the in-memory table `call_parts` of parts not yet in a segment, and the batches on their
 * way into it. A write is acknowledged once it is in the log; it reaches the tail table in the
 * background, together with whatever else arrived meanwhile (one insert for all: DuckDB's cost per
 * insert is high, and waiting for it held every write to one insert at a time).
 */
export class Tail {
  /** Parts in the tail (or on their way to it), their encoded bytes, and since when it holds any. */
  rows = 0
  bytes = 0
  since = 0
  /** Set when a logged batch could not be added to the tail; see drain. */
  failure: unknown = null
  /** Tail inserts retried after running out of memory (see moveRetrying), and whether one is retrying now. */
  oomRetries = 0
  retrying = false
  /** Frees what memory the database can give back before a retry (set by the store: a checkpoint). */
  relieve: () => Promise<void> = () => Promise.resolve()
  /** Batches logged or being logged but not yet in the tail, per log generation (see flushTail). */
  private readonly pendingByGen = new Map<number, number>()
  private pendingDrained: (() => void)[] = []
  /** Batches waiting for the tail; they go in together, one statement for all (see drain). */
  private staged: Staged[] = []
  private inserting = false
  /** Moves the staged batches once the first has waited `tailMoves.delayMs` (see schedule). */
  private moveTimer?: NodeJS.Timeout
  /** Group files written so far (each gets a new name: see moveNow). */
  private files = 0
  /** The writer connection's last tail statement group (see serial). */
  private last: Promise<unknown> = Promise.resolve()
  private moveStmt?: DuckDBPreparedStatement
  /** Inserts Arrow groups (see moveArrow), on a connection of its own, and the scan it reads them from. */
  private arrowStmt?: DuckDBPreparedStatement
  private arrowScan?: ArrowGroupScan
  /** Batches handed to the tail, and those through (in order: groups go in FIFO). */
  private stagedTotal = 0
  private movedTotal = 0
  private stagedBytes = 0
  private visibleWaiters: { target: number; resolve: () => void }[] = []
  /** Reads waiting for acknowledged batches to reach the table; inserts into it; its rebuilds after a flush (see drop). */
  readonly timings = { readWaits: new Durations(), inserts: new Durations(), rebuilds: new Durations() }
  /** Parts acknowledged per log generation, for the tail's size after a flush. */
  private readonly partsByGen = new Map<number, { parts: number; bytes: number }>()

  private constructor(
    private readonly writer: DuckDBConnection,
    private readonly fileDir: string,
    private readonly appendConn: DuckDBConnection,
  ) {}

  /**
   * Creates the tail table on the writer connection; group files go in `fileDir` (emptied here). Arrow groups go in
   * on `appendConn` (see moveArrow), so that a JSON group's insert on the writer does not wait for theirs.
   */
  static async create(writer: DuckDBConnection, fileDir: string, appendConn: DuckDBConnection = writer): Promise<Tail> {
    await fs.rm(fileDir, { recursive: true, force: true })
    await fs.mkdir(fileDir, { recursive: true })
    await writer.run(`CREATE TABLE call_parts (${TAIL_COLUMNS})`)
    return new Tail(writer, fileDir, appendConn)
  }

  /** Bytes of acknowledged batches not yet in the tail table. */
  get unmovedBytes(): number {
    return this.stagedBytes
  }

  /** Log generations with a batch between its log append and the tail. */
  get pendingGens(): number[] {
    return [...this.pendingByGen.keys()]
  }

  /** A batch of this log generation is on its way (logged or being logged); see released. */
  pending(gen: number): void {
    this.pendingByGen.set(gen, (this.pendingByGen.get(gen) ?? 0) + 1)
  }

  /** Parts and bytes now in the tail (or on their way to it), for when to flush. */
  counted(gen: number, parts: number, bytes: number): void {
    if (this.rows === 0) this.since = Date.now()
    this.rows += parts
    this.bytes += bytes
    const n = this.partsByGen.get(gen) ?? { parts: 0, bytes: 0 }
    this.partsByGen.set(gen, { parts: n.parts + parts, bytes: n.bytes + bytes })
  }

  /** These log generations' parts left the tail (they are in a segment now). */
  dropped(gens: number[]): void {
    for (const g of gens) {
      const n = this.partsByGen.get(g)
      this.rows -= n?.parts ?? 0
      this.bytes -= n?.bytes ?? 0
      this.partsByGen.delete(g)
    }
    this.since = Date.now()
  }

  released(gen: number): void {
    const left = this.pendingByGen.get(gen)! - 1
    if (left === 0) this.pendingByGen.delete(gen)
    else this.pendingByGen.set(gen, left)
    if (left === 0) for (const wake of this.pendingDrained.splice(0)) wake()
  }

  /** Resolves once no batch of these log generations is between its log append and the tail. */
  async settled(gens: number[]): Promise<void> {
    while (gens.some((g) => this.pendingByGen.has(g)))
      await new Promise<void>((r) => {
        this.pendingDrained.push(r)
        this.schedule()
      })
  }

  /** The batches acknowledged so far, for a read to wait for later (see visible). */
  mark(): number {
    return this.stagedTotal
  }

  /**
   * Resolves once every batch acknowledged so far (or up to `target`, a mark taken earlier) is in the tail table.
   * Reads call it first; the reads of one request wait for the writes acknowledged before the request began, so
   * that its second read does not wait for a move of what arrived during its first.
   */
  async visible(target = this.stagedTotal): Promise<void> {
    if (this.movedTotal >= target) return
    await this.timings.readWaits.time(
      new Promise<void>((resolve) => {
        this.visibleWaiters.push({ target, resolve })
        this.schedule()
      }),
    )
  }

  /**
   * Starts moving the staged batches now if they are due (`tailMoves.bytes` staged, or a read or flush waiting for them), or
   * once the first has waited `tailMoves.delayMs`. Nothing while a move runs: it looks again when it ends.
   */
  private schedule(): void {
    if (this.inserting || this.staged.length === 0) return
    if (this.due()) {
      clearTimeout(this.moveTimer)
      this.moveTimer = undefined
      void this.drain()
    } else
      this.moveTimer ??= setTimeout(
        () => {
          this.moveTimer = undefined
          if (!this.inserting) void this.drain()
        },
        Math.max(0, tailMoves.delayMs - (performance.now() - this.staged[0]!.at)),
      )
  }

  failedError(): DomainError {
    return new DomainError(
      503,
      `The calls store could not add acknowledged writes to its tail (${(this.failure as Error).message}); they are kept in its log and come back at the next start: restart the server`,
    )
  }

  /**
   * Adds an encoded batch of `count` parts to the tail; resolves with the number of parts its group added. DuckDB
   * parses the JSON on its own threads. Batches that arrive while an insert runs go in together with
   * the next one (a replay awaits each record, so there a group is one record and the number is its own).
   */
  insert(batch: Buffer, base: bigint, gen: number, count?: number): Promise<number> {
    this.stagedTotal++
    this.stagedBytes += batch.length
    return new Promise((resolve, reject) => {
      this.staged.push({ batch, base, gen, count, resolve, reject, at: performance.now() })
      this.schedule()
    })
  }

  /**
   * Log records of one generation whose parts are numbered in a row from `base` (a replay), in one statement; the
   * number of parts they hold. All JSON or all Arrow (isArrowBatch). Not retried: the replay goes record by record
   * after a failure.
   */
  insertRecords(batches: Buffer[], base: bigint, gen: number): Promise<number> {
    return this.move(batches.map((batch) => ({ batch, base, gen })))
  }

  /**
   * The staged batches from the first on whose seqs follow on in one log generation (a group numbers its parts from
   * its first seq), all JSON or all Arrow. Batches are logged in seq order but may be handed over out of it; the rest
   * wait for the next turn. An Arrow group holds at most ARROW_GROUP_PARTS parts.
   */
  private takeRun(): Staged[] {
    const arrow = isArrowBatch(this.staged[0]!.batch)
    let n = 1
    let parts = this.staged[0]!.count ?? 0
    for (; n < this.staged.length; n++) {
      const [a, b] = [this.staged[n - 1]!, this.staged[n]!]
      if (a.count === undefined || b.gen !== a.gen || b.base !== a.base + BigInt(a.count) || isArrowBatch(b.batch) !== arrow) break
      if (arrow && (parts += b.count ?? 0) > ARROW_GROUP_PARTS) break
    }
    return this.staged.splice(0, n)
  }

  /** Moves the staged batches, group by group, while they are due; leaves the rest (staged meanwhile) to schedule. */
  private async drain(): Promise<void> {
    this.inserting = true
    for (let first = true; this.staged.length > 0 && (first || this.due()); first = false) {
      const group = this.takeRun()
      try {
        const n = await this.moveRetrying(group)
        for (const g of group) g.resolve(n)
      } catch (e) {
        // The batches are in the log but not in the tail: a flush now would drop them with the log.
        // Nothing more is acknowledged or flushed; a restart replays the log.
        this.failure ??= e
        process.emitWarning(`calls store: a logged batch did not reach the tail: ${(e as Error).message}`)
        for (const g of group) g.reject(e)
      }
      this.movedTotal += group.length
      for (const g of group) this.stagedBytes -= g.batch.length
      this.visibleWaiters = this.visibleWaiters.filter((w) => (w.target <= this.movedTotal ? (w.resolve(), false) : true))
    }
    this.inserting = false
    this.schedule()
  }

  /** Whether the staged batches should move now rather than wait (see schedule). */
  private due(): boolean {
    return (
      this.stagedBytes >= tailMoves.bytes ||
      this.visibleWaiters.length > 0 ||
      this.pendingDrained.length > 0 ||
      performance.now() - this.staged[0]!.at >= tailMoves.delayMs
    )
  }

  /**
   * A group that runs DuckDB out of memory goes in again one batch at a time (a group parses all its batches in
   * one statement, so one at a time needs less), each retried with backoff while memory is short. A failed insert
   * is one statement and leaves nothing behind, so a retry cannot add a part twice. A disk too full for the group's
   * file is retried the same way (the batches are safe in the log meanwhile). Any other error is final.
   */
  private async moveRetrying(group: Staged[]): Promise<number> {
    try {
      return await this.move(group)
    } catch (e) {
      if (!shortOfRoom(e)) throw e
    }
    this.retrying = true
    try {
      let n = 0
      for (const g of group) n += await this.moveOne(g, Date.now())
      return n
    } finally {
      this.retrying = false
    }
  }

  private async moveOne(g: Staged, since: number): Promise<number> {
    for (let attempt = 0; ; attempt++) {
      if (attempt > 0) {
        this.oomRetries++
        await this.relieve().catch(() => {})
        await new Promise((r) => setTimeout(r, Math.min(OOM_BACKOFF_MAX_MS, 50 * 2 ** attempt)))
      }
      try {
        return await this.move([g])
      } catch (e) {
        if (!shortOfRoom(e) || Date.now() - since > OOM_RETRY_MS) throw e
      }
    }
  }

  /** One group of batches into the tail table (see moveNow), never beside a rebuild of the table (see drop). */
  private move(group: Batch[]): Promise<number> {
    return this.serial(() => this.timings.inserts.time(this.moveNow(group)))
  }

  /** Runs fn after whatever the writer connection is doing for the tail (an insert or a rebuild) is done. */
  private serial<T>(fn: () => Promise<T>): Promise<T> {
    const run = this.last.then(fn, fn)
    this.last = run.catch(() => {})
    return run
  }

  /**
   * Takes these log generations' parts out of the tail table, after their flush. Not a DELETE: DuckDB frees
   * deleted rows (and their long strings, OVERFLOW_STRINGS) only at a checkpoint, and a checkpoint frees nothing
   * while readers hold transactions, which under load they always do: a 20-minute soak grew the tail's dead
   * strings to 745 MiB for a tail of under 100 MiB (soak-2026-11-25T00-58-32-049Z). The rows kept are copied into
   * a new table that takes the old one's name, in one transaction; the old table's memory goes when its last
   * reader finishes. Readers see one table or the other, whole.
   */
  drop(gens: number[]): Promise<void> {
    return this.serial(() => this.timings.rebuilds.time(this.rebuild(gens)))
  }

  private async rebuild(gens: number[]): Promise<void> {
    await this.writer.run('BEGIN TRANSACTION')
    try {
      await this.writer.run(`CREATE TABLE call_parts_next (${TAIL_COLUMNS})`)
      await this.writer.run('INSERT INTO call_parts_next SELECT * FROM call_parts WHERE NOT list_contains($1::INTEGER[], wal_gen)', [
        listValue(gens),
      ])
      await this.writer.run('DROP TABLE call_parts')
      await this.writer.run('ALTER TABLE call_parts_next RENAME TO call_parts')
      await this.writer.run('COMMIT')
    } catch (e) {
      await this.writer.run('ROLLBACK').catch(() => {})
      throw e
    }
    // The inserts were prepared against the old table.
    this.moveStmt?.destroySync()
    this.moveStmt = undefined
    this.arrowStmt?.destroySync()
    this.arrowStmt = undefined
  }

  /** Closes the Arrow inserts' connection (the store is closing; every batch is in). */
  close(): void {
    this.arrowStmt?.destroySync()
    this.arrowStmt = undefined
    if (this.appendConn !== this.writer) this.appendConn.closeSync()
  }

  /**
   * A group of Arrow batches into the tail table: one `INSERT ... SELECT` from a table function that hands DuckDB the
   * batches' rows a data chunk at a time (ArrowGroupScan). The statement runs on DuckDB's side of the binding (a
   * libuv thread): the event loop only fills each chunk from the Arrow buffers when DuckDB asks for it (~1 µs a part),
   * between other work. Through an appender, whose flush is synchronous, DuckDB's append and commit (~10 µs a part)
   * ran on the event loop too, and a group of 1,000 parts held it for 10-30 ms (bench/README, 2026-12-07). A failed
   * statement adds nothing, as a JSON group's.
   */
  private async moveArrow(group: Batch[]): Promise<number> {
    if (!this.arrowScan) {
      this.arrowScan = new ArrowGroupScan()
      this.appendConn.registerTableFunction(this.arrowScan.function(await this.tailColumns()))
    }
    this.arrowStmt ??= await this.appendConn.prepare(ARROW_SCAN_SQL)
    return this.arrowScan.run(group, this.appendConn, () => this.arrowStmt!.run())
  }

  /** The tail table's column names and types, for the Arrow scan's result. */
  private async tailColumns() {
    const r = await this.appendConn.run('SELECT * FROM call_parts LIMIT 0')
    return { names: r.columnNames(), types: r.columnTypes() }
  }

  /**
   * One group of batches into the tail table, by way of a file holding their parts as one JSON array (a new name
   * each time, removed after: DuckDB never sees two contents under one name); the number of parts it added.
   */
  private async moveNow(group: Batch[]): Promise<number> {
    this.moveStmt ??= await this.writer.prepare(MOVE_SQL)
    if (tailFailpoint && group.some((g) => g.batch.includes(TAIL_MARKER))) throw new Error('failpoint tail-insert')
    if (oomFailpoint > 0 && oomFailpoint--)
      throw new Error('TransactionContext Error: Failed to commit: failed to pin block of size 256.0 KiB (failpoint tail-oom)')
    if (isArrowBatch(group[0]!.batch)) return this.moveArrow(group)
    const file = path.join(this.fileDir, `group-${++this.files}.json`)
    const size = await writeGroup(file, group)
    try {
      this.moveStmt.bind([file, group[0]!.base, group[0]!.gen, Math.max(size, 1024)])
      return Number((await this.moveStmt.runAndReadAll()).getRowsJS()[0]?.[0] ?? 0)
    } finally {
      await fs.rm(file, { force: true })
    }
  }
}

/**
 * Writes a group's parts to `file` as one JSON array; returns its size. A batch is an array of parts (encodeParts):
 * one batch goes as it is, several as their insides joined by commas.
 */
async function writeGroup(file: string, group: Batch[]): Promise<number> {
  hit('tail.file')
  const inside = (b: Buffer) => b.subarray(1, -1)
  const pieces =
    group.length === 1 ? [group[0]!.batch] : [OPEN, ...group.flatMap((g, i) => (i ? [COMMA, inside(g.batch)] : [inside(g.batch)])), CLOSE]
  const fh = await fs.open(file, 'w')
  try {
    await fh.writev(pieces)
  } finally {
    await fh.close()
  }
  return pieces.reduce((a, b) => a + b.length, 0)
}
