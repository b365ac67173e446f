/**
 * Clearing the `dirty` marks of the rollups without a rebuild. A subtracted state cannot undo a minimum
 * or maximum, so its group is marked and min/max over it are answered by a scan; but the call tier
 * holds every call state signed, so once the subtracted states have cancelled the ones they undo, the
 * live states of a marked group give its exact minimum and maximum. Work is limited to the UTC hours
 * holding a mark or a subtracted call-tier row (the corrections of recent flushes), not the whole tables.
 *
 * Kept apart from rollups.ts (which calls it with its table names) so the statements can be read whole.
 */

/** An aggregated (hour or minute) table: name, kind, and its dimensions. */
export interface AggregatedTable {
  name: string
  table: 'calls' | 'usage'
  dims: readonly string[]
}

export interface CleanTables {
  /** The call tier's tables: `calls` (n, lat, err) and `usage` (model, n, a column per token metric). */
  callCalls: string
  callUsage: string
  aggregated: readonly AggregatedTable[]
  tokens: readonly string[]
}

const HOURS = 'rollup_dirty_hours'
const inHours = (c: string) => `SEMI JOIN ${HOURS} d ON ${c}.project_id = d.project_id AND date_trunc('hour', ${c}.t) = d.hour`

/** The dimension `d` of an aggregated tier, from the call tier's columns. */
const fromCall = (d: string) => (d === 'hour' ? `date_trunc('hour', t) AS hour` : d === 'minute' ? `date_trunc('minute', t) AS minute` : d)

/** The slot columns of an aggregated tier as an hour. */
const hourOf = (dims: readonly string[]) => (dims.includes('minute') ? `date_trunc('hour', minute)` : 'hour')

/** The statements, to run in order in one transaction. */
export function cleanStatements(x: CleanTables): string[] {
  const negative = [x.callCalls, x.callUsage].map((t) => `SELECT DISTINCT project_id, date_trunc('hour', t) AS hour FROM ${t} WHERE n < 0`)
  const marked = x.aggregated.map((a) => `SELECT DISTINCT project_id, ${hourOf(a.dims)} AS hour FROM ${a.name} WHERE dirty`)
  const out = [`CREATE OR REPLACE TEMP TABLE ${HOURS} AS ${[...negative, ...marked].join(' UNION ')}`]
  // The call tier in those hours: identical states summed, so a subtracted one cancels the one it undoes.
  for (const t of [x.callCalls, x.callUsage]) {
    out.push(
      `CREATE OR REPLACE TEMP TABLE rollup_folded AS SELECT * REPLACE (sum(n)::INTEGER AS n) FROM ${t} c ${inHours('c')} GROUP BY ALL HAVING sum(n) <> 0`,
      `DELETE FROM ${t} AS c USING ${HOURS} d WHERE c.project_id = d.project_id AND date_trunc('hour', c.t) = d.hour`,
      `INSERT INTO ${t} SELECT * FROM rollup_folded ORDER BY project_id, t`,
      'DROP TABLE rollup_folded',
    )
  }
  // Every row of a group gets the exact values (an added row's own extreme may belong to a state since undone).
  for (const a of x.aggregated) {
    const keys = a.table === 'usage' ? [...a.dims, 'model'] : [...a.dims]
    const cols = a.table === 'calls' ? ['lat'] : x.tokens
    const aggs = cols.map((m) => `min(${m}) AS ${a.table === 'calls' ? 'lat' : m}_min, max(${m}) AS ${a.table === 'calls' ? 'lat' : m}_max`)
    const sets = cols.map((m) => (a.table === 'calls' ? 'lat' : m)).map((m) => `${m}_min = f.${m}_min, ${m}_max = f.${m}_max`)
    out.push(
      `UPDATE ${a.name} AS r SET ${sets.join(', ')}, dirty = false
        FROM (SELECT ${keys.map(fromCall).join(', ')}, ${aggs.join(', ')}
          FROM ${a.table === 'calls' ? x.callCalls : x.callUsage} c ${inHours('c')} WHERE n > 0 GROUP BY ALL) f
        WHERE ${keys.map((k) => `r.${k} IS NOT DISTINCT FROM f.${k}`).join(' AND ')}`,
    )
  }
  out.push(`DROP TABLE ${HOURS}`)
  return out
}
