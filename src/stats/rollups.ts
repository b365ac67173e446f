import fs from 'node:fs/promises'
import path from 'node:path'
import { progress, type Task } from '../core/progress.js'
import { USAGE_FIELDS } from '../calls/model.js'
import type { CallColumn, CallRelation, CallSession, CallSource, SeqBound } from '../calls/source.js'
import { Params } from '../query/params.js'
import { cleanStatements } from './rollups-clean.js'
import { binSql } from './sketch.js'
import { hit } from '../core/failpoints.js'
import { CommitGate } from './commit-gate.js'

/**
 * Statistics pre-aggregated per (project, hour or minute, op, trace root or not) — and model for usage — over
 * every part up to a seq `x` (all in Parquet). Three tables:
 *   rollup_calls   call count, latency count/sum/min/max, error count
 *   rollup_latency latency histogram (sketch bins, see sketch.ts) for percentiles
 *   rollup_usage   per model: pair count, and sum/count/min/max of each token metric
 * in tiers of dimensions (see Tier).
 * Parts past `x` (the tail, segments not yet added) are combined at query time as a correction:
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
 * Five tiers, each answering the filters on its dimensions: `project` per (project, hour, trace root
 * or not) for requests without an op filter; `minute` is the same per minute, for the whole minutes
 * at the ends of a range that are not whole hours (a dashboard's "last 24 hours" starts and ends
 * mid-hour: an hour of calls at 100M calls a month is ~140,000 rows of the call tier, ~120 minutes
 * ~10,000 rows here); `op` adds the op to the hour; `user` adds user and run, without the latency
 * histogram (users × runs × bins would make it as large as the calls): percentiles filtered by user
 * or run come from the call tier. `call` keeps every dimension and the start time itself for the
 * pieces of a range that no other tier covers whole: one row per call state (and model), not
 * aggregated — a sign `n` (+1, or -1 for a subtracted state) and the call's own latency, error flag
 * and tokens — sorted by time. Its latency histogram is computed from the latencies, and `shaped`
 * gives its rows the other tiers' columns. The smallest tier that can answer a request does.
 */
export type Tier = 'project' | 'minute' | 'op' | 'user' | 'call'
export type Table = 'calls' | 'latency' | 'usage'
export const TIER_DIMS: Record<Tier, readonly string[]> = {
  project: ['project_id', 'hour', 'is_root'],
  minute: ['project_id', 'minute', 'is_root'],
  op: ['project_id', 'hour', 'op_name', 'is_root'],
  user: ['project_id', 'hour', 'op_name', 'is_root', 'user_id', 'run_id'],
  call: ['project_id', 't', 'op_name', 'is_root', 'user_id', 'run_id'],
}
/** The time dimension of a tier: what its rows are sorted by. */
export const timeDim = (tier: Tier) => (tier === 'call' ? 't' : tier === 'minute' ? 'minute' : 'hour')
/** The length of a time-bucketed tier's slot, in ms. */
export const slotMs = (tier: Exclude<Tier, 'call'>) => (tier === 'minute' ? 60_000 : 3_600_000)
const DIM_TYPES: Record<string, string> = {
  project_id: 'VARCHAR',
  hour: 'TIMESTAMP',
  minute: 'TIMESTAMP',
  t: 'TIMESTAMP',
  op_name: 'VARCHAR',
  is_root: 'BOOLEAN',
  user_id: 'VARCHAR',
  run_id: 'VARCHAR',
}
/** Every table kept: (table, tier). */
export const TABLES: readonly [Table, Tier][] = [
  ['calls', 'project'],
  ['latency', 'project'],
  ['usage', 'project'],
  ['calls', 'minute'],
  ['latency', 'minute'],
  ['usage', 'minute'],
  ['calls', 'op'],
  ['latency', 'op'],
  ['usage', 'op'],
  ['calls', 'user'],
  ['usage', 'user'],
  ['calls', 'call'],
  ['usage', 'call'],
]
/**
 * The tables live in their own DuckDB database file, attached to the store's instance under this
 * name: compressed and buffer-managed (the call tier is as long as the calls), and durable with
 * `x` in the same transactions, so a restart finds them as they were.
 */
const DB = 'rollups_db'
/** Bumped when a table's shape changes: a database of another version is rebuilt. */
const FORMAT = 4
export const tableName = (t: Table, tier: Tier) => `${DB}.rollup_${t}_by_${tier}`
const META = `${DB}.rollup_meta`

/** Token metrics kept per model: the SQL over one `summary.usage` row `u`. */
export const TOKEN_METRICS = {
  input_tokens: 'coalesce(u.prompt_tokens, 0) + coalesce(u.input_tokens, 0)',
  output_tokens: 'coalesce(u.completion_tokens, 0) + coalesce(u.output_tokens, 0)',
  total_tokens: 'u.total_tokens',
  cache_read_input_tokens: 'u.cache_read_input_tokens',
  cache_creation_input_tokens: 'u.cache_creation_input_tokens',
} as const
export type TokenMetric = keyof typeof TOKEN_METRICS
export const TOKEN_NAMES = Object.keys(TOKEN_METRICS) as TokenMetric[]

const FACT_COLUMNS: CallColumn[] = ['trace_id', 'started_at', 'ended_at', 'op_name', 'parent_id', 'user_id', 'run_id', 'exception', 'usage']

function ddl(t: Table, tier: Tier): string {
  const dims = TIER_DIMS[tier].map((d) => `${d} ${DIM_TYPES[d]}`).join(', ')
  const cols =
    tier === 'call'
      ? {
          calls: 'n INTEGER, lat BIGINT, err INTEGER',
          latency: '',
          usage: `model VARCHAR, n INTEGER, ${TOKEN_NAMES.map((m) => `${m} BIGINT`).join(', ')}`,
        }[t]
      : {
          calls: 'n BIGINT, lat_n BIGINT, lat_sum BIGINT, lat_min BIGINT, lat_max BIGINT, err BIGINT, dirty BOOLEAN',
          latency: 'k INTEGER, n BIGINT',
          usage: `model VARCHAR, n BIGINT, ${TOKEN_NAMES.map((m) => `${m}_sum BIGINT, ${m}_n BIGINT, ${m}_min BIGINT, ${m}_max BIGINT`).join(', ')}, dirty BOOLEAN`,
        }[t]
  return `CREATE TABLE IF NOT EXISTS ${tableName(t, tier)} (${dims}, ${cols})`
}
/**
 * The calls `/calls/usage` rolls up, kept beside the tiers (same `x`): one row per live call with a
 * trace — its parent, whether it ended and its usage list — sorted by trace within each rebuild range,
 * so a request for 100 traces reads a few thousand rows of one table instead of finding, reading and
 * merging every part of those traces in the segments (100 traces of 100 calls at 10M: the request
 * ~55 → ~22 ms). Kept current by replacing the rows of the calls each flush touched; calls touched
 * past `x` are read merged at query time instead of their rows (usageCalls).
 */
const USAGE_CALLS = `${DB}.usage_calls`
const USAGE_CALLS_DDL = `CREATE TABLE IF NOT EXISTS ${USAGE_CALLS} (project_id VARCHAR, trace_id VARCHAR, id VARCHAR, parent_id VARCHAR, ended BOOLEAN,
  usage STRUCT(model VARCHAR, ${USAGE_FIELDS.map((f) => `${f} BIGINT`).join(', ')})[])`
/** The rows of usage_calls for the merged calls `mc`. */
const usageRows = (mc: string) =>
  `SELECT project_id, trace_id, id, parent_id, ended_at IS NOT NULL AS ended, usage FROM ${mc} WHERE started_at IS NOT NULL AND deleted_at IS NULL AND trace_id IS NOT NULL`

const DDL = [...TABLES.map(([t, tier]) => ddl(t, tier)), USAGE_CALLS_DDL, `CREATE TABLE IF NOT EXISTS ${META} (x BIGINT, format INTEGER)`]

/** The rollups' own mark, read in the statement that uses it (so the bound and the tables agree). */
const MARK: SeqBound = { sql: `SELECT x FROM ${META}` }

const live = (mc: string) =>
  `(SELECT *, date_trunc('hour', started_at) AS hour, date_trunc('minute', started_at) AS minute, started_at AS t, parent_id IS NULL AS is_root, epoch_ms(ended_at) - epoch_ms(started_at) AS lat,
    (exception IS NOT NULL)::INTEGER AS err FROM ${mc} WHERE started_at IS NOT NULL AND deleted_at IS NULL)`

/** The table holding a tier's rows for `table`: the call tier's latencies are in its calls table. */
export const storedAs = (table: Table, tier: Tier): Table => (tier === 'call' && table === 'latency' ? 'calls' : table)

/** Contributions of the merged calls `mc` to a table of a tier, with sign +1 or -1, as SQL. */
export function contribution(mc: string, sign: 1 | -1, table: Table, tier: Tier): string {
  if (tier === 'call') return callRows(mc, sign, storedAs(table, tier))
  const dimList = TIER_DIMS[tier]
  const dims = dimList.join(', ')
  const group = dimList.map((_, i) => i + 1).join(', ')
  const next = dimList.length + 1
  const s = sign === 1 ? '' : '-'
  const extreme = (f: 'min' | 'max', x: string) => (sign === 1 ? `${f}(${x})` : 'NULL::BIGINT')
  switch (table) {
    case 'calls':
      return `SELECT ${dims}, ${s}count(*) AS n, ${s}count(lat) AS lat_n, ${s}coalesce(sum(lat), 0)::BIGINT AS lat_sum,
        ${extreme('min', 'lat')} AS lat_min, ${extreme('max', 'lat')} AS lat_max, ${s}sum(err)::BIGINT AS err,
        ${sign === 1 ? 'false' : 'count(lat) > 0'} AS dirty
        FROM ${live(mc)} GROUP BY ${group}`
    case 'latency':
      return `SELECT ${dims}, ${binSql('lat')} AS k, ${s}count(*) AS n FROM ${live(mc)} WHERE lat IS NOT NULL GROUP BY ${group}, ${next}`
    case 'usage':
      return `SELECT ${dims}, u.model AS model, ${s}count(*) AS n,
        ${TOKEN_NAMES.map((m) => `${s}coalesce(sum(${m}), 0)::BIGINT AS ${m}_sum, ${s}count(${m}) AS ${m}_n, ${extreme('min', m)} AS ${m}_min, ${extreme('max', m)} AS ${m}_max`).join(',\n        ')},
        ${sign === 1 ? 'false' : 'true'} AS dirty
        FROM (SELECT ${dims}, u, ${TOKEN_NAMES.map((m) => `(${TOKEN_METRICS[m]})::BIGINT AS ${m}`).join(', ')}
          FROM (SELECT *, unnest(usage) AS u FROM ${live(mc)}) WHERE u.model IS NOT NULL)
        GROUP BY ${group}, ${next}`
  }
}

/** The call tier's rows for the merged calls `mc`: one per call (and model, for usage), signed. */
function callRows(mc: string, sign: 1 | -1, table: Table): string {
  const dims = TIER_DIMS.call.join(', ')
  if (table === 'calls') return `SELECT ${dims}, ${sign}::INTEGER AS n, lat, err FROM ${live(mc)}`
  return `SELECT ${dims}, u.model AS model, ${sign}::INTEGER AS n, ${TOKEN_NAMES.map((m) => `(${TOKEN_METRICS[m]})::BIGINT AS ${m}`).join(', ')}
    FROM (SELECT *, unnest(usage) AS u FROM ${live(mc)}) WHERE u.model IS NOT NULL`
}

/**
 * Keeps the rollup tables current: rebuilt from the segments when there are none usable at start (or a
 * compaction folded parts they do not cover); after each flush, the flushed parts' correction is added (see the file comment).
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
  private building = false

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
    await c.run(`ATTACH '${file.replaceAll("'", "''")}' AS ${DB}`)
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
    // Past what the segments hold (a data directory swapped under them): not ours.
    if (Number(rows[0]![1]) !== FORMAT || !Number.isInteger(x) || x > this.store.flushedSeq) return false
    // A compaction that merged parts past `x` with parts at or below it (a crash, or a failed advance,
    // between the flush and the compaction): those calls' states at `x` are gone, so the correction
    // cannot subtract them.
    if (x < (await this.store.compactedSeq())) return false
    this.x = x
    this.baseRows = await this.size()
    this.addedRows = 0
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
      await this.gate.commit(() => c.run('COMMIT'))
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
    this.ready = true
    this.origin = 'rebuilt'
  }

  /** After a flush: adds the correction for the parts now in Parquet, then moves `x` past them. */
  private async advance(): Promise<void> {
    if (!this.ready) return
    const to = this.store.flushedSeq
    await this.transaction(async (c) => {
      const from = Number((await c.read(`SELECT x FROM ${META}`))[0]![0])
      if (to > from) {
        const ids = this.store.touched({ after: from, upTo: to }, new Params())
        await c.run(`CREATE OR REPLACE TEMP TABLE merged_now AS SELECT * FROM ${this.store.merged(ids, FACT_COLUMNS, to)}`)
        await c.run(`CREATE OR REPLACE TEMP TABLE merged_before AS SELECT * FROM ${this.store.merged(ids, FACT_COLUMNS, from)}`)
        for (const [t, tier] of TABLES) {
          await c.run(
            `INSERT INTO ${tableName(t, tier)} ${contribution('merged_now', 1, t, tier)} UNION ALL ${contribution('merged_before', -1, t, tier)}`,
          )
        }
        // The touched calls' rows replaced by their merged state now. Their id range (bound, not spliced)
        // lets the delete skip the row groups holding none of them.
        const [lo, hi] = (await c.read('SELECT min(id), max(id) FROM merged_now'))[0]! as (string | null)[]
        const params = new Params()
        await c.run(
          `DELETE FROM ${USAGE_CALLS} u USING merged_now n WHERE u.id >= ${params.add(lo ?? null)} AND u.id <= ${params.add(hi ?? null)} AND u.project_id = n.project_id AND u.id = n.id`,
          params,
        )
        await c.run(`INSERT INTO ${USAGE_CALLS} ${usageRows('merged_now')}`)
        await c.run('DROP TABLE merged_now')
        await c.run('DROP TABLE merged_before')
        await c.run(`UPDATE ${META} SET x = ${to}`)
      }
    })
    this.x = Math.max(this.x, to)
    this.addedRows = (await this.size()) - this.baseRows
    if (this.addedRows > Math.max(10_000, this.baseRows / 4)) await this.consolidate()
  }

  /** Folds correction rows into one row per group (and drops groups that cancelled out). Runs by itself after enough flushes. */
  async consolidate(): Promise<void> {
    await this.transaction(() => this.fold())
    this.baseRows = await this.size()
    this.addedRows = 0
  }

  /**
   * One row per group, sorted by time (queries read a time range; DuckDB's zone maps skip the rest).
   * In the caller's transaction. `aggregatedOnly`: the call tier is left as it is.
   */
  private async fold(aggregatedOnly = false): Promise<void> {
    const c = this.conn!
    const sums = (cols: string[]) => cols.map((x) => `sum(${x})::BIGINT AS ${x}`).join(', ')
    for (const [t, tier] of TABLES) {
      if (aggregatedOnly && tier === 'call') continue
      const dims = TIER_DIMS[tier].join(', ')
      const group = TIER_DIMS[tier].map((_, i) => i + 1).join(', ')
      const next = TIER_DIMS[tier].length + 1
      // The call tier: identical states summed (a subtracted one cancels the one it undoes).
      const select =
        tier === 'call'
          ? `SELECT * REPLACE (sum(n)::INTEGER AS n) FROM ${tableName(t, tier)} GROUP BY ALL HAVING sum(n) <> 0`
          : {
              calls: `SELECT ${dims}, ${sums(['n', 'lat_n', 'lat_sum'])}, min(lat_min) AS lat_min, max(lat_max) AS lat_max, sum(err)::BIGINT AS err, bool_or(dirty) AS dirty FROM ${tableName(t, tier)} GROUP BY ${group} HAVING sum(n) <> 0`,
              latency: `SELECT ${dims}, k, sum(n)::BIGINT AS n FROM ${tableName(t, tier)} GROUP BY ${group}, ${next} HAVING sum(n) <> 0`,
              usage: `SELECT ${dims}, model, sum(n)::BIGINT AS n, ${TOKEN_NAMES.map((m) => `${sums([`${m}_sum`, `${m}_n`])}, min(${m}_min) AS ${m}_min, max(${m}_max) AS ${m}_max`).join(', ')}, bool_or(dirty) AS dirty FROM ${tableName(t, tier)} GROUP BY ${group}, ${next} HAVING sum(n) <> 0`,
            }[t]
      await c.run(`CREATE OR REPLACE TABLE ${tableName(t, tier)} AS ${select} ORDER BY project_id, ${timeDim(tier)}`)
    }
  }

  /**
   * The correction for parts past `x` (see the file comment) as SQL for one table and project (rows
   * as stored, see storedAs), or null when there are none: every part acknowledged before this call is at or below lastSeq.
   */
  fresh(table: Table, tier: Tier, project: string, params: Params): string | null {
    if (this.store.lastSeq <= this.x) return null
    const ids = this.store.touched({ project, after: MARK }, params)
    return this.freshOf(this.store.merged(ids, FACT_COLUMNS, null), this.store.merged(ids, FACT_COLUMNS, MARK), table, tier)
  }

  /**
   * The correction's inputs for a statement to hold once (in WITH ... AS MATERIALIZED), where several of its
   * pieces and tiers each need the correction: the touched calls, and those calls merged now and as they were at
   * `x`, both reading the first from `ids`, the name the statement gives it. Null when no part is past `x`. (Each
   * piece merged the tail's calls again: three to six times per `/calls/stats` statement of a dashboard's last hour.)
   */
  freshInputs(project: string, params: Params, ids: string): { touched: CallRelation; now: CallRelation; atMark: CallRelation } | null {
    if (this.store.lastSeq <= this.x) return null
    // The rows a statement holds of a CallRelation are that relation.
    const held = `SELECT project_id, id FROM ${ids}` as CallRelation
    return {
      touched: this.store.touched({ project, after: MARK }, params),
      now: this.store.merged(held, FACT_COLUMNS, null),
      atMark: this.store.merged(held, FACT_COLUMNS, MARK),
    }
  }

  /** The correction of one table and tier from the touched calls merged now and at `x` (FROM items: see fresh). */
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
