import { filterTerms } from '../calls/read/filter.js'
import type { CallFilter, QueryOptions } from '../calls/model.js'
import type { OpNames } from '../query/list-filters.js'
import { table, type Layout } from './layout.js'
import { chCompileQuery } from './query/expr.js'
import { CH_DERIVED, chFieldsOf } from './query/fields.js'
import { chJsonArgs } from './query/json.js'
import type { ChParams } from './query/params.js'
import { CALL_FIELDS } from './schema.js'

/**
 * SQL over calls_merged: each call merged from its (partly merged) rows, the live ones matching a
 * filter and `$expr`, in order, a page of them — the embedded store's read path (calls/read/) in
 * ClickHouse's dialect, every value bound.
 */

/**
 * Merged calls of one project: the latest non-null value of each field (the tuple max, see schema.ts);
 * `only`: just those fields (and the refs only when named). FINAL merges the rows ClickHouse has not
 * merged yet in key order, as its background merges do, one row per call: the same answer as a
 * GROUP BY over the rows, but a streaming merge, where the GROUP BY's tuple max is a slow generic
 * aggregate (100k calls through chdb: 0.02-0.2 s against 1.3-3.3 s, under load). `inner` conditions are
 * on key columns only (project_id, id), which FINAL may apply before merging.
 */
function mergedSql(l: Layout, p: string, inner: string[], only: Set<string> | null): string {
  const fields = CALL_FIELDS.filter(([c]) => !only || only.has(c)).map(([c]) => `tupleElement(c.${c}, 2) AS ${c}`)
  const refs = ['input_refs', 'output_refs'].filter((c) => !only || only.has(c)).map((c) => `c.${c} AS ${c}`)
  return `SELECT ${['c.project_id AS project_id', 'c.id AS id', ...fields, 'c.deleted_at AS deleted_at', ...refs].join(',\n      ')}
    FROM ${table(l, 'calls_merged')} AS c FINAL
    WHERE ${[`c.project_id = ${p}`, ...inner].join(' AND ')}`
}

/** The columns of a returned call, as calls/read/to-call.ts reads them. */
export const CH_SELECT_OUT = `m.id AS id, m.project_id AS project_id, m.op_name AS op_name, nullIf(m.display_name, '') AS display_name,
  m.trace_id AS trace_id, m.parent_id AS parent_id, m.thread_id AS thread_id, m.turn_id AS turn_id,
  toUnixTimestamp64Micro(m.started_at) AS started_us, toUnixTimestamp64Micro(m.ended_at) AS ended_us,
  m.attributes AS attributes, m.inputs AS inputs, m.output AS output, m.summary AS summary, m.exception AS exception,
  m.user_id AS user_id, m.run_id AS run_id, m.run_step AS run_step, m.run_step_end AS run_step_end,
  ${CH_DERIVED['summary.weave.status']!.sql} AS d_status, ${CH_DERIVED['summary.weave.latency_ms']!.sql} AS d_latency,
  ${CH_DERIVED['summary.weave.trace_name']!.sql} AS d_trace_name`

/**
 * `op_names` as one expression over two bound arrays, names and `:*` prefixes: its size does not grow
 * with the list, so neither does planning (an OR of 1,000 `startsWith` took 0.6 s on an empty table, far more under load).
 */
export function chOpNamesCond(names: OpNames, params: ChParams): (col: string) => string {
  const e = params.add(names.exact, 'Array(String)')
  if (!names.prefixes.length) return (c) => `has(${e}, ${c})`
  const pre = params.add(names.prefixes, 'Array(String)')
  return (c) => `(has(${e}, ${c}) OR arrayExists(x -> startsWith(${c}, x), ${pre}))`
}

/**
 * The filter (taken apart by calls/read/filter.ts, as for the embedded store) as conditions on the
 * merged call (`m.`) and on calls_merged rows (`c.`): a merged value is one of its rows' values, so
 * "some row matches" narrows the calls to merge without changing the answer (the merged condition
 * still decides).
 */
export function chFilterSql(
  f: CallFilter | null | undefined,
  params: ChParams,
  l: Layout,
  p: string,
): { where: string[]; inner: string[]; reads: string[] } {
  const where: string[] = []
  const inner: string[] = []
  const t = filterTerms(f)
  const reads = [...(t.opNames ? ['op_name'] : []), ...t.lists.map((x) => x.column), ...t.refs.map((x) => x.column)]
  if (t.rootsOnly) reads.push('parent_id')
  const narrowBy = (cond: string) => inner.push(`c.id IN (SELECT id FROM ${table(l, 'calls_merged')} WHERE project_id = ${p} AND ${cond})`)
  if (t.opNames) {
    const any = chOpNamesCond(t.opNames, params)
    where.push(any('m.op_name'))
    narrowBy(any('tupleElement(op_name, 2)'))
  }
  for (const { column, values } of t.lists) {
    if (values.length === 0) {
      where.push('false')
      continue
    }
    const v = params.add(values, 'Array(String)')
    where.push(`has(${v}, m.${column})`)
    if (column === 'id') inner.push(`has(${v}, c.id)`)
    // A trace's calls by the trace index (schema.ts CALL_TRACES), a parent's by calls_merged's bloom filter.
    else if (column === 'trace_id')
      inner.push(`c.id IN (SELECT id FROM ${table(l, 'call_traces')} WHERE project_id = ${p} AND trace_id IN ${v})`)
    else if (column === 'parent_id') narrowBy(`has(${v}, tupleElement(${column}, 2))`)
  }
  for (const { column, values } of t.refs) where.push(`hasAny(m.${column}, ${params.add(values, 'Array(String)')})`)
  if (t.rootsOnly) where.push('m.parent_id IS NULL')
  return { where, inner, reads }
}

/**
 * The merged, live calls of a project that match: `(merge) AS m WHERE …`. `fields`: the merged fields
 * the caller reads (besides the filter's own, `started_at` and `deleted_at`); ClickHouse computes every
 * aggregate of the merge's subquery, read or not, and a 100k-call merge of every field took 1-2.5 s
 * where one of four took 0.05-0.3 s (under load). Without it, or with a `$expr` (which may read any
 * field), every field is merged.
 */
export function chMatching(
  l: Layout,
  project: string,
  opts: QueryOptions,
  params: ChParams,
  narrow: string[] = [],
  fields?: string[],
): string {
  const p = params.add(project, 'String')
  const { where: filters, inner, reads } = chFilterSql(opts.filter, params, l, p)
  // `narrow`: conditions on calls_merged rows (`c.`) that every matching call has a row meeting.
  inner.push(...narrow)
  const where = ['m.started_at IS NOT NULL', 'm.deleted_at IS NULL', ...filters]
  if (opts.query) where.push(`coalesce(${chCompileQuery(opts.query, params, chFieldsOf(opts.query))}, 0)`)
  const only = fields && !opts.query ? new Set(['started_at', ...fields, ...reads]) : null
  return `(${mergedSql(l, p, inner, only)}) AS m WHERE ${where.join(' AND ')}`
}

/** ORDER BY for sort_by: numbers before strings, missing last, in either direction; ties by id. */
export function chOrderBy(sort: QueryOptions['sort_by'], params: ChParams): string {
  if (sort === undefined || sort === null) return 'ORDER BY m.started_at ASC, m.id ASC'
  if (sort.length === 0) return ''
  const keys: string[] = []
  const field = chFieldsOf(sort)
  for (const s of sort) {
    const dir = s.direction === 'desc' ? 'DESC' : 'ASC'
    const f = field(s.field, params)
    if (f.raw || f.type === 'string') {
      const v = f.raw ?? f.sql
      keys.push(`isNull(${v}) ASC`, `isNull(toFloat64OrNull(${v})) ASC`, `toFloat64OrNull(${v}) ${dir}`, `(${v}) ${dir}`)
    } else keys.push(`(${f.sql}) ${dir} NULLS LAST`)
  }
  return `ORDER BY ${keys.join(', ')}, m.id ASC`
}

/** The matching calls, whole, in order, with limit and offset. */
export function chSelectSql(l: Layout, project: string, opts: QueryOptions, params: ChParams): string {
  const matching = chMatching(l, project, opts, params)
  let sql = `SELECT ${CH_SELECT_OUT} FROM ${matching} ${chOrderBy(opts.sort_by, params)}`
  if (opts.limit !== undefined && opts.limit !== null) sql += ` LIMIT ${params.add(opts.limit, 'UInt64')}`
  if (opts.offset) sql += ` OFFSET ${params.add(opts.offset, 'UInt64')}`
  return sql
}

/** How many calls match (up to limit), as a statement reading `n`. */
export function chCountSql(l: Layout, project: string, opts: QueryOptions, params: ChParams): string {
  const limit = opts.limit ? ` LIMIT ${params.add(opts.limit, 'UInt64')}` : ''
  return `SELECT count() AS n FROM (SELECT 1 FROM ${chMatching(l, project, opts, params, [], [])}${limit})`
}

/**
 * The live (not deleted) calls among `ids` (`by: 'id'`) or whose parent is among them (`by: 'parent'`):
 * one level of /calls/delete's walk down a tree, as a statement reading `id`.
 */
export function chLiveByIdsSql(l: Layout, project: string, ids: string[], by: 'id' | 'parent', params: ChParams): string {
  const p = params.add(project, 'String')
  const v = params.add(ids, 'Array(String)')
  const rowCond = by === 'id' ? `has(${v}, id)` : `has(${v}, tupleElement(parent_id, 2))`
  const t = table(l, 'calls_merged')
  return `SELECT id FROM (
    SELECT c.id AS id, max(c.parent_id).2 AS parent_id, max(c.deleted_at) AS deleted_at
    FROM ${t} AS c
    WHERE c.project_id = ${p} AND c.id IN (SELECT id FROM ${t} WHERE project_id = ${p} AND ${rowCond})
    GROUP BY c.id)
  WHERE deleted_at IS NULL AND ${by === 'id' ? `has(${v}, id)` : `has(${v}, parent_id)`}`
}

const JSON_ROOTS = new Set(['inputs', 'output', 'attributes', 'summary'])

/**
 * The distinct ref strings at the given JSON paths (`['inputs', 'example']`) of the live calls matching a
 * filter, at most `limit`, as a statement reading `r`: the refs an expanded field needs resolved first
 * (calls/read/expand.ts is the embedded store's).
 */
export function chDistinctRefsSql(
  l: Layout,
  project: string,
  filter: QueryOptions['filter'],
  paths: string[][],
  limit: number,
  params: ChParams,
): string {
  if (paths.some((p) => !JSON_ROOTS.has(p[0]!))) throw new Error('expand paths start with a JSON column')
  const values = paths.map((p) => `JSONExtractString(${chJsonArgs(`m.${p[0]}`, p.slice(1), params)})`)
  const matching = chMatching(l, project, { filter }, params)
  return `SELECT DISTINCT r FROM (SELECT arrayJoin([${values.join(', ')}]) AS r FROM ${matching})
    WHERE startsWith(r, 'weave:///') LIMIT ${params.add(limit, 'UInt64')}`
}
