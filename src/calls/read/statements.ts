import { listValue } from '@duckdb/node-api'
import { Params } from '../../query/expr.js'
import type { QueryOptions } from '../model.js'
import { MERGED, matching, merged } from './merged.js'

/** How many calls match (up to limit), as a statement reading `n`. */
export function countSql(project: string, opts: QueryOptions): { sql: string; params: Params } {
  const params = new Params()
  const limit = opts.limit ? ` LIMIT ${params.add(opts.limit)}` : ''
  const sql = `SELECT count(*)::BIGINT AS n FROM (SELECT 1 FROM ${matching(project, opts, params, true)}${limit})`
  return { sql, params }
}

/**
 * `total_storage_size_bytes` (docs/calls-and-storage.md): over the matching root calls, the JSON bytes
 * (attributes, inputs, output, summary) of every live call of their traces, as a statement reading `n`.
 */
export function traceBytesSql(project: string, opts: QueryOptions): { sql: string; params: Params } {
  const params = new Params()
  const limit = opts.limit ? ` LIMIT ${params.add(opts.limit)}` : ''
  const roots = `SELECT m.trace_id FROM ${matching(project, opts, params, true, '', { where: ['m.parent_id IS NULL'] })}${limit}`
  const p = params.add(project)
  const sql = `SELECT coalesce(sum(coalesce(octet_length(encode(m.attributes)), 0) + coalesce(octet_length(encode(m.inputs)), 0)
        + coalesce(octet_length(encode(m.output)), 0) + coalesce(octet_length(encode(m.summary)), 0)), 0)::BIGINT AS n
      FROM (${MERGED} WHERE project_id = ${p} AND id IN (SELECT id FROM all_parts WHERE project_id = ${p} AND trace_id IN (${roots})) GROUP BY project_id, id) m
      WHERE m.deleted_at IS NULL AND m.started_at IS NOT NULL`
  return { sql, params }
}

/** The given live calls and all their live descendants, as a statement reading `id`. */
export function descendantsSql(project: string, ids: string[]): { sql: string; params: Params } {
  const params = new Params()
  const p = params.add(project)
  const l = params.add(listValue(ids))
  const sql = `WITH RECURSIVE m AS (SELECT * FROM (${merged(['parent_id'], false)} WHERE project_id = ${p} GROUP BY project_id, id) WHERE deleted_at IS NULL),
      d(id) AS (SELECT id FROM m WHERE list_contains(${l}, id) UNION SELECT m.id FROM m JOIN d ON m.parent_id = d.id)
      SELECT id FROM d`
  return { sql, params }
}
