import { filterTerms } from '../calls/read/filter.js'
import type { CallFilter } from '../calls/model.js'
import { chOpNamesCond } from './calls-sql.js'
import { table, type Layout } from './layout.js'
import type { ChParams } from './query/params.js'
import { HOUR_OF } from './stats-schema.js'

/**
 * Call counts per bucket from the hourly rollup (stats-schema.ts). The rollup counts each call by its
 * start-bearing part; a call with several such parts, or deleted, is a "suspect" (stats_call_marks):
 * its parts' counts are taken back out and its merged state, if live and started, put in. Every
 * other call's merged start time, op and parent are its one start part's (only start parts carry
 * them), so the sum is exactly the count of live, started calls.
 */

/** The filter as conditions on the rollup's dimensions (`op_name`, `is_root`); null when it names others. */
export function rollupDims(f: CallFilter | null | undefined, params: ChParams): string[] | null {
  if (!f) return []
  for (const [k, v] of Object.entries(f)) if (v !== null && v !== undefined && k !== 'op_names' && k !== 'trace_roots_only') return null
  const t = filterTerms(f)
  const conds: string[] = []
  if (t.opNames) conds.push(chOpNamesCond(t.opNames, params)('op_name'))
  if (t.rootsOnly) conds.push('is_root')
  return conds
}

/** The calls of a project whose count the rollup alone would get wrong: several starts, or a delete. */
function suspectsSql(l: Layout, p: string): string {
  return `SELECT id FROM (
      SELECT id, starts, deletes FROM ${table(l, 'stats_call_marks')} WHERE project_id = ${p}
      UNION ALL SELECT id, starts, deletes FROM ${table(l, 'stats_call_marks_backfill')} FINAL WHERE project_id = ${p})
    GROUP BY id HAVING sum(starts) > 1 OR sum(deletes) > 0`
}

/** (hour, op_name, is_root, n) rows: the rollup's and the backfill's rows meeting `inHours`, and the suspects' corrections. */
function contributionsSql(l: Layout, p: string, inHours: string): string {
  const suspects = suspectsSql(l, p)
  const merged = `SELECT max(started_at).2 AS started_at, max(op_name).2 AS op_name, max(parent_id).2 AS parent_id, max(deleted_at) AS deleted_at
      FROM ${table(l, 'calls_merged')} WHERE project_id = ${p} AND id IN (${suspects}) GROUP BY id`
  return `SELECT hour, op_name, is_root, toInt64(n) AS n FROM ${table(l, 'stats_calls_hourly')} WHERE project_id = ${p} AND ${inHours}
    UNION ALL SELECT hour, op_name, is_root, toInt64(n) FROM ${table(l, 'stats_calls_hourly_backfill')} FINAL WHERE project_id = ${p} AND ${inHours}
    UNION ALL SELECT ${HOUR_OF} AS hour, ifNull(op_name, '') AS op_name, parent_id IS NULL AS is_root, -toInt64(count()) AS n
      FROM ${table(l, 'call_parts')} WHERE project_id = ${p} AND started_at IS NOT NULL AND id IN (${suspects})
      GROUP BY hour, op_name, is_root
    UNION ALL SELECT ${HOUR_OF} AS hour, ifNull(op_name, '') AS op_name, parent_id IS NULL AS is_root, toInt64(count()) AS n
      FROM (${merged}) WHERE started_at IS NOT NULL AND deleted_at IS NULL
      GROUP BY hour, op_name, is_root`
}

/**
 * Counts per bucket (`bucket`, `n`) of the live, started calls in whole UTC hours `slots` ([hour,
 * bucket start], ms), matching the rollup conditions `dims` (rollupDims).
 */
export function chRollupCountsSql(l: Layout, project: string, slots: [number, number][], dims: string[], params: ChParams): string {
  const p = params.add(project, 'String')
  const hours = params.add(
    slots.map(([h]) => h),
    'Array(Int64)',
  )
  const buckets = params.add(
    slots.map(([, b]) => b),
    'Array(Int64)',
  )
  const inHours = `has(${hours}, hour)`
  return `SELECT ${buckets}[indexOf(${hours}, hour)] AS bucket, sum(n) AS n
    FROM (${contributionsSql(l, p, inHours)})
    WHERE ${[inHours, ...dims].join(' AND ')}
    GROUP BY bucket`
}

/** The number (`n`) of live, started calls of a project matching the rollup conditions `dims`, over all time. */
export function chRollupTotalSql(l: Layout, project: string, dims: string[], params: ChParams): string {
  const p = params.add(project, 'String')
  const where = dims.length ? ` WHERE ${dims.join(' AND ')}` : ''
  return `SELECT toInt64(coalesce(sum(n), 0)) AS n FROM (${contributionsSql(l, p, '1')})${where}`
}
