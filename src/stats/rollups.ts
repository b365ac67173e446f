import fs from 'node:fs/promises'
import path from 'node:path'
import type { DuckDBConnection } from '@duckdb/node-api'
import { fsyncPath } from '../calls/segments.js'
import { merged, type CallStore } from '../calls/store.js'
import { binSql } from './sketch.js'

/**
 * Statistics pre-aggregated per (project, hour, op, trace root or not) — and model for usage — over
 * every part up to a seq `x` (all in Parquet). Three tables:
 *   rollup_calls   call count, latency count/sum/min/max, error count
 *   rollup_latency latency histogram (sketch bins, see sketch.ts) for percentiles
 *   rollup_usage   per model: pair count, and sum/count/min/max of each token metric
 * in tiers of dimensions (see Tier).
 * Parts past `x` (the tail, segments not yet added) are combined at query time as a correction:
 * the merged calls they touch are added as they are now and subtracted as they were at `x`
 * (freshDelta). Sums, counts and bins subtract exactly; a minimum or maximum cannot, so a
 * subtracted row marks its group `dirty` and min/max over dirty groups fall back to a scan until
 * the next rebuild (every compaction) clears it.
 */
/**
 * Three tiers, each answering the filters on its dimensions: `project` per (project, hour, trace root
 * or not) for requests without an op filter; `op` adds the op; `user` adds user and run, without the
 * latency histogram (users × runs × bins would make it as large as the calls): percentiles filtered
 * by user or run are scanned. The smallest tier that can answer a request does.
 */
export type Tier = 'project' | 'op' | 'user'
export type Table = 'calls' | 'latency' | 'usage'
export const TIER_DIMS: Record<Tier, readonly string[]> = {
  project: ['project_id', 'hour', 'is_root'],
  op: ['project_id', 'hour', 'op_name', 'is_root'],
  user: ['project_id', 'hour', 'op_name', 'is_root', 'user_id', 'run_id'],
}
const DIM_TYPES: Record<string, string> = { project_id: 'VARCHAR', hour: 'TIMESTAMP', op_name: 'VARCHAR', is_root: 'BOOLEAN', user_id: 'VARCHAR', run_id: 'VARCHAR' }
/** Every table kept: (table, tier). */
export const TABLES: readonly [Table, Tier][] = [
  ['calls', 'project'], ['latency', 'project'], ['usage', 'project'],
  ['calls', 'op'], ['latency', 'op'], ['usage', 'op'],
  ['calls', 'user'], ['usage', 'user'],
]
export const tableName = (t: Table, tier: Tier) => `rollup_${t}_by_${tier}`

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

const FACT_COLUMNS = ['started_at', 'ended_at', 'op_name', 'parent_id', 'user_id', 'run_id', 'exception', 'usage']

function ddl(t: Table, tier: Tier): string {
  const dims = TIER_DIMS[tier].map((d) => `${d} ${DIM_TYPES[d]}`).join(', ')
  const cols = {
    calls: 'n BIGINT, lat_n BIGINT, lat_sum BIGINT, lat_min BIGINT, lat_max BIGINT, err BIGINT, dirty BOOLEAN',
    latency: 'k INTEGER, n BIGINT',
    usage: `model VARCHAR, n BIGINT, ${TOKEN_NAMES.map((m) => `${m}_sum BIGINT, ${m}_n BIGINT, ${m}_min BIGINT, ${m}_max BIGINT`).join(', ')}, dirty BOOLEAN`,
  }[t]
  return `CREATE TABLE IF NOT EXISTS ${tableName(t, tier)} (${dims}, ${cols})`
}
const DDL = [...TABLES.map(([t, tier]) => ddl(t, tier)), `CREATE TABLE IF NOT EXISTS rollup_meta (x BIGINT)`]

/** Merged calls (the fact columns) of the ids in relation `ids` (project_id, id), from parts with seq ≤ bound (SQL), as SQL. */
export function mergedOf(ids: string, bound: string | null): string {
  return `(${merged(FACT_COLUMNS, false)} SEMI JOIN (${ids}) f USING (project_id, id)
    ${bound === null ? '' : `WHERE seq <= ${bound}`} GROUP BY project_id, id)`
}

const live = (mc: string) =>
  `(SELECT *, date_trunc('hour', started_at) AS hour, parent_id IS NULL AS is_root, epoch_ms(ended_at) - epoch_ms(started_at) AS lat,
    (exception IS NOT NULL)::INTEGER AS err FROM ${mc} WHERE started_at IS NOT NULL AND deleted_at IS NULL)`

/** Contributions of the merged calls `mc` to a table of a tier, with sign +1 or -1, as SQL. */
export function contribution(mc: string, sign: 1 | -1, table: Table, tier: Tier): string {
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

/**
 * Keeps the rollup tables current: rebuilt from the segments when the store opens and after each
 * compaction; after each flush, the flushed parts' correction is added (see the file comment).
 */
export class Rollups {
  /** False until the first build finishes: statistics scan until then. */
  ready = false
  /** Every part at or below this seq is in the tables (mirrors rollup_meta, read after each commit). */
  x = 0
  private conn?: DuckDBConnection
  private addedRows = 0
  private baseRows = 0

  constructor(private readonly store: CallStore) {}

  async start(): Promise<void> {
    this.conn = await this.store.duck.connect()
    for (const d of DDL) await this.conn.run(d)
    this.store.onSegments(async (event) => {
      if (event === 'flush') return this.advance()
      await this.rebuild()
      await this.save()
    })
    // The first build runs in turn with flushes; the server answers (by scanning) meanwhile. Saved
    // tables are loaded and brought up to date instead when there are some.
    void this.store
      .exclusive(async () => {
        if (await this.load().catch(() => false)) return
        await this.rebuild()
        await this.save()
      })
      .catch(() => {})
  }

  /** How the tables were last built: `loaded` from disk at start, or `rebuilt` from the segments. */
  origin: 'loaded' | 'rebuilt' | null = null

  private get saveDir(): string {
    return path.join(this.store.dataDir, 'rollups')
  }

  /**
   * Writes the tables to `DATA_DIR/rollups/` (one Parquet file per table, named by generation) and
   * then, atomically, `rollups.json` naming them with their `x`. They are derived data: anything
   * missing or inconsistent at load only means a rebuild.
   */
  async save(): Promise<void> {
    if (!this.ready) return
    const c = this.conn!
    const dir = this.saveDir
    await fs.mkdir(dir, { recursive: true })
    const gen = Date.now()
    const files: Record<string, string> = {}
    for (const [t, tier] of TABLES) {
      const name = `${tableName(t, tier)}-${gen}.parquet`
      await c.run(`COPY ${tableName(t, tier)} TO '${path.join(dir, name)}' (FORMAT parquet, COMPRESSION zstd)`)
      await fsyncPath(path.join(dir, name))
      files[tableName(t, tier)] = name
    }
    const meta = path.join(dir, 'rollups.json')
    await fs.writeFile(meta + '.tmp', JSON.stringify({ version: 1, x: this.x, files }))
    await fsyncPath(meta + '.tmp')
    await fs.rename(meta + '.tmp', meta)
    await fsyncPath(dir)
    const keep = new Set(['rollups.json', ...Object.values(files)])
    for (const f of await fs.readdir(dir)) if (!keep.has(f)) await fs.rm(path.join(dir, f), { force: true })
  }

  /** Loads saved tables if they are consistent with the store, then adds what was flushed since. */
  private async load(): Promise<boolean> {
    const dir = this.saveDir
    let meta: { version: number; x: number; files: Record<string, string> }
    try {
      meta = JSON.parse(await fs.readFile(path.join(dir, 'rollups.json'), 'utf8'))
    } catch {
      return false
    }
    // Saved past what the segments hold (a data directory swapped under them): not ours.
    if (meta.version !== 1 || !Number.isInteger(meta.x) || meta.x > this.store.flushedSeq) return false
    const c = this.conn!
    await c.run('BEGIN TRANSACTION')
    try {
      for (const [t, tier] of TABLES) {
        const name = meta.files[tableName(t, tier)]
        if (!name || !/^rollup_[a-z_]+-\d+\.parquet$/.test(name)) throw new Error('rollup file missing from rollups.json')
        await c.run(`DELETE FROM ${tableName(t, tier)}`)
        await c.run(`INSERT INTO ${tableName(t, tier)} SELECT * FROM read_parquet('${path.join(dir, name)}')`)
      }
      await c.run('DELETE FROM rollup_meta')
      await c.run(`INSERT INTO rollup_meta VALUES (${meta.x})`)
      await c.run('COMMIT')
    } catch (e) {
      await c.run('ROLLBACK').catch(() => {})
      throw e
    }
    this.x = meta.x
    this.baseRows = await this.size()
    this.addedRows = 0
    this.ready = true
    this.origin = 'loaded'
    await this.advance()
    return true
  }

  private building = false

  /**
   * Stops a rebuild in progress (it rolls back; the last save stays valid): a shutdown should not
   * wait a minute for derived data.
   */
  interrupt(): void {
    if (this.building) this.conn?.interrupt()
  }

  /** Rebuilds every table from the segments, one id range at a time (bounded memory). */
  async rebuild(): Promise<void> {
    this.building = true
    try {
      await this.rebuildOnce()
    } finally {
      this.building = false
    }
  }

  private async rebuildOnce(): Promise<void> {
    const c = this.conn!
    const x = this.store.flushedSeq
    const ranges = await this.store.idRanges(Math.ceil(this.store.segments.reduce((a, s) => a + s.rows, 0) / 2_000_000))
    await c.run('BEGIN TRANSACTION')
    try {
      for (const t of [...TABLES.map(([t, tier]) => tableName(t, tier)), 'rollup_meta']) await c.run(`DELETE FROM ${t}`)
      for (let i = 0; i <= ranges.length; i++) {
        // Range bounds are call ids: bound as parameters, never spliced into the SQL.
        const lo = i > 0 ? ranges[i - 1]! : null
        const hi = i < ranges.length ? ranges[i]! : null
        const ids = `SELECT DISTINCT project_id, id FROM all_parts WHERE seq <= ${x} AND ($1::VARCHAR IS NULL OR id >= $1) AND ($2::VARCHAR IS NULL OR id < $2)`
        // Merged once per range, then summed into every table.
        await c.run(`CREATE OR REPLACE TEMP TABLE merged_now AS SELECT * FROM ${mergedOf(ids, String(x))}`, [lo, hi])
        for (const [t, tier] of TABLES) await c.run(`INSERT INTO ${tableName(t, tier)} ${contribution('merged_now', 1, t, tier)}`)
        await c.run('DROP TABLE merged_now')
      }
      await c.run(`INSERT INTO rollup_meta VALUES (${x})`)
      await c.run('COMMIT')
      this.x = x
    } catch (e) {
      await c.run('ROLLBACK').catch(() => {})
      throw e
    }
    // One row per group, sorted by hour.
    await this.consolidate()
    this.ready = true
    this.origin = 'rebuilt'
  }

  /** After a flush: adds the correction for the parts now in Parquet, then moves `x` past them. */
  private async advance(): Promise<void> {
    if (!this.ready) return
    const c = this.conn!
    const to = this.store.flushedSeq
    await c.run('BEGIN TRANSACTION')
    try {
      const from = Number((await c.runAndReadAll('SELECT x FROM rollup_meta')).getRowsJS()[0]![0])
      if (to > from) {
        const ids = `SELECT DISTINCT project_id, id FROM all_parts WHERE seq > ${from} AND seq <= ${to}`
        await c.run(`CREATE OR REPLACE TEMP TABLE merged_now AS SELECT * FROM ${mergedOf(ids, String(to))}`)
        await c.run(`CREATE OR REPLACE TEMP TABLE merged_before AS SELECT * FROM ${mergedOf(ids, String(from))}`)
        for (const [t, tier] of TABLES) {
          await c.run(`INSERT INTO ${tableName(t, tier)} ${contribution('merged_now', 1, t, tier)} UNION ALL ${contribution('merged_before', -1, t, tier)}`)
        }
        await c.run('DROP TABLE merged_now')
        await c.run('DROP TABLE merged_before')
        await c.run(`UPDATE rollup_meta SET x = ${to}`)
      }
      await c.run('COMMIT')
      this.x = Math.max(this.x, to)
    } catch (e) {
      await c.run('ROLLBACK').catch(() => {})
      throw e
    }
    this.addedRows = (await this.size()) - this.baseRows
    if (this.addedRows > Math.max(10_000, this.baseRows / 4)) await this.consolidate()
  }

  /** Folds correction rows into one row per group (and drops groups that cancelled out). */
  private async consolidate(): Promise<void> {
    const c = this.conn!
    const sums = (cols: string[]) => cols.map((x) => `sum(${x})::BIGINT AS ${x}`).join(', ')
    await c.run('BEGIN TRANSACTION')
    try {
      for (const [t, tier] of TABLES) {
        const dims = TIER_DIMS[tier].join(', ')
        const group = TIER_DIMS[tier].map((_, i) => i + 1).join(', ')
        const next = TIER_DIMS[tier].length + 1
        const select = {
          calls: `SELECT ${dims}, ${sums(['n', 'lat_n', 'lat_sum'])}, min(lat_min) AS lat_min, max(lat_max) AS lat_max, sum(err)::BIGINT AS err, bool_or(dirty) AS dirty FROM ${tableName(t, tier)} GROUP BY ${group}`,
          latency: `SELECT ${dims}, k, sum(n)::BIGINT AS n FROM ${tableName(t, tier)} GROUP BY ${group}, ${next} HAVING sum(n) <> 0`,
          usage: `SELECT ${dims}, model, sum(n)::BIGINT AS n, ${TOKEN_NAMES.map((m) => `${sums([`${m}_sum`, `${m}_n`])}, min(${m}_min) AS ${m}_min, max(${m}_max) AS ${m}_max`).join(', ')}, bool_or(dirty) AS dirty FROM ${tableName(t, tier)} GROUP BY ${group}, ${next}`,
        }[t]
        await c.run(`CREATE TEMP TABLE folded AS ${select}`)
        await c.run(`DELETE FROM ${tableName(t, tier)}`)
        // Sorted by hour: queries read a time range, and DuckDB's zone maps skip the rest.
        await c.run(`INSERT INTO ${tableName(t, tier)} SELECT * FROM folded ORDER BY project_id, hour`)
        await c.run('DROP TABLE folded')
      }
      await c.run('COMMIT')
    } catch (e) {
      await c.run('ROLLBACK').catch(() => {})
      throw e
    }
    this.baseRows = await this.size()
    this.addedRows = 0
  }

  /**
   * The correction for parts past `x` (see the file comment) as SQL for one table and project, or
   * null when there are none: every part acknowledged before this call is at or below lastSeq.
   */
  fresh(table: Table, tier: Tier, project: string): string | null {
    if (this.store.lastSeq <= this.x) return null
    const ids = `SELECT DISTINCT project_id, id FROM all_parts WHERE project_id = ${project} AND seq > (SELECT x FROM rollup_meta)`
    return `${contribution(mergedOf(ids, null), 1, table, tier)} UNION ALL ${contribution(mergedOf(ids, '(SELECT x FROM rollup_meta)'), -1, table, tier)}`
  }

  async size(): Promise<number> {
    const r = await this.conn!.runAndReadAll(`SELECT ${TABLES.map(([t, tier]) => `(SELECT count(*) FROM ${tableName(t, tier)})`).join(' + ')}`)
    return Number(r.getRowsJS()[0]![0])
  }

  /** Saves the tables (so the next start loads them instead of rebuilding) and closes. */
  async close(): Promise<void> {
    await this.save().catch(() => {})
    this.conn?.closeSync()
    this.conn = undefined
  }
}
