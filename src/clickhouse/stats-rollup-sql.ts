import { filterTerms } from '../calls/read/filter.js'
import type { CallFilter } from '../calls/model.js'
import { checkFilterList } from '../query/list-filters.js'
import { chOpNamesCond } from './calls-sql.js'
import { table, type Layout } from './layout.js'
import type { ChParams } from './query/params.js'
import { slotParams } from './stats-slots.js'
import { HOUR_OF } from './stats-schema.js'
import { keyList, TIERS, type RollupTier } from './stats-tiers.js'

/**
 * Call counts per bucket from the hourly rollup (stats-schema.ts). The rollup counts each call by its
 * start-bearing part; a call with several such parts, or deleted, is a "suspect" (stats_call_marks):
 * its parts' counts are taken back out and its merged state, if live and started, put in. Every
 * other call's merged start time, op and parent are its one start part's (only start parts carry
 * them), so the sum is exactly the count of live, started calls.
 */

/** Filter fields the rollups key: op names and roots (both tiers), users and runs with their legacy spellings (the user tier). */
const ANSWERABLE = new Set(['op_names', 'trace_roots_only', 'svc_user_ids', 'wb_user_ids', 'svc_run_ids', 'wb_run_ids'])

/**
 * The filter as conditions on the rollups' dimensions (`op_name`, `is_root`, `user_id`, `run_id`;
 * stats-tiers.ts tierOf says which rollups have them); null when it names others. Users and runs: the
 * two spellings united, a NULL user or run matching no listed value.
 */
export function rollupDims(f: CallFilter | null | undefined, params: ChParams): string[] | null {
  if (!f) return []
  for (const [k, v] of Object.entries(f)) if (v !== null && v !== undefined && !ANSWERABLE.has(k)) return null
  const t = filterTerms(f)
  const conds: string[] = []
  if (t.opNames) conds.push(chOpNamesCond(t.opNames, params)('op_name'))
  if (t.rootsOnly) conds.push('is_root')
  for (const [col, name, a, b] of [
    ['user_id', 'svc_user_ids', f.svc_user_ids, f.wb_user_ids],
    ['run_id', 'svc_run_ids', f.svc_run_ids, f.wb_run_ids],
  ] as const) {
    if (!a && !b) continue
    const list = [...new Set([...(a ?? []), ...(b ?? [])])]
    checkFilterList(name, list)
    // An empty list filters nothing, as in the scan (calls/read/filter.ts) and in Weave (`if filter.wb_user_ids:`).
    if (!list.length) continue
    conds.push(`has(${params.add(list, 'Array(String)')}, ${col})`)
  }
  return conds
}

/** The mark counts a call is judged by; those the backfill of migration 4 lacks read as 0 there. */
const MARKS = ['starts', 'deletes', 'ends', 'extras', 'emits', 'usage_in', 'usage_out']

/** "This call's rollup rows are not its merged state", over its summed mark counts (`v` spells one). */
function suspect(v: (c: string) => string, done: boolean): string {
  const counts = `${v('starts')} > 1 OR ${v('deletes')} > 0`
  if (!done) return counts
  return `${counts} OR ${v('ends')} > 1 OR ${v('extras')} > 0 OR ${v('emits')} != (${v('starts')} = 1 AND ${v('ends')} = 1)
      OR ${v('usage_out')} != if(${v('emits')} = 1, ${v('usage_in')}, 0)`
}

/**
 * The calls of a project whose count the rollup alone would get wrong: several starts, or a delete.
 * `done` (latency, errors, usage: stats-done-schema.ts) adds the calls whose halves and emissions do
 * not read "one start, one end, emitted once with all its usage", and those with end-side parts older
 * than the views. FINAL sums each call's marks in key order, one row per call, and the condition
 * filters those (cheaper than a GROUP BY over the project's calls); only calls with backfilled marks
 * (a database upgraded to migration 4) need theirs added across the two tables.
 */
export function suspectsSql(l: Layout, p: string, done = false): string {
  const marks = table(l, 'stats_call_marks')
  const backfill = table(l, 'stats_call_marks_backfill')
  const old = `SELECT id FROM ${backfill} WHERE project_id = ${p}`
  const names = done ? MARKS : MARKS.slice(0, 2)
  const cols = names.join(', ')
  const zeros = names
    .slice(2)
    .map((c) => `, 0 AS ${c}`)
    .join('')
  const parts = [
    `SELECT id FROM ${marks} FINAL WHERE project_id = ${p} AND id NOT IN (${old}) AND (${suspect((c) => c, done)})`,
    `SELECT id FROM (
        SELECT id, ${cols} FROM ${marks} WHERE project_id = ${p} AND id IN (${old})
        UNION ALL SELECT id, starts, deletes${zeros} FROM ${backfill} FINAL WHERE project_id = ${p})
      GROUP BY id HAVING ${suspect((c) => `sum(${c})`, done)}`,
  ]
  if (done) parts.push(`SELECT id FROM ${table(l, 'stats_done_backfill')} WHERE project_id = ${p}`)
  return parts.join('\n    UNION ALL ')
}

/**
 * The calls a request corrects, as its statements name them. A request reads them once (stats-reads.ts
 * readSuspects) and binds them as a list (`ids`, often empty: then no statement has a correcting
 * branch); an `IN` of the marks' subquery is evaluated again by each use (20-40 ms at 100k calls, 2-4
 * uses per statement). Past MAX_BOUND ids, a list would be a long URL over HTTP (parameters travel in
 * it), so each statement names the subquery instead (`done` as suspectsSql's).
 */
export type Suspects = { ids: string[] } | { done: boolean }

/** Past this many calls to correct, the statements evaluate the marks' subquery themselves (~45 bytes an id in the URL). */
export const MAX_BOUND = 5_000

/** The suspects as the right side of `id IN …`; null when there are none. */
export function suspectsIn(l: Layout, p: string, s: Suspects, params: ChParams): string | null {
  if ('ids' in s) return s.ids.length ? params.add(s.ids, 'Array(String)') : null
  return `(${suspectsSql(l, p, s.done)})`
}

/**
 * (hour, op_name, is_root, the tier's keys, n) rows: the tier's rollup and backfill rows meeting
 * `inHours`, and the suspects' corrections (each start part out under its own keys, the merged call in).
 */
function contributionsSql(l: Layout, p: string, inHours: string, suspects: string | null, tier: RollupTier): string {
  const t = TIERS[tier]
  const k = keyList(tier)
  const counted = `SELECT hour, op_name, is_root${k}, toInt64(n) AS n FROM ${table(l, t.calls)} WHERE project_id = ${p} AND ${inHours}
    UNION ALL SELECT hour, op_name, is_root${k}, toInt64(n) FROM ${table(l, t.callsBackfill)} FINAL WHERE project_id = ${p} AND ${inHours}`
  if (suspects === null) return counted
  const keys = t.keys.map((c) => `, max(${c}).2 AS ${c}`).join('')
  const merged = `SELECT max(started_at).2 AS started_at, max(op_name).2 AS op_name, max(parent_id).2 AS parent_id${keys}, max(deleted_at) AS deleted_at
      FROM ${table(l, 'calls_merged')} WHERE project_id = ${p} AND id IN ${suspects} GROUP BY id`
  return `${counted}
    UNION ALL SELECT ${HOUR_OF} AS hour, ifNull(op_name, '') AS op_name, parent_id IS NULL AS is_root${k}, -toInt64(count()) AS n
      FROM ${table(l, 'call_parts')} WHERE project_id = ${p} AND started_at IS NOT NULL AND id IN ${suspects}
      GROUP BY hour, op_name, is_root${k}
    UNION ALL SELECT ${HOUR_OF} AS hour, ifNull(op_name, '') AS op_name, parent_id IS NULL AS is_root${k}, toInt64(count()) AS n
      FROM (${merged}) WHERE started_at IS NOT NULL AND deleted_at IS NULL
      GROUP BY hour, op_name, is_root${k}`
}

/**
 * Counts per bucket (`bucket`, `n`) of the live, started calls in whole UTC hours `slots` ([hour,
 * bucket start], ms), matching the rollup conditions `dims` (rollupDims).
 */
export function chRollupCountsSql(
  l: Layout,
  project: string,
  slots: [number, number][],
  dims: string[],
  params: ChParams,
  suspects: Suspects = { done: false },
  tier: RollupTier = 'op',
): string {
  const s = slotParams(project, slots, dims, params, tier)
  return `SELECT ${s.bucketOf} AS bucket, sum(n) AS n
    FROM (${contributionsSql(l, s.p, s.inHours, suspectsIn(l, s.p, suspects, params), tier)})
    WHERE ${[s.inHours, ...dims].join(' AND ')}
    GROUP BY bucket`
}

/** The number (`n`) of live, started calls of a project matching the rollup conditions `dims`, over all time. */
export function chRollupTotalSql(
  l: Layout,
  project: string,
  dims: string[],
  params: ChParams,
  suspects: Suspects = { done: false },
  tier: RollupTier = 'op',
): string {
  const p = params.add(project, 'String')
  const where = dims.length ? ` WHERE ${dims.join(' AND ')}` : ''
  return `SELECT toInt64(coalesce(sum(n), 0)) AS n FROM (${contributionsSql(l, p, '1', suspectsIn(l, p, suspects, params), tier)})${where}`
}
