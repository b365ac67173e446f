import { Params } from '../../query/expr.js'
import { jsonPath } from '../../query/compiled.js'
import type { QueryOptions } from '../model.js'
import { matching } from './merged.js'

const JSON_COLUMNS = new Set(['inputs', 'output', 'attributes', 'summary'])

/**
 * The distinct ref strings found at the given JSON paths (`['inputs', 'example']`) of the live calls
 * matching a filter, at most `limit`: the refs a query on expanded columns needs resolved first
 * (docs/calls-and-storage.md, expand_columns). Only the columns the paths name are merged.
 */
export function distinctRefsSql(
  project: string,
  filter: QueryOptions['filter'],
  paths: string[][],
  limit: number,
): { sql: string; params: Params } {
  const params = new Params()
  if (paths.some((p) => !JSON_COLUMNS.has(p[0]!))) throw new Error('expand paths start with a JSON column')
  const roots = [...new Set(paths.map((p) => p[0]!))]
  const values = paths.map((p) => `json_extract_string(m.${p[0]}, ${params.add(jsonPath(p.slice(1)))})`)
  const rel = matching(project, { filter }, params, true, '', { columns: roots })
  const sql = `SELECT DISTINCT r FROM (SELECT unnest([${values.join(', ')}]) AS r FROM ${rel})
    WHERE starts_with(r, 'weave:///') LIMIT ${params.add(limit)}`
  return { sql, params }
}
