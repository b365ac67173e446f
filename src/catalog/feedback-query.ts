import { DomainError } from '../core/errors.js'
import { jsonField, type Compiled } from '../query/compiled.js'
import { compileWith } from '../query/expr.js'
import { Params } from '../query/params.js'

export { Params }

/**
 * Weave's query language over the feedback table, on columns and `payload.<path>`. Every value is a
 * bound parameter; column names come from an allow-list and payload paths are checked against a safe
 * pattern, then bound as well.
 */

/** Columns a query, field list or sort may name, as SQL over the feedback table. */
export const FEEDBACK_COLUMNS: Record<string, string> = {
  id: 'id',
  project_id: 'project_id',
  weave_ref: 'weave_ref',
  wb_user_id: 'wb_user_id',
  creator: 'creator',
  created_at: `strftime(created_at, '%Y-%m-%dT%H:%M:%S.%gZ')`,
  feedback_type: 'feedback_type',
  payload: 'payload_dump',
  annotation_ref: 'annotation_ref',
  runnable_ref: 'runnable_ref',
  call_ref: 'call_ref',
  trigger_ref: 'trigger_ref',
}

const SEGMENT = /^[A-Za-z0-9_-]+$/

/** `payload.a.b` split into its path, or null when the name is not a payload path of the safe pattern. */
export function payloadPath(field: string): string[] | null {
  const [root, ...path] = field.split('.')
  return root === 'payload' && path.length > 0 && path.every((s) => SEGMENT.test(s)) ? path : null
}

/** A column, or `payload.a.b` read as text (`json_extract_string` with the path bound): for fields and sorts. */
export function fieldSql(field: unknown, params: Params): string {
  if (typeof field !== 'string') throw new DomainError(400, 'A field name must be a string')
  const col = FEEDBACK_COLUMNS[field]
  if (col) return col
  const path = payloadPath(field)
  if (!path) throw new DomainError(400, `Unknown feedback field ${JSON.stringify(field)}`)
  return jsonField('payload_dump', path, params).raw!
}

/** A field in a query: columns as they are typed, payload paths as JSON fields (`''` when missing). */
function queryField(field: string, params: Params): Compiled {
  if (field === 'created_at') return { sql: 'created_at', type: 'timestamp' }
  if (field === 'payload') return { sql: 'payload_dump', type: 'string' }
  if (FEEDBACK_COLUMNS[field]) return { sql: FEEDBACK_COLUMNS[field]!, type: 'string' }
  const path = payloadPath(field)
  if (!path) throw new DomainError(400, `Unknown feedback field ${JSON.stringify(field)}`)
  return jsonField('payload_dump', path, params)
}

/**
 * `$expr` over the feedback table: the calls' query language (query/expr.ts) with feedback's fields.
 * One difference, kept from before: a payload field compared with a number compares as a number.
 */
export function compileExpr(e: unknown, params: Params): string {
  return compileWith({ $expr: e }, params, { resolve: queryField, lenientJson: true })
}
