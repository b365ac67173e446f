import { USAGE_FIELDS } from '../calls/model.js'
import type { CallColumn, SeqBound } from '../calls/source.js'
import { binSql } from './sketch.js'

// The rollup tables' shapes and the SQL of their rows; rollups.ts keeps the tables.

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
export const DB = 'rollups_db'
/** Bumped when a table's shape changes: a database of another version is rebuilt. */
export const FORMAT = 4
export const tableName = (t: Table, tier: Tier) => `${DB}.rollup_${t}_by_${tier}`
export const META = `${DB}.rollup_meta`

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

export const FACT_COLUMNS: CallColumn[] = [
  'trace_id',
  'started_at',
  'ended_at',
  'op_name',
  'parent_id',
  'user_id',
  'run_id',
  'exception',
  'usage',
]

/**
 * The columns a correction's contributions read (contribution, live): the facts but `trace_id` (only usage_calls reads
 * it), and `usage` only when asked for. The merge copies each into its parts and states: without the usage lists a
 * count's correction of 60,000 tail calls took about half the time (bench/README, 2026-12-08).
 */
export const correctionColumns = (usage: boolean): CallColumn[] => FACT_COLUMNS.filter((c) => c !== 'trace_id' && (usage || c !== 'usage'))

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
export const USAGE_CALLS = `${DB}.usage_calls`
const USAGE_CALLS_DDL = `CREATE TABLE IF NOT EXISTS ${USAGE_CALLS} (project_id VARCHAR, trace_id VARCHAR, id VARCHAR, parent_id VARCHAR, ended BOOLEAN,
  usage STRUCT(model VARCHAR, ${USAGE_FIELDS.map((f) => `${f} BIGINT`).join(', ')})[])`
/** The rows of usage_calls for the merged calls `mc`. */
export const usageRows = (mc: string) =>
  `SELECT project_id, trace_id, id, parent_id, ended_at IS NOT NULL AS ended, usage FROM ${mc} WHERE started_at IS NOT NULL AND deleted_at IS NULL AND trace_id IS NOT NULL`

export const DDL = [
  ...TABLES.map(([t, tier]) => ddl(t, tier)),
  USAGE_CALLS_DDL,
  `CREATE TABLE IF NOT EXISTS ${META} (x BIGINT, format INTEGER)`,
]

/** The rollups' own mark, read in the statement that uses it (so the bound and the tables agree). */
export const MARK: SeqBound = { sql: `SELECT x FROM ${META}` }

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
