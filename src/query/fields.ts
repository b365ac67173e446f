import { DomainError } from '../core/errors.js'
import { checkFieldName, jsonField, splitPath, type Compiled, type SqlType } from './compiled.js'
import { boundFeedback, feedbackFieldSql, type FeedbackValues } from './feedback-fields.js'
import { boundExpand, expandFieldSql, type ExpandBinding } from './expand-fields.js'
import type { Params } from './params.js'

/**
 * Where a call field name becomes SQL over the merged call `m`: columns, derived summary values,
 * JSON paths, and values resolved outside the call store and bound to the request (feedback today;
 * expanded refs would be another kind of bound value resolved here). Filters and sorts both come here.
 */

/** Top-level call columns a query may name, with the merged relation's column and its type. */
export const CALL_COLUMNS: Record<string, { sql: string; type: SqlType }> = {
  id: { sql: 'm.id', type: 'string' },
  project_id: { sql: 'm.project_id', type: 'string' },
  trace_id: { sql: 'm.trace_id', type: 'string' },
  parent_id: { sql: 'm.parent_id', type: 'string' },
  thread_id: { sql: 'm.thread_id', type: 'string' },
  turn_id: { sql: 'm.turn_id', type: 'string' },
  op_name: { sql: 'm.op_name', type: 'string' },
  display_name: { sql: 'm.display_name', type: 'string' },
  exception: { sql: 'm.exception', type: 'string' },
  started_at: { sql: 'm.started_at', type: 'timestamp' },
  ended_at: { sql: 'm.ended_at', type: 'timestamp' },
  svc_user_id: { sql: 'm.user_id', type: 'string' },
  wb_user_id: { sql: 'm.user_id', type: 'string' },
  svc_run_id: { sql: 'm.run_id', type: 'string' },
  wb_run_id: { sql: 'm.run_id', type: 'string' },
  svc_run_step: { sql: 'm.run_step', type: 'number' },
  wb_run_step: { sql: 'm.run_step', type: 'number' },
  svc_run_step_end: { sql: 'm.run_step_end', type: 'number' },
  wb_run_step_end: { sql: 'm.run_step_end', type: 'number' },
}

/** Derived at read time from the merged call (docs/calls-and-storage.md). */
export const DERIVED: Record<string, { sql: string; type: SqlType }> = {
  'summary.weave.status': {
    sql: `(CASE WHEN m.exception IS NOT NULL THEN 'error' WHEN m.ended_at IS NULL THEN 'running'
      WHEN coalesce(TRY_CAST(json_extract_string(m.summary, '$.status_counts.error') AS BIGINT), 0) > 0 THEN 'descendant_error'
      ELSE 'success' END)`,
    type: 'string',
  },
  'summary.weave.latency_ms': { sql: '(epoch_ms(m.ended_at) - epoch_ms(m.started_at))', type: 'number' },
  'summary.weave.trace_name': {
    sql: `coalesce(nullif(m.display_name, ''), nullif(regexp_extract(m.op_name, '/([^/:]*):', 1), ''), m.op_name)`,
    type: 'string',
  },
}

const SENTINEL_TEXT = new Set(
  ['parent_id', 'display_name', 'exception', 'thread_id', 'turn_id'].concat(['user_id', 'run_id'].flatMap((c) => [`svc_${c}`, `wb_${c}`])),
)

const JSON_ROOTS: Record<string, string> = { inputs: 'm.inputs', output: 'm.output', attributes: 'm.attributes', summary: 'm.summary' }

/** Values resolved outside the call store for one request (see feedback-fields.ts). */
export interface BoundValues {
  feedback?: Map<string, FeedbackValues>
  /** Refs under `expand_columns`, resolved (expand-fields.ts). */
  expand?: ExpandBinding
}

/** The values bound to a request's query or sort list (by identity). */
export function boundValues(target: object | null | undefined): BoundValues {
  return { feedback: boundFeedback(target), expand: boundExpand(target) }
}

/** How one engine reads call fields: its derived values, JSON paths, and values bound to the request. */
export interface CallFieldDialect<P> {
  derived: Record<string, { sql: string; type: SqlType }>
  json(column: string, segs: string[], params: P): Compiled
  feedback(field: string, params: P): Compiled
  /** An expanded ref's value (expand-fields.ts), or null where the field is not under an expand column. */
  expand(field: string, params: P): Compiled | null
}

/**
 * A call field (`$getField` and sort keys) as SQL over the merged call `m`, in any engine's dialect:
 * which names are fields, how absent values compare, and the errors are decided here, once.
 */
export function resolveCallField<P>(field: string, params: P, d: CallFieldDialect<P>): Compiled {
  checkFieldName(field)
  const col = CALL_COLUMNS[field] ?? d.derived[field]
  // Weave's newest call table stores these absent as '' (and `$eq null` checks for ''): compared so here.
  if (col && SENTINEL_TEXT.has(field)) return { sql: `coalesce(${col.sql}, '')`, raw: col.sql, type: 'string', nullAs: `''` }
  if (col) return { sql: col.sql, type: col.type }
  if (field.startsWith('feedback.')) return d.feedback(field, params)
  const dot = field.indexOf('.')
  const root = dot < 0 ? field : field.slice(0, dot)
  const column = JSON_ROOTS[root]
  if (!column) throw new DomainError(403, `Invalid field: ${JSON.stringify(field)} is not a field calls can be filtered or sorted on`)
  const segs = dot < 0 ? [] : splitPath(field.slice(dot + 1))
  if (segs.some((s) => s.length === 0)) throw new DomainError(403, `Invalid field: ${JSON.stringify(field)} has an empty path segment`)
  return d.expand(field, params) ?? d.json(column, segs, params)
}

/** A call field (`$getField` and sort keys) as DuckDB SQL over the merged call `m`. */
export function callField(field: string, params: Params, bound: BoundValues = {}): Compiled {
  return resolveCallField(field, params, {
    derived: DERIVED,
    json: jsonField,
    feedback: (f, p) => feedbackFieldSql(f, bound.feedback, p),
    expand: (f, p) => expandFieldSql(f, bound.expand, p),
  })
}
