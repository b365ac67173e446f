import { listValue } from '@duckdb/node-api'
import { DomainError } from '../../core/errors.js'
import type { Params } from '../../query/expr.js'
import type { CallFilter } from '../model.js'

const MAX_FILTER_LIST = 1000

/** Filter lists are bounded (each becomes a bound list parameter): past the bound, 400. */
export function checkFilterList(name: string, values: readonly unknown[]): void {
  if (values.length > MAX_FILTER_LIST) throw new DomainError(400, `filter.${name} has more than ${MAX_FILTER_LIST} entries`)
}

/** `filter.op_names` as a condition on a column `op_name`; `weave:///e/p/op/name:*` matches every version. */
export function opNamesSql(names: string[], params: Params): string {
  checkFilterList('op_names', names)
  const exact = names.filter((n) => !n.endsWith(':*'))
  // An empty list literal has no element type for DuckDB to bind: leave the term out instead.
  const ors = exact.length ? [`list_contains(${params.add(listValue(exact))}, op_name)`] : []
  for (const n of names.filter((x) => x.endsWith(':*'))) ors.push(`starts_with(op_name, ${params.add(n.slice(0, -1))})`)
  return ors.length ? `(${ors.join(' OR ')})` : 'false'
}

/**
 * ` AND column BETWEEN min AND max` of a list filter: segments are sorted by id (and UUIDv7 ids and
 * trace ids follow time), so DuckDB's row-group statistics skip what lies outside — a list match
 * alone cannot use them. Only for ASCII values, where JavaScript's order is DuckDB's byte order.
 */
export function rangeOf(values: string[], column: string, params: Params): string {
  if (values.length === 0 || values.some((v) => !/^[\x20-\x7e]*$/.test(v))) return ''
  let lo = values[0]!
  let hi = values[0]!
  for (const v of values) {
    if (v < lo) lo = v
    if (v > hi) hi = v
  }
  return ` AND ${column} >= ${params.add(lo)} AND ${column} <= ${params.add(hi)}`
}

/**
 * The filter as conditions on the merged call (`m.`), and as conditions on single parts that a
 * matching call must have at least one part meeting: a merged field is one of its parts' values,
 * so these narrow the calls to merge before merging, without changing the answer.
 */
export function filterSql(f: CallFilter | null | undefined, params: Params): { where: string[]; narrow: string[] } {
  const where: string[] = []
  const narrow: string[] = []
  if (!f) return { where, narrow }
  // As Weave: an empty id list filters nothing, except thread and turn ids, where an empty list matches nothing.
  const list = (name: string, values: string[] | null | undefined, column: string) => {
    if (!values) return
    checkFilterList(name, values)
    if (values.length === 0) {
      if (column !== 'thread_id' && column !== 'turn_id') return
      where.push('false')
      narrow.push('false')
      return
    }
    const l = params.add(listValue(values))
    where.push(`list_contains(${l}, m.${column})`)
    narrow.push(`list_contains(${l}, ${column})${rangeOf(values, column, params)}`)
  }
  if (f.op_names) {
    const any = opNamesSql(f.op_names, params)
    where.push(any.replaceAll('op_name', 'm.op_name'))
    narrow.push(any)
  }
  list('parent_ids', f.parent_ids, 'parent_id')
  list('trace_ids', f.trace_ids, 'trace_id')
  list('call_ids', f.call_ids, 'id')
  list('thread_ids', f.thread_ids, 'thread_id')
  list('turn_ids', f.turn_ids, 'turn_id')
  list('svc_user_ids', union(f.svc_user_ids, f.wb_user_ids), 'user_id')
  list('svc_run_ids', union(f.svc_run_ids, f.wb_run_ids), 'run_id')
  for (const name of ['input_refs', 'output_refs'] as const) {
    const v = f[name]
    if (!v) continue
    checkFilterList(name, v)
    if (v.length === 0) continue
    where.push(`list_has_any(m.${name}, ${params.add(listValue(v))})`)
  }
  if (f.trace_roots_only) where.push('m.parent_id IS NULL')
  return { where, narrow }
}

function union(a: string[] | null | undefined, b: string[] | null | undefined): string[] | undefined {
  if (!a && !b) return undefined
  return [...new Set([...(a ?? []), ...(b ?? [])])]
}
