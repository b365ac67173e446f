import type { DuckDBValue } from '@duckdb/node-api'
import { DomainError } from '../core/errors.js'

/**
 * Weave's query language over the feedback table: `$and`, `$or`, `$not`, comparisons, `$in` and
 * `$contains` on columns and `payload.<path>`. Every value is a bound parameter; column names come
 * from an allow-list and payload paths are checked against a safe pattern, then bound as well.
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
const MAX_DEPTH = 32

export class Params {
  readonly values: DuckDBValue[] = []
  add(v: DuckDBValue): string {
    this.values.push(v)
    return `$${this.values.length}`
  }
}

/** A column, or `payload.a.b` read as text (`json_extract_string` with the path bound). */
export function fieldSql(field: unknown, params: Params): string {
  if (typeof field !== 'string') throw new DomainError(400, 'A field name must be a string')
  const col = FEEDBACK_COLUMNS[field]
  if (col) return col
  const [root, ...path] = field.split('.')
  if (root !== 'payload' || path.length === 0 || !path.every((s) => SEGMENT.test(s)))
    throw new DomainError(400, `Unknown feedback field ${JSON.stringify(field)}`)
  return `json_extract_string(payload_dump, ${params.add('$' + path.map((s) => `."${s}"`).join(''))})`
}

type Operand = { field: string } | { literal: unknown }

function operand(x: unknown, params: Params): Operand {
  const o = x as Record<string, unknown> | null
  if (o && typeof o === 'object' && '$getField' in o) return { field: fieldSql(o.$getField, params) }
  if (o && typeof o === 'object' && '$literal' in o) return { literal: o.$literal }
  throw new DomainError(400, 'Operands are {"$getField": <field>} or {"$literal": <value>}')
}

/** A literal as a bound value: numbers compared as numbers, the rest as text (payload fields read as text). */
function bind(v: unknown, params: Params): string {
  if (typeof v === 'number') return params.add(v)
  if (typeof v === 'string' || typeof v === 'boolean') return params.add(String(v))
  throw new DomainError(400, 'Literals compared here are strings, numbers or booleans')
}

const CMP: Record<string, string> = { $eq: '=', $gt: '>', $gte: '>=', $lt: '<', $lte: '<=' }

function compare(op: string, arg: unknown, params: Params): string {
  if (!Array.isArray(arg) || arg.length !== 2) throw new DomainError(400, `${op} takes two operands`)
  const [a, b] = arg.map((x) => operand(x, params)) as [Operand, Operand]
  const side = (o: Operand, other: Operand) => {
    if ('field' in o) return 'literal' in other && typeof other.literal === 'number' ? `TRY_CAST(${o.field} AS DOUBLE)` : o.field
    return o.literal === null ? 'NULL' : bind(o.literal, params)
  }
  if (op === '$eq' && 'literal' in b && b.literal === null && 'field' in a) return `(${a.field} IS NULL)`
  return `(${side(a, b)} ${CMP[op]} ${side(b, a)})`
}

function inList(arg: unknown, params: Params): string {
  if (!Array.isArray(arg) || arg.length !== 2 || !Array.isArray(arg[1])) throw new DomainError(400, '$in takes a field and a list')
  const a = operand(arg[0], params)
  if (!('field' in a)) throw new DomainError(400, '$in takes a field first')
  const values = arg[1].map((x) => {
    const o = operand(x, params)
    if (!('literal' in o) || (typeof o.literal !== 'string' && typeof o.literal !== 'number'))
      throw new DomainError(400, '$in lists literals')
    return String(o.literal)
  })
  return `list_contains(from_json(${params.add(JSON.stringify(values))}::JSON, '["VARCHAR"]'), ${a.field})`
}

function contains(arg: unknown, params: Params): string {
  const c = arg as { input?: unknown; substr?: unknown; case_insensitive?: unknown } | null
  if (!c || typeof c !== 'object') throw new DomainError(400, '$contains takes {input, substr}')
  const input = operand(c.input, params)
  const sub = operand(c.substr, params)
  if (!('field' in input) || !('literal' in sub) || typeof sub.literal !== 'string')
    throw new DomainError(400, '$contains takes a field input and a string substr')
  const f = c.case_insensitive === true ? 'contains(lower(%s), lower(%p))' : 'contains(%s, %p)'
  return f.replace('%s', input.field).replace('%p', params.add(sub.literal))
}

/** One operation of `$expr` as a SQL condition. */
export function compileExpr(e: unknown, params: Params, depth = 0): string {
  if (depth > MAX_DEPTH) throw new DomainError(400, 'Query nested too deeply')
  if (!e || typeof e !== 'object' || Array.isArray(e) || Object.keys(e).length !== 1)
    throw new DomainError(400, 'An operation has one operator')
  const [[op, arg]] = Object.entries(e) as [[string, unknown]]
  const list = () => {
    if (!Array.isArray(arg) || arg.length === 0) throw new DomainError(400, `${op} takes a list of operations`)
    return arg.map((x) => compileExpr(x, params, depth + 1))
  }
  if (op === '$and') return `(${list().join(' AND ')})`
  if (op === '$or') return `(${list().join(' OR ')})`
  if (op === '$not') return `(NOT coalesce(${list()[0]}, false))`
  if (op in CMP) return compare(op, arg, params)
  if (op === '$in') return inList(arg, params)
  if (op === '$contains') return contains(arg, params)
  throw new DomainError(400, `Unsupported operator ${op} in a feedback query`)
}
