import { compileQuery, DERIVED, type Params } from '../../query/expr.js'
import { FOLDED, latest, type QueryOptions } from '../model.js'
import { filterSql } from './filter.js'
import type { Window } from './windows.js'

/** More conditions for matching(): on the merged call (`m.`), on single parts (see filterSql), and heavy columns to merge. */
export interface Extra {
  where?: string[]
  narrow?: string[]
  /** Conditions every part of a matching call meets (e.g. an id range): they prune the merge's scan. */
  parts?: string[]
  columns?: string[]
  /** Merge only these columns (and those the conditions name), for callers that read few. */
  only?: string[]
  /** Read calls with no fresh parts as their settled rows, unmerged (see settledSplit); whole queries (exports) do. */
  settled?: boolean
  /** Only calls whose merged start time is in this window (an export read in windows: windows.ts). */
  started?: Window
}

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
export const MERGED = merged()

/** The columns of a returned call (see toCall), from a merged call `m`. */
export const SELECT_OUT = `m.id, m.project_id, m.op_name, nullif(m.display_name, '') AS display_name, m.trace_id, m.parent_id, m.thread_id, m.turn_id,
  epoch_us(m.started_at) AS started_us, epoch_us(m.ended_at) AS ended_us, m.attributes, m.inputs, m.output, m.summary, m.exception,
  m.user_id, m.run_id, m.run_step, m.run_step_end, ${DERIVED['summary.weave.status']!.sql} AS d_status,
  ${DERIVED['summary.weave.latency_ms']!.sql} AS d_latency, ${DERIVED['summary.weave.trace_name']!.sql} AS d_trace_name`

/**
 * The merged, live calls of a project that match, as SQL with its parameters. `light` merges only
 * the columns the filter, query and sort read (the large JSON ones are left out unless named).
 */
export function matching(project: string, opts: QueryOptions, params: Params, light = false, orderSql = '', extra: Extra = {}): string {
  const p = params.add(project)
  const { where: filters, narrow: narrowed } = filterSql(opts.filter, params)
  const narrow = [...narrowed, ...(extra.narrow ?? [])]
  const where = ['m.started_at IS NOT NULL', 'm.deleted_at IS NULL', ...filters, ...(extra.where ?? [])]
  if (opts.query) where.push(`coalesce(${compileQuery(opts.query, params)}, false)`)
  const started = extra.started && windowSql(extra.started, params)
  if (started) where.push(started('m.started_at'))
  const text = where.join(' ') + ' ' + orderSql + ' ' + (extra.columns ?? []).map((c) => `m.${c}`).join(' ')
  const named = (c: string) => new RegExp(`\\bm\\.${c}\\b`).test(text)
  // `only`: the caller reads just these (plus what the conditions name); fewer columns, a cheaper merge.
  const columns = extra.only
    ? FOLDED.filter((c) => extra.only!.includes(c) || named(c))
    : light
      ? FOLDED.filter((c) => !HEAVY.has(c) || named(c))
      : FOLDED
  const refs = !light || /\bm\.(input|output)_refs\b/.test(text)
  // Calls with a part meeting a condition (among those with fresh parts, `only`, in the merged half of a split).
  // A condition on the id itself holds for every part of the call: it filters the merge's input directly. A call's
  // start time is on its start part: the calls of a window are those with a part started in it.
  const semi = (n: string, only = '') => `id IN (SELECT id FROM all_parts WHERE project_id = ${p} AND ${n}${only})`
  const parts = (only = '') => [
    `project_id = ${p}`,
    ...narrow.map((n) => (/^list_contains\(\$\d+, id\)/.test(n) ? n : semi(n, only))),
    ...(extra.parts ?? []),
    ...(started ? [semi(started('started_at'), only)] : []),
  ]
  if (!extra.settled)
    return `(${merged(columns, refs)} WHERE ${parts().join(' AND ')} GROUP BY project_id, id) m WHERE ${where.join(' AND ')}`
  // A settled row is its merged call: the filter's conditions on parts (each the same as one of `where` on the merged
  // call) and the window hold for it directly, and prune row groups, where a join would read the whole project each time.
  const settledWhere = [`project_id = ${p}`, ...narrowed, ...(extra.narrow ?? []).map((n) => semi(n)), ...(extra.parts ?? [])]
  if (started) settledWhere.push(started('started_at'))
  const fresh = `SELECT id FROM fresh_parts WHERE project_id = ${p}`
  // The merged half's joins read only the fresh calls' parts: over the whole project they cost ~0.1 s a window.
  return `(${settledSplit(columns, refs, settledWhere, parts(` AND id IN (${fresh})`), fresh)}) m WHERE ${where.join(' AND ')}`
}

/**
 * The merged calls as two parts: a call with no part in a flushed segment or the tail is its one row in a compacted
 * segment, taken as it is (that row is its parts already merged: storage/compact.ts), and only the calls with fresh
 * parts are merged. The same rows as merged() (one row through latest() is itself, its ref lists made distinct), without
 * hashing every call of the project by id: a 1M-call export's first row came after ~8 s, ~6 of them the merge.
 */
function settledSplit(
  columns: readonly string[],
  refs: boolean,
  settledWhere: readonly string[],
  mergedWhere: readonly string[],
  fresh: string,
): string {
  const lists = refs ? REF_LISTS.map((c) => `, list_distinct(${c}) AS ${c}`).join('') : ''
  const settled = `SELECT project_id, id, ${columns.join(', ')}, deleted_at${lists} FROM settled_parts
    WHERE ${settledWhere.join(' AND ')} AND id NOT IN (${fresh})`
  return `${settled}
    UNION ALL BY NAME
    ${merged(columns, refs)} WHERE ${mergedWhere.join(' AND ')} AND id IN (${fresh}) GROUP BY project_id, id`
}

/** The window's condition on a start-time column, its bounds bound as parameters. */
function windowSql(w: Window, params: Params): (column: string) => string {
  const lo = w.lo === null ? null : params.add(w.lo)
  const hi = w.hi === null ? null : params.add(w.hi)
  return (c) =>
    [lo && `${c} >= make_timestamp(${lo}::BIGINT)`, hi && `${c} < make_timestamp(${hi}::BIGINT)`].filter(Boolean).join(' AND ') || 'true'
}
