import { listValue } from '@duckdb/node-api'
import type { Params } from '../query/expr.js'
import { checkFilterList, opNamesSql } from '../query/list-filters.js'
import type { CallFilter } from '../schemas/common.js'
import type { Tier } from './rollups.js'

/**
 * A filter the rollups can answer, as conditions on their dimension columns, and the tier holding
 * them; null when they cannot (trace, call, parent, thread or turn ids, refs).
 */
export function dimFilter(f: CallFilter | null | undefined, params: Params): { conds: string[]; tier: Tier } | null {
  const conds: string[] = []
  if (!f) return { conds, tier: 'project' }
  const answerable = new Set(['op_names', 'trace_roots_only', 'svc_user_ids', 'wb_user_ids', 'svc_run_ids', 'wb_run_ids'])
  for (const [k, v] of Object.entries(f)) if (v !== null && v !== undefined && !answerable.has(k)) return null
  if (f.op_names) conds.push(opNamesSql(f.op_names, params))
  if (f.trace_roots_only) conds.push('is_root')
  let tier: Tier = f.op_names ? 'op' : 'project'
  for (const [col, a, b] of [
    ['user_id', f.svc_user_ids, f.wb_user_ids],
    ['run_id', f.svc_run_ids, f.wb_run_ids],
  ] as const) {
    if (!a && !b) continue
    const l = [...new Set([...(a ?? []), ...(b ?? [])])]
    checkFilterList(col === 'user_id' ? 'svc_user_ids' : 'svc_run_ids', l)
    // An empty list filters nothing, as in the scan (calls/read/filter.ts) and in Weave (`if filter.wb_user_ids:`).
    if (!l.length) continue
    tier = 'user'
    conds.push(`list_contains(${params.add(listValue(l))}, ${col})`)
  }
  return { conds, tier }
}
