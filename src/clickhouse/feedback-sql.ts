import { FEEDBACK_COLUMNS, payloadPath } from '../catalog/feedback-query.js'
import type { Compiled } from '../query/compiled.js'
import { DomainError } from '../core/errors.js'
import type { FeedbackQueryReq } from '../schemas/feedback.js'
import { table, type Layout } from './layout.js'
import { ChCompiler } from './query/expr.js'
import { chJsonField } from './query/fields.js'
import type { ChParams } from './query/params.js'

/** Columns a feedback query, field list or sort may name: the embedded store's, with ClickHouse's time format. */
export const CH_FEEDBACK_COLUMNS: Record<string, string> = {
  ...FEEDBACK_COLUMNS,
  // Milliseconds, as the embedded store writes them (%f gives the column's six digits).
  created_at: `concat(substring(formatDateTime(created_at, '%Y-%m-%dT%H:%i:%S.%f'), 1, 23), 'Z')`,
}

const unknownField = (field: unknown) => new DomainError(400, `Unknown feedback field ${JSON.stringify(field)}`)

/** A column, or `payload.a.b` read as text (NULL when missing): for fields and sorts. */
function fieldSql(field: unknown, p: ChParams): string {
  if (typeof field !== 'string') throw new DomainError(400, 'A field name must be a string')
  const col = CH_FEEDBACK_COLUMNS[field]
  if (col) return col
  const path = payloadPath(field)
  if (!path) throw unknownField(field)
  return chJsonField('payload_dump', path, p).raw!
}

/** A field in a `$expr`: columns as typed, payload paths as JSON fields. */
function queryField(field: string, p: ChParams): Compiled {
  if (field === 'created_at') return { sql: 'created_at', type: 'timestamp' }
  if (field === 'payload') return { sql: 'payload_dump', type: 'string' }
  if (CH_FEEDBACK_COLUMNS[field]) return { sql: `coalesce(${CH_FEEDBACK_COLUMNS[field]!}, '')`, type: 'string' }
  const path = payloadPath(field)
  if (!path) throw unknownField(field)
  return chJsonField('payload_dump', path, p)
}

/** A project's live feedback rows: the newest row of each (a purge writes the row again with `deleted_at`). */
export function liveFeedbackSql(l: Layout, p: ChParams, project: string): string {
  return `(SELECT * FROM ${table(l, 'feedback')} FINAL WHERE project_id = ${p.add(project, 'String')} AND isNull(deleted_at))`
}

/**
 * `/feedback/query` as ClickHouse SQL: the page (fields selected as f0, f1, … in the order asked) and the
 * count, sharing the condition. `$expr` compiles with the ClickHouse $expr compiler (query/expr.ts), comparing payload fields with
 * numbers as numbers, as the embedded store does.
 */
export function feedbackQuerySql(l: Layout, p: ChParams, q: FeedbackQueryReq, fields: string[]): { page: string; count: string } {
  let where = ''
  if (q.query) {
    const c = new ChCompiler(p, queryField, { lenientJson: true })
    const cond = c.bool(c.operation(q.query.$expr, 0))
    where = ` WHERE coalesce(${cond}, false)`
  }
  const from = `${liveFeedbackSql(l, p, q.project_id)}${where}`
  const select = fields.map((f, i) => `${fieldSql(f, p)} AS f${i}`).join(', ')
  const order = (q.sort_by ?? []).map((s) => `${fieldSql(s.field, p)} ${s.direction === 'desc' ? 'DESC' : 'ASC'} NULLS LAST`)
  let page = `SELECT ${select} FROM ${from} ORDER BY ${[...order, 'created_at ASC', 'id ASC'].join(', ')}`
  if (q.limit !== undefined && q.limit !== null) page += ` LIMIT ${p.add(q.limit, 'UInt64')}`
  if (q.offset)
    page += `${q.limit === undefined || q.limit === null ? ' LIMIT 18446744073709551615' : ''} OFFSET ${p.add(q.offset, 'UInt64')}`
  return { page, count: `SELECT count() AS n FROM ${from}` }
}
