import fs from 'node:fs/promises'
import path from 'node:path'
import { progress, type Task } from '../core/progress.js'
import type { CallColumn, CallSession, CallSource, IdSpan, SinceMerge } from '../calls/source.js'
import { mergeTouched } from './fresh-span.js'
import { Params } from '../query/params.js'
import { cleanStatements } from './rollups-clean.js'
import {
  DB,
  DDL,
  FACT_COLUMNS,
  FORMAT,
  MARK,
  META,
  TABLES,
  TIER_DIMS,
  TOKEN_NAMES,
  USAGE_CALLS,
  contribution,
  slotMs,
  storedAs,
  tableName,
  timeDim,
  usageRows,
  type Table,
  type Tier,
} from './rollup-tables.js'
import { hit } from '../core/failpoints.js'
import { CommitGate } from './commit-gate.js'
import { Durations } from '../core/durations.js'

export * from './rollup-tables.js'

/**
 * When reads have the tables catch up on the tail (Rollups.wanted): from this many parts past `x`, at most once per
 * interval. WEFT_ROLLUP_CATCH_UP_PARTS; 0 is no catch-up (parts past the last flush are corrected for by every read).
 */
export const catchUp = {
  minParts: Number(process.env.WEFT_ROLLUP_CATCH_UP_PARTS ?? 4096),
  minIntervalMs: 1000,
  /**
   * The most of the time catch-ups take: after one of d ms the next waits at least d * (1 / share - 1). A catch-up
   * costs ~0.3-0.7 s whatever its size (15 statements, each planned anew), and grows with the tables: one a second
   * held the store's turn (flushes, compactions) 30 % of a 30-minute soak (782 catch-ups, 543 s).
   */
  share: 0.2,
}

/**
 * Rows per row group of the rollup tables (DuckDB's default is 122,880): a request's edges read the minute and call tiers
 * for minutes or seconds, and DuckDB skips by row group (an 11-second edge at 1M calls: 3-4 ms to scan, 2-3 at 16,384).
 */
const ROLLUP_ROW_GROUP = 16_384

/** The rollups' log size past which an advance checkpoints their file (DuckDB's own default threshold); tests lower it. */
export const rollupCheckpoint = { logBytes: 16 * 2 ** 20 }

/**
 * Statistics pre-aggregated per (project, hour or minute, op, trace root or not) — and model for usage — over
 * every part up to a seq `x` (in Parquet, and since reads have them catch up, in the tail too: see wanted). Three
 * tables (rollup-tables.ts):
 *   rollup_calls   call count, latency count/sum/min/max, error count
 *   rollup_latency latency histogram (sketch bins, see sketch.ts) for percentiles
 *   rollup_usage   per model: pair count, and sum/count/min/max of each token metric
 * in tiers of dimensions (see Tier).
 * Parts past `x` (in the tail, or segments not yet added) are combined at query time as a correction:
 * the merged calls they touch are added as they are now and subtracted as they were at `x`
 * (freshDelta). Sums, counts and bins subtract exactly; a minimum or maximum cannot, so a
 * subtracted row marks its group `dirty` and min/max over dirty groups fall back to a scan until
 * the next compaction recomputes them from the call tier (rollups-clean.ts).
 *
 * A compaction does not invalidate the tables: it folds only parts at or below the store's flushed seq,
 * each call's parts into one row carrying their highest seq, so once `x` covers them (the flush hook
 * advanced it before the compaction ran) every call's merged state at `x` is what it was, and the
 * correction for later parts (merged now, minus merged at `x`) finds the same states to subtract.
 */
/**
 * Keeps the rollup tables current: rebuilt from the segments when there are none usable at start (or a
 * compaction folded parts they do not cover); after each flush, the flushed parts' correction is added (see the file
 * comment), and while reads come, the tail's (see wanted).
 */
export class Rollups {
  /** False until the tables are usable (found at start or first built): statistics scan until then. */
  ready = false
  /** Every part at or below this seq is in the tables (mirrors rollup_meta, read after each commit). */
  x = 0
  /** Every commit of the tables passes it: statistics read in several statements see one state (commit-gate.ts). */
  readonly gate = new CommitGate()
  /** How the tables were got at start: `loaded` from the database file, or `rebuilt` from the segments. */
  origin: 'loaded' | 'rebuilt' | null = null
  private conn?: CallSession
  private addedRows = 0
  private baseRows = 0
  /**
   * The earliest start (ms) of the calls whose rows were added since the tables were last folded: a fold folds the
   * rows from there on only. Infinity: none added; null: not known (tables loaded from the file), fold everything.
   */
  private foldFrom: number | null = null
  private building = false
  /** A catch-up on the tail is queued or running, and when the last one ended (see wanted). */
  private catching: Promise<void> | null = null
  private nextCatchUp = 0
  /** Catch-ups on the tail, timed (for /admin/stats). */
  readonly catchUps = new Durations()
  /**
   * The steps of every advance (a flush's or a catch-up's) and fold, timed since start or the last reset (/admin/stats
   * `rollups.timings_ms`): the touched calls merged now and at the mark, the tables' rows added, the commit (DuckDB's
   * write of the rollups' file, and its checkpoint when one falls due), and the folds.
   */
  readonly timings = {
    merges: new Durations(),
    inserts: new Durations(),
    commits: new Durations(),
    folds: new Durations(),
    checkpoints: new Durations(),
  }

  constructor(private readonly store: CallSource) {}

  private get dir(): string {
    return path.join(this.store.dataDir, 'rollups')
  }

  async start(): Promise<void> {
    this.conn = await this.store.session()
    await fs.mkdir(this.dir, { recursive: true })
    // Files of the earlier format (a Parquet file per table and rollups.json): derived data, dropped.
    for (const f of await fs.readdir(this.dir))
      if (f === 'rollups.json' || f.endsWith('.parquet')) await fs.rm(path.join(this.dir, f), { force: true })
    const file = path.join(this.dir, 'rollups.duckdb')
    await this.attach(file).catch(async () => {
      // Unreadable (damaged, or from another DuckDB): rebuilt from scratch.
      for (const f of [file, file + '.wal']) await fs.rm(f, { force: true })
      await this.attach(file)
    })
    this.store.onSegments(async (event) => {
      if (event === 'flush') return this.advance()
      await this.compacted()
    })
    // The first build runs in turn with flushes; the server answers (by scanning) meanwhile. Tables
    // found in the file are brought up to date instead when they are consistent with the store.
    // Registered now, not when its turn comes, so /ready never answers ready before the tables are usable.
    const warm = progress.start('rollups warm-up', { unit: 'ranges', warming: true, fields: { parts: this.store.segmentRows } })
    void this.store
      .exclusive(async () => {
        if (await this.load().catch(() => false)) return warm.finish()
        await this.rebuild(warm)
      })
      .catch((e) => warm.fail(e))
  }

  private async attach(file: string): Promise<void> {
    const c = this.conn!
    await c.run(`ATTACH '${file.replaceAll("'", "''")}' AS ${DB} (ROW_GROUP_SIZE ${ROLLUP_ROW_GROUP})`)
    try {
      const format = (await c.read(`SELECT max(format) AS f FROM ${META}`).catch(() => null))?.[0]?.[0]
      if (format !== undefined && format !== null && Number(format) !== FORMAT) {
        for (const t of [...TABLES.map(([t, tier]) => tableName(t, tier)), USAGE_CALLS, META]) await c.run(`DROP TABLE IF EXISTS ${t}`)
      }
      for (const d of DDL) await c.run(d)
    } catch (e) {
      await c.run(`DETACH ${DB}`).catch(() => {})
      throw e
    }
  }

  /** Uses the tables found in the file if they are consistent with the store, then adds what was flushed since. */
  private async load(): Promise<boolean> {
    const rows = await this.conn!.read(`SELECT x, format FROM ${META}`)
    if (rows.length !== 1) return false
    const x = Number(rows[0]![0])
    // Past every part the store holds, its tail replayed (a data directory swapped under them): not ours. Up to
    // there `x` may lie in the tail (see catchUp): those parts came back with the seqs they had (Storage.stableSeq).
    if (Number(rows[0]![1]) !== FORMAT || !Number.isInteger(x) || x > this.store.lastSeq) return false
    // A log record set aside at the start (a flipped bit) took its parts out of the tail and numbered the ones after
    // it lower: tables covering any of the tail no longer match it.
    if (x > this.store.flushedSeq && this.store.replayQuarantined > 0) return false
    // A compaction that merged parts past `x` with parts at or below it (a crash, or a failed advance,
    // between the flush and the compaction): those calls' states at `x` are gone, so the correction
    // cannot subtract them.
    if (x < (await this.store.compactedSeq())) return false
    this.x = x
    this.baseRows = await this.size()
    this.addedRows = 0
    this.foldFrom = null
    this.ready = true
    this.origin = 'loaded'
    await this.advance()
    return true
  }

  /**
   * After a compaction: the tables stay (see the file comment) when `x` covers every part it folded;
   * otherwise (the flush's advance failed) rebuilt. The marks of subtracted groups are cleared meanwhile.
   */
  private async compacted(): Promise<void> {
    if (!this.ready || this.x < (await this.store.compactedSeq())) return this.rebuild()
    const aggregated = TABLES.filter(([t, tier]) => tier !== 'call' && t !== 'latency').map(([t, tier]) => ({
      name: tableName(t, tier),
      table: t as 'calls' | 'usage',
      dims: TIER_DIMS[tier],
    }))
    const statements = cleanStatements({
      callCalls: tableName('calls', 'call'),
      callUsage: tableName('usage', 'call'),
      aggregated,
      tokens: TOKEN_NAMES,
    })
    await this.transaction(async (c) => {
      for (const sql of statements) await c.run(sql)
    })
  }

  /** Runs fn in one transaction of the tables' connection: all of it commits, or none. */
  private async transaction(fn: (c: CallSession) => Promise<void>): Promise<void> {
    const c = this.conn!
    await c.run('BEGIN TRANSACTION')
    try {
      await fn(c)
      hit('rollups.before-commit')
      await this.gate.commit(() => this.timings.commits.time(c.run('COMMIT')))
    } catch (e) {
      await c.run('ROLLBACK').catch(() => {})
      throw e
    }
  }

  /** Writes what the database file's log holds into the file itself, so the next start reads it directly. */
  async save(): Promise<void> {
    await this.conn?.run(`CHECKPOINT ${DB}`)
  }

  /**
   * Stops a rebuild in progress (it rolls back; the tables stay as last committed): a shutdown
   * should not wait a minute for derived data.
   */
  interrupt(): void {
    if (this.building) this.conn?.interrupt()
  }

  /** Rebuilds every table from the segments, one id range at a time (bounded memory). */
  async rebuild(first?: Task): Promise<void> {
    this.building = true
    const task = first ?? progress.start('rollups build', { unit: 'ranges', fields: { parts: this.store.segmentRows } })
    try {
      await task.run((t) => this.rebuildOnce(t))
    } finally {
      this.building = false
    }
    await this.save()
  }

  private async rebuildOnce(task: Task): Promise<void> {
    const c = this.conn!
    const x = this.store.flushedSeq
    const ranges = await this.store.idRanges(Math.ceil(this.store.segmentRows / 2_000_000))
    task.update(0, ranges.length + 1)
    await c.run('BEGIN TRANSACTION')
    try {
      for (const t of [...TABLES.map(([t, tier]) => tableName(t, tier)), USAGE_CALLS, META]) await c.run(`DELETE FROM ${t}`)
      for (let i = 0; i <= ranges.length; i++) {
        task.update(i)
        // Range bounds are call ids: bound as parameters, never spliced into the SQL.
        const lo = i > 0 ? ranges[i - 1]! : null
        const hi = i < ranges.length ? ranges[i]! : null
        const params = new Params()
        const ids = this.store.touched({ upTo: x, ids: [lo, hi] }, params)
        // Merged once per range, then summed into every table.
        await c.run(`CREATE OR REPLACE TEMP TABLE merged_now AS SELECT * FROM ${this.store.merged(ids, FACT_COLUMNS, x)}`, params)
        // The call tier has nothing to fold after a rebuild: its rows go in sorted by time, range by range.
        for (const [t, tier] of TABLES)
          await c.run(
            `INSERT INTO ${tableName(t, tier)} ${contribution('merged_now', 1, t, tier)}${tier === 'call' ? ' ORDER BY project_id, t' : ''}`,
          )
        // By trace within the range: with time-ordered ids (UUIDv7) the ranges follow one another in trace order too.
        await c.run(`INSERT INTO ${USAGE_CALLS} ${usageRows('merged_now')} ORDER BY project_id, trace_id`)
        await c.run('DROP TABLE merged_now')
      }
      await this.fold(true)
      await c.run(`INSERT INTO ${META} VALUES (${x}, ${FORMAT})`)
      hit('rollups.rebuild-before-commit')
      await this.gate.commit(() => c.run('COMMIT'))
      this.x = x
    } catch (e) {
      await c.run('ROLLBACK').catch(() => {})
      throw e
    }
    this.baseRows = await this.size()
    this.addedRows = 0
    this.foldFrom = Infinity
    this.ready = true
    this.origin = 'rebuilt'
  }

  /**
   * Adds the correction for the parts up to `to` (after a flush, those now in Parquet; in a catch-up, the tail's),
   * then moves `x` past them. In turn with flushes and compactions (the hooks run so; see wanted).
   */
  private async advance(to = this.store.flushedSeq): Promise<void> {
    if (!this.ready) return
    let earliest = Infinity
    await this.transaction(async (c) => {
      const from = Number((await c.read(`SELECT x FROM ${META}`))[0]![0])
      if (to > from) {
        const merged = performance.now()
        await mergeTouched(this.store, c, from, to)
        const inserted = performance.now()
        this.timings.merges.add(inserted - merged)
        for (const [t, tier] of TABLES) {
          await c.run(
            `INSERT INTO ${tableName(t, tier)} ${contribution('merged_now', 1, t, tier)} UNION ALL ${contribution('merged_before', -1, t, tier)}`,
          )
        }
        // The touched calls' rows replaced by their merged state now. Their id range (bound, not spliced)
        // lets the delete skip the row groups holding none of them.
        // With the earliest start of the rows this adds (the next fold starts there), in the same read.
        const [lo, hi, first] = (
          await c.read(
            'SELECT min(id), max(id), (SELECT epoch_ms(min(started_at)) FROM (SELECT started_at FROM merged_now UNION ALL SELECT started_at FROM merged_before)) FROM merged_now',
          )
        )[0]! as (string | number | bigint | null)[]
        earliest = first === null || first === undefined ? Infinity : Number(first)
        const params = new Params()
        await c.run(
          `DELETE FROM ${USAGE_CALLS} u USING merged_now n WHERE u.id >= ${params.add(lo ?? null)} AND u.id <= ${params.add(hi ?? null)} AND u.project_id = n.project_id AND u.id = n.id`,
          params,
        )
        await c.run(`INSERT INTO ${USAGE_CALLS} ${usageRows('merged_now')}`)
        this.timings.inserts.add(performance.now() - inserted)
        await c.run('DROP TABLE merged_now')
        await c.run('DROP TABLE merged_before')
        await c.run(`UPDATE ${META} SET x = ${to}`)
      }
    })
    this.x = Math.max(this.x, to)
    if (this.foldFrom !== null) this.foldFrom = Math.min(this.foldFrom, earliest)
    this.addedRows = (await this.size()) - this.baseRows
    // A fold from a known start costs what lies past it (with calls arriving as they run, the last minutes): the
    // tables fold often and briefly. Folding everything costs the whole tables: every quarter of their size.
    const limit = this.foldFrom === null ? this.baseRows / 4 : Math.min(this.baseRows / 4, 100_000)
    if (this.addedRows > Math.max(10_000, limit)) await this.consolidate()
    await this.checkpointDue()
  }

  /**
   * Checkpoints the tables' file once its log passes rollupCheckpoint.logBytes: DuckDB holds the changes since a checkpoint
   * in memory, and by itself checkpoints past the store's 128 MiB threshold (a 30-minute soak: 1.2-1.9 GiB between them).
   */
  private async checkpointDue(): Promise<void> {
    const log = await fs.stat(path.join(this.dir, 'rollups.duckdb.wal')).catch(() => null)
    // A checkpoint that fails leaves the changes in the log and in memory, as before: the next advance tries again.
    if (log && log.size > rollupCheckpoint.logBytes) await this.timings.checkpoints.time(this.save()).catch(() => {})
  }

  /**
   * A read found parts past `x` and combines them as a correction, whose cost grows with the parts (a tail of 76,000
   * parts: 200-500 ms a `/calls/stats`, 80-150 ms a count). From catchUp.minParts of them on, the tables catch up on
   * the tail in the background (advance to the store's stableSeq, in turn with flushes), at most once a second and a
   * fifth of the time (catchUp.share), so
   * that the next reads find few. Reads drive it: a store nobody asks for statistics adds the parts at flushes only.
   */
  private wanted(): void {
    if (catchUp.minParts <= 0 || !this.ready || this.building || this.catching || this.store.closed) return
    if (this.store.lastSeq - this.x < catchUp.minParts || Date.now() < this.nextCatchUp) return
    if (this.store.stableSeq === null) return
    // Up to what reached the tail once every batch acknowledged so far has: the parts this read corrects for.
    const started = Date.now()
    this.catching = this.store
      .visible()
      .then(() =>
        this.store.exclusive(async () => {
          const to = this.store.stableSeq
          if (this.store.closed || to === null || to <= this.x) return
          await this.catchUps.time(this.advance(to))
        }),
      )
      .catch(() => {})
      .finally(() => {
        this.catching = null
        const took = Date.now() - started
        this.nextCatchUp = Date.now() + Math.max(catchUp.minIntervalMs, (took * (1 - catchUp.share)) / catchUp.share)
      })
  }

  /** Resolves once the catch-up under way, if any, is done (tests). */
  async caughtUp(): Promise<void> {
    await this.catching
  }

  /** Folds correction rows into one row per group (and drops groups that cancelled out). Runs by itself after enough flushes. */
  async consolidate(): Promise<void> {
    const from = this.foldFrom
    await this.timings.folds.time(this.transaction(() => this.fold(false, from)))
    this.baseRows = await this.size()
    this.addedRows = 0
    this.foldFrom = Infinity
  }

  /**
   * One row per group, sorted by time (queries read a time range; DuckDB's zone maps skip the rest).
   * In the caller's transaction. `aggregatedOnly`: the call tier is left as it is. `from` (ms): only the groups of
   * that time on (their rows replaced by the folded ones, which follow in time order); null: whole tables.
   */
  private async fold(aggregatedOnly = false, from: number | null = null): Promise<void> {
    const slot = (tier: Tier) => (tier === 'call' ? 1 : slotMs(tier))
    const c = this.conn!
    if (from === Infinity) return
    const sums = (cols: string[]) => cols.map((x) => `sum(${x})::BIGINT AS ${x}`).join(', ')
    for (const [t, tier] of TABLES) {
      if (aggregatedOnly && tier === 'call') continue
      const dims = TIER_DIMS[tier].join(', ')
      const group = TIER_DIMS[tier].map((_, i) => i + 1).join(', ')
      const next = TIER_DIMS[tier].length + 1
      const time = timeDim(tier)
      // A group's rows share its slot (or, in the call tier, its start): those from a slot on hold whole groups.
      const since = from === null ? null : `${time} >= make_timestamp(${Math.floor(from / slot(tier)) * slot(tier) * 1000})`
      const rows = since ? `${tableName(t, tier)} WHERE ${since}` : tableName(t, tier)
      // The call tier: identical states summed (a subtracted one cancels the one it undoes).
      const select =
        tier === 'call'
          ? `SELECT * REPLACE (sum(n)::INTEGER AS n) FROM ${rows} GROUP BY ALL HAVING sum(n) <> 0`
          : {
              calls: `SELECT ${dims}, ${sums(['n', 'lat_n', 'lat_sum'])}, min(lat_min) AS lat_min, max(lat_max) AS lat_max, sum(err)::BIGINT AS err, bool_or(dirty) AS dirty FROM ${rows} GROUP BY ${group} HAVING sum(n) <> 0`,
              latency: `SELECT ${dims}, k, sum(n)::BIGINT AS n FROM ${rows} GROUP BY ${group}, ${next} HAVING sum(n) <> 0`,
              usage: `SELECT ${dims}, model, sum(n)::BIGINT AS n, ${TOKEN_NAMES.map((m) => `${sums([`${m}_sum`, `${m}_n`])}, min(${m}_min) AS ${m}_min, max(${m}_max) AS ${m}_max`).join(', ')}, bool_or(dirty) AS dirty FROM ${rows} GROUP BY ${group}, ${next} HAVING sum(n) <> 0`,
            }[t]
      if (!since) {
        await c.run(`CREATE OR REPLACE TABLE ${tableName(t, tier)} AS ${select} ORDER BY project_id, ${time}`)
        continue
      }
      await c.run(`CREATE OR REPLACE TEMP TABLE rollup_fold AS ${select}`)
      await c.run(`DELETE FROM ${tableName(t, tier)} WHERE ${since}`)
      await c.run(`INSERT INTO ${tableName(t, tier)} BY NAME SELECT * FROM rollup_fold ORDER BY project_id, ${time}`)
      await c.run('DROP TABLE rollup_fold')
    }
  }

  /**
   * The correction's inputs for a statement to hold once in its WITH list (SinceMerge, its items named from `prefix`),
   * where several of its pieces and tiers each need the correction (see the file comment): the calls with parts past
   * `x`, merged now and as they were at `x`, with `columns` (correctionColumns). Null when no part is past `x`: every
   * part acknowledged before this call is at or below lastSeq. (Each piece merged the tail's calls again: three to six
   * times per `/calls/stats` statement of a dashboard's last hour.)
   */
  freshInputs(
    project: string,
    params: Params,
    prefix: string,
    span: IdSpan | null | undefined,
    columns: readonly CallColumn[],
  ): SinceMerge | null {
    if (this.store.lastSeq <= this.x) return null
    this.wanted()
    return this.store.mergedSince({ project, after: MARK, span }, columns, params, prefix)
  }

  /** The correction of one table and tier from the touched calls merged now and at `x` (FROM items: see freshInputs). */
  freshOf(now: string, atMark: string, table: Table, tier: Tier): string {
    const t = storedAs(table, tier)
    return `${contribution(now, 1, t, tier)} UNION ALL ${contribution(atMark, -1, t, tier)}`
  }

  /**
   * Live calls of a project with a trace, meeting `cond` (SQL on trace_id and id), as SQL rows of
   * (project_id, trace_id, id, parent_id, ended, usage): usage_calls' rows, except that calls with
   * parts past `x` are merged from their parts instead (the same rule as fresh).
   */
  usageCalls(project: string, cond: string, params: Params): string {
    const rows = `SELECT * FROM ${USAGE_CALLS} WHERE project_id = ${params.add(project)} AND ${cond}`
    if (this.store.lastSeq <= this.x) return rows
    this.wanted()
    const touched = this.store.touched({ project, after: MARK }, params)
    return `${rows} AND id NOT IN (SELECT id FROM (${touched}))
      UNION ALL SELECT * FROM (${usageRows(this.store.merged(touched, FACT_COLUMNS, null))}) WHERE ${cond}`
  }

  async size(): Promise<number> {
    const r = await this.conn!.read(`SELECT ${TABLES.map(([t, tier]) => `(SELECT count(*) FROM ${tableName(t, tier)})`).join(' + ')}`)
    return Number(r[0]![0])
  }

  /** Checkpoints the database file (so the next start reads it without replaying its log) and detaches it. */
  async close(): Promise<void> {
    await this.save().catch(() => {})
    await this.conn?.run(`DETACH ${DB}`).catch(() => {})
    this.conn?.close()
    this.conn = undefined
  }
}
