import { listValue } from '@duckdb/node-api'
import type { Params } from '../../query/expr.js'
import { checkFilterList, opNamesCond, rangeOf, splitOpNames, type OpNames } from '../../query/list-filters.js'
import type { CallFilter } from '../model.js'

/** The id-like columns a filter lists values of; a call matches when its value is one of them. */
export type ListColumn = 'parent_id' | 'trace_id' | 'id' | 'thread_id' | 'turn_id' | 'user_id' | 'run_id'

/**
 * A call filter taken apart once, for every engine (this file's DuckDB SQL, clickhouse/calls-sql.ts):
 * each list bounded, the user and run id aliases joined, and Weave's empty-list rules applied — an
 * empty id list filters nothing and is left out, but an empty thread or turn id list matches nothing
 * (kept, empty). Terms come in a fixed order, so the SQL (and its parameters) is stable.
 */
export interface FilterTerms {
  opNames?: OpNames
  lists: { column: ListColumn; values: string[] }[]
  /** Non-empty ref lists: the call must hold at least one of them. */
  refs: { column: 'input_refs' | 'output_refs'; values: string[] }[]
  rootsOnly: boolean
}

export function filterTerms(f: CallFilter | null | undefined): FilterTerms {
  const t: FilterTerms = { lists: [], refs: [], rootsOnly: f?.trace_roots_only === true }
  if (!f) return t
  if (f.op_names) t.opNames = splitOpNames(f.op_names)
  const list = (name: string, values: string[] | null | undefined, column: ListColumn) => {
    if (!values) return
    checkFilterList(name, values)
    if (values.length > 0 || column === 'thread_id' || column === 'turn_id') t.lists.push({ column, values })
  }
  list('parent_ids', f.parent_ids, 'parent_id')
  list('trace_ids', f.trace_ids, 'trace_id')
  list('call_ids', f.call_ids, 'id')
  list('thread_ids', f.thread_ids, 'thread_id')
  list('turn_ids', f.turn_ids, 'turn_id')
  list('svc_user_ids', union(f.svc_user_ids, f.wb_user_ids), 'user_id')
  list('svc_run_ids', union(f.svc_run_ids, f.wb_run_ids), 'run_id')
  for (const column of ['input_refs', 'output_refs'] as const) {
    const v = f[column]
    if (!v) continue
    checkFilterList(column, v)
    if (v.length > 0) t.refs.push({ column, values: v })
  }
  return t
}

/**
 * The filter as conditions on the merged call (`m.`), and as conditions on single parts that a
 * matching call must have at least one part meeting: a merged field is one of its parts' values,
 * so these narrow the calls to merge before merging, without changing the answer.
 */
export function filterSql(f: CallFilter | null | undefined, params: Params): { where: string[]; narrow: string[] } {
  const where: string[] = []
  const narrow: string[] = []
  const t = filterTerms(f)
  if (t.opNames) {
    const any = opNamesCond(t.opNames, params)
    where.push(any.replaceAll('op_name', 'm.op_name'))
    narrow.push(any)
  }
  for (const { column, values } of t.lists) {
    if (values.length === 0) {
      where.push('false')
      narrow.push('false')
      continue
    }
    const l = params.add(listValue(values))
    where.push(`list_contains(${l}, m.${column})`)
    narrow.push(`list_contains(${l}, ${column})${rangeOf(values, column, params)}`)
  }
  for (const { column, values } of t.refs) where.push(`list_has_any(m.${column}, ${params.add(listValue(values))})`)
  if (t.rootsOnly) where.push('m.parent_id IS NULL')
  return { where, narrow }
}

function union(a: string[] | null | undefined, b: string[] | null | undefined): string[] | undefined {
  if (!a && !b) return undefined
  return [...new Set([...(a ?? []), ...(b ?? [])])]
}
