import type { DuckDBValue } from '@duckdb/node-api'
import { DomainError } from '../core/errors.js'

/**
 * Weave's query language (`{"$expr": ...}`, docs/calls-and-storage.md) compiled to DuckDB SQL over the merged
 * call relation. User values only ever become bound parameters; field names are checked against an
 * allow-list and JSON paths are bound as parameters too, so no user string reaches SQL text.
 */
export class Params {
  readonly values: DuckDBValue[] = []
  add(v: DuckDBValue): string {
    this.values.push(v)
    return `$${this.values.length}`
  }
}

type SqlType = 'string' | 'number' | 'bool' | 'timestamp' | 'null' | 'any'
interface Compiled {
  sql: string
  type: SqlType
  /** Set for JSON fields: the column and bound path, for `$convert: exists`. */
  json?: { column: string; path: string }
  /** Set for a literal: its value, for `IS NULL` rewriting. */
  literal?: unknown
}

const MAX_NODES = 2000
const MAX_DEPTH = 64

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

const JSON_ROOTS: Record<string, string> = { inputs: 'm.inputs', output: 'm.output', attributes: 'm.attributes', summary: 'm.summary' }

/** `a.b.0.c` under a JSON column → the JSON path `$."b"[0]."c"`, keys quoted so no key is syntax. */
function jsonPath(segments: string[]): string {
  let p = '$'
  for (const s of segments) {
    if (/^(0|[1-9]\d{0,8})$/.test(s)) p += `[${s}]`
    else p += '.' + JSON.stringify(s)
  }
  return p
}

/** A field reference (`$getField` and sort keys) as SQL. */
export function fieldSql(field: string, params: Params): Compiled {
  if (typeof field !== 'string' || field.length === 0 || field.length > 512)
    throw new DomainError(400, 'Field names must be non-empty strings of at most 512 characters')
  const col = CALL_COLUMNS[field]
  if (col) return { sql: col.sql, type: col.type }
  const derived = DERIVED[field]
  if (derived) return { sql: derived.sql, type: derived.type }
  const dot = field.indexOf('.')
  const root = dot < 0 ? field : field.slice(0, dot)
  const column = JSON_ROOTS[root]
  if (!column) throw new DomainError(403, `Invalid field: ${JSON.stringify(field)} is not a field calls can be filtered or sorted on`)
  if (dot < 0) return { sql: `CAST(${column} AS VARCHAR)`, type: 'string' }
  const segs = field.slice(dot + 1).split('.')
  if (segs.some((s) => s.length === 0)) throw new DomainError(403, `Invalid field: ${JSON.stringify(field)} has an empty path segment`)
  const path = params.add(jsonPath(segs))
  return { sql: `json_extract_string(${column}, ${path})`, type: 'string', json: { column, path } }
}

class Compiler {
  private nodes = 0
  constructor(private readonly params: Params) {}

  operation(op: unknown, depth: number): Compiled {
    const [name, arg] = this.operator(op, depth)
    const d = depth + 1
    switch (name) {
      case '$literal':
        return this.literal(arg)
      case '$getField':
        if (typeof arg !== 'string') throw new DomainError(400, '$getField takes a field name string')
        return fieldSql(arg, this.params)
      case '$convert':
        return this.convert(arg, d)
      case '$and':
      case '$or':
        return this.andOr(name, arg, d)
      case '$not':
        return this.not(arg, d)
      case '$eq':
      case '$gt':
      case '$gte':
      case '$lt':
      case '$lte':
        return this.compare(name, arg, d)
      case '$in':
        return this.in(arg, d)
      case '$contains':
        return this.contains(arg, d)
      case '$size':
        return this.size(arg, d)
      default:
        throw new DomainError(400, `Unknown query operator ${JSON.stringify(name)}`)
    }
  }

  /** Counts the node against the bounds and takes the operand apart: its one operator and argument. */
  private operator(op: unknown, depth: number): [string, unknown] {
    if (++this.nodes > MAX_NODES) throw new DomainError(400, `Query has more than ${MAX_NODES} nodes`)
    if (depth > MAX_DEPTH) throw new DomainError(400, `Query is nested deeper than ${MAX_DEPTH} levels`)
    if (op === null || typeof op !== 'object' || Array.isArray(op))
      throw new DomainError(400, 'Each query operand must be an object such as {"$literal": ...}')
    const keys = Object.keys(op)
    if (keys.length !== 1)
      throw new DomainError(400, `Each query operand must have exactly one operator, got ${JSON.stringify(keys.slice(0, 5))}`)
    const name = keys[0]!
    return [name, (op as Record<string, unknown>)[name]]
  }

  private andOr(name: '$and' | '$or', arg: unknown, d: number): Compiled {
    if (!Array.isArray(arg)) throw new DomainError(400, `${name} takes a list of operands`)
    if (arg.length === 0) throw new DomainError(400, `Empty ${name === '$and' ? 'AND' : 'OR'} operation`)
    const parts = arg.map((a) => this.bool(this.operation(a, d)))
    if (parts.length === 1) return { sql: parts[0]!, type: 'bool' }
    return { sql: '(' + parts.join(name === '$and' ? ' AND ' : ' OR ') + ')', type: 'bool' }
  }

  private not(arg: unknown, d: number): Compiled {
    if (!Array.isArray(arg) || arg.length !== 1) throw new DomainError(400, '$not takes a list of exactly one operand')
    return { sql: `(NOT coalesce(${this.bool(this.operation(arg[0], d))}, false))`, type: 'bool' }
  }

  private in(arg: unknown, d: number): Compiled {
    if (!Array.isArray(arg) || arg.length !== 2 || !Array.isArray(arg[1])) throw new DomainError(400, '$in takes [operand, [operand, ...]]')
    const left = this.operation(arg[0], d)
    if ((arg[1] as unknown[]).length === 0) return { sql: 'false', type: 'bool' }
    const items = (arg[1] as unknown[]).map((x) => this.coerceFor(left, this.operation(x, d)))
    return { sql: `(${left.sql} IN (${items.join(', ')}))`, type: 'bool' }
  }

  private contains(arg: unknown, d: number): Compiled {
    const a = arg as { input?: unknown; substr?: unknown; case_insensitive?: unknown }
    if (!a || typeof a !== 'object' || a.input === undefined || a.substr === undefined)
      throw new DomainError(400, '$contains takes {input, substr, case_insensitive?}')
    const input = this.operation(a.input, d)
    const substr = this.operation(a.substr, d)
    const ci = a.case_insensitive === true
    const i = `CAST(${input.sql} AS VARCHAR)`
    const s = `CAST(${substr.sql} AS VARCHAR)`
    return { sql: ci ? `contains(lower(${i}), lower(${s}))` : `contains(${i}, ${s})`, type: 'bool' }
  }

  private size(arg: unknown, d: number): Compiled {
    const x = this.operation(arg, d)
    if (x.json) return { sql: `coalesce(json_array_length(${x.json.column}, ${x.json.path}), length(${x.sql}))`, type: 'number' }
    return { sql: `length(CAST(${x.sql} AS VARCHAR))`, type: 'number' }
  }

  private literal(v: unknown): Compiled {
    if (v === null) return { sql: 'NULL', type: 'null', literal: null }
    if (typeof v === 'string') return { sql: `CAST(${this.params.add(v)} AS VARCHAR)`, type: 'string', literal: v }
    if (typeof v === 'boolean') return { sql: `CAST(${this.params.add(v)} AS BOOLEAN)`, type: 'bool', literal: v }
    if (typeof v === 'number' && Number.isFinite(v)) return { sql: `CAST(${this.params.add(v)} AS DOUBLE)`, type: 'number', literal: v }
    throw new DomainError(400, '$literal must be a string, number, boolean or null here')
  }

  private convert(arg: unknown, d: number): Compiled {
    const a = arg as { input?: unknown; to?: unknown }
    if (!a || typeof a !== 'object' || a.input === undefined) throw new DomainError(400, '$convert takes {input, to}')
    const x = this.operation(a.input, d)
    switch (a.to) {
      case 'double':
        return { sql: `TRY_CAST(${x.sql} AS DOUBLE)`, type: 'number' }
      case 'int':
        return { sql: `TRY_CAST(TRY_CAST(${x.sql} AS DOUBLE) AS BIGINT)`, type: 'number' }
      case 'string':
        return { sql: `CAST(${x.sql} AS VARCHAR)`, type: 'string' }
      case 'bool':
        return { sql: `TRY_CAST(${x.sql} AS BOOLEAN)`, type: 'bool' }
      case 'exists':
        if (x.json) return { sql: `coalesce(json_type(${x.json.column}, ${x.json.path}) NOT IN ('NULL'), false)`, type: 'bool' }
        return { sql: `(${x.sql} IS NOT NULL)`, type: 'bool' }
      default:
        throw new DomainError(400, `$convert "to" must be one of double, int, string, bool, exists`)
    }
  }

  private compare(name: string, arg: unknown, d: number): Compiled {
    if (!Array.isArray(arg) || arg.length !== 2) throw new DomainError(400, `${name} takes a list of exactly two operands`)
    const left = this.operation(arg[0], d)
    const right = this.operation(arg[1], d)
    if (name === '$eq' && right.type === 'null') return { sql: `(${left.sql} IS NULL)`, type: 'bool' }
    if (name === '$eq' && left.type === 'null') return { sql: `(${right.sql} IS NULL)`, type: 'bool' }
    const op = { $eq: '=', $gt: '>', $gte: '>=', $lt: '<', $lte: '<=' }[name]!
    return { sql: `(${left.sql} ${op} ${this.coerceFor(left, right)})`, type: 'bool' }
  }

  /** The right side of a comparison with `left`, or a 400 where the types have nothing in common. */
  private coerceFor(left: Compiled, right: Compiled): string {
    if (left.type === 'timestamp' && right.type === 'string') return `TRY_CAST(${right.sql} AS TIMESTAMP)`
    const clash =
      (left.type === 'string' && (right.type === 'number' || right.type === 'bool')) ||
      ((left.type === 'number' || left.type === 'bool') && right.type === 'string')
    if (clash) {
      throw new DomainError(
        400,
        `Cannot compare a ${left.type} with a ${right.type}: JSON fields are strings; wrap the field in {"$convert": {"input": ..., "to": "double"}}`,
      )
    }
    return right.sql
  }

  bool(c: Compiled): string {
    return c.type === 'bool' ? c.sql : `TRY_CAST(${c.sql} AS BOOLEAN)`
  }
}

/** `{"$expr": op}` → a boolean SQL condition over the merged relation `m`. */
export function compileQuery(query: { $expr: unknown }, params: Params): string {
  const c = new Compiler(params)
  return c.bool(c.operation(query.$expr, 0))
}
