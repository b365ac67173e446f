import { DomainError } from '../core/errors.js'
import type { Compiled } from './compiled.js'
import type { Dialect } from './dialect.js'
import { DUCKDB } from './duckdb-dialect.js'
import { boundValues, callField } from './fields.js'
import { Params } from './params.js'

/**
 * Weave's query language (`{"$expr": ...}`, docs/calls-and-storage.md) compiled to SQL — DuckDB's, or
 * ClickHouse's (the dialect, dialect.ts, spells it; the semantics here are the one definition) — with
 * the semantics of Weave's ClickHouse server: JSON fields read as text (`''` when missing), a failed
 * `$convert` is NULL, and NULL follows SQL's three-valued logic through `$not`, `$and` and `$or` — the
 * caller keeps a row only where the whole condition is true. Fields come from a resolver, one per
 * table (calls: fields.ts; feedback: catalog/feedback-query.ts). User values only ever become bound
 * parameters; field names are checked by the resolver and JSON paths are bound too.
 */
export { Params } from './params.js'
export { CALL_COLUMNS, DERIVED } from './fields.js'

export type { Dialect } from './dialect.js'
export { DUCKDB } from './duckdb-dialect.js'

export type Resolver<P = Params> = (field: string, params: P) => Compiled

export interface CompileOptions<P = Params> {
  resolve: Resolver<P>
  /** Compare a JSON field with a number as a number (feedback queries); otherwise 400, as Weave. */
  lenientJson?: boolean
}

const MAX_NODES = 2000
const MAX_DEPTH = 64
const CMP: Record<string, string> = { $eq: '=', $gt: '>', $gte: '>=', $lt: '<', $lte: '<=' }

/** The compiler for any dialect; `Compiler` is DuckDB's, `ChCompiler` (clickhouse/query/expr.ts) ClickHouse's. */
export class QueryCompiler<P> {
  private nodes = 0
  constructor(
    private readonly params: P,
    private readonly opts: CompileOptions<P>,
    private readonly dialect: Dialect<P>,
  ) {}

  operation(op: unknown, depth: number): Compiled {
    const [name, arg] = this.operator(op, depth)
    const d = depth + 1
    switch (name) {
      case '$literal':
        return this.literal(arg)
      case '$getField':
        if (typeof arg !== 'string') throw new DomainError(400, '$getField takes a field name string')
        return this.opts.resolve(arg, this.params)
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

  /** `NOT (x)`: a NULL stays NULL (the row is left out), as in ClickHouse. */
  private not(arg: unknown, d: number): Compiled {
    if (!Array.isArray(arg) || arg.length !== 1) throw new DomainError(400, '$not takes a list of exactly one operand')
    return { sql: `(NOT (${this.bool(this.operation(arg[0], d))}))`, type: 'bool' }
  }

  private in(arg: unknown, d: number): Compiled {
    if (!Array.isArray(arg) || arg.length !== 2 || !Array.isArray(arg[1])) throw new DomainError(400, '$in takes [operand, [operand, ...]]')
    const left = this.operation(arg[0], d)
    if ((arg[1] as unknown[]).length === 0) return { sql: 'false', type: 'bool' }
    const items = (arg[1] as unknown[]).map((x) => this.coerce(left, this.operation(x, d)))
    return { sql: this.dialect.in(items), type: 'bool' }
  }

  private contains(arg: unknown, d: number): Compiled {
    const a = arg as { input?: unknown; substr?: unknown; case_insensitive?: unknown }
    if (!a || typeof a !== 'object' || Array.isArray(a) || a.input === undefined || a.substr === undefined)
      throw new DomainError(400, '$contains takes {input, substr, case_insensitive?}')
    const i = this.dialect.text(this.operation(a.input, d).sql)
    const s = this.dialect.text(this.operation(a.substr, d).sql)
    return { sql: this.dialect.contains(i, s, a.case_insensitive === true), type: 'bool' }
  }

  private size(arg: unknown, d: number): Compiled {
    return { sql: this.dialect.size(this.operation(arg, d)), type: 'number' }
  }

  private literal(v: unknown): Compiled {
    if (v === null) return { sql: 'NULL', type: 'null', literal: null }
    if (typeof v === 'string') return { sql: this.dialect.literal(this.params, v), type: 'string', literal: v }
    if (typeof v === 'boolean') return { sql: this.dialect.literal(this.params, v), type: 'bool', literal: v }
    if (typeof v === 'number' && Number.isFinite(v)) return { sql: this.dialect.literal(this.params, v), type: 'number', literal: v }
    throw new DomainError(400, '$literal must be a string, number, boolean or null here')
  }

  /**
   * ClickHouse's `toInt64OrNull`, `toFloat64OrNull`, `toUInt8OrNull`, `toString`: a failed conversion
   * is NULL; an int is an integer's text only ("1.5" is NULL); a bool from text is 'true'/'false' (as
   * JSON booleans read) or a number, non-zero being true.
   */
  private convert(arg: unknown, d: number): Compiled {
    const a = arg as { input?: unknown; to?: unknown }
    if (!a || typeof a !== 'object' || a.input === undefined) throw new DomainError(400, '$convert takes {input, to}')
    const x = this.operation(a.input, d)
    const text = x.type === 'string'
    switch (a.to) {
      case 'double':
        return { sql: this.dialect.toDouble(x.sql, text), type: 'number' }
      case 'int':
        return { sql: this.dialect.toInt(x.sql, text), type: 'number' }
      case 'string':
        return { sql: this.dialect.toText(x.sql), type: 'string' }
      case 'bool':
        return { sql: this.dialect.toBool(x.sql, text), type: 'bool' }
      case 'exists':
        return { sql: `(${x.raw ?? x.sql} IS NOT NULL)`, type: 'bool' }
      default:
        throw new DomainError(400, `$convert "to" must be one of double, int, string, bool, exists`)
    }
  }

  private compare(name: string, arg: unknown, d: number): Compiled {
    if (!Array.isArray(arg) || arg.length !== 2) throw new DomainError(400, `${name} takes a list of exactly two operands`)
    const left = this.operation(arg[0], d)
    const right = this.operation(arg[1], d)
    const isNull = (c: Compiled) => ({ sql: c.nullAs ? `(${c.sql} = ${c.nullAs})` : `(${c.sql} IS NULL)`, type: 'bool' as const })
    if (name === '$eq' && right.type === 'null') return isNull(left)
    if (name === '$eq' && left.type === 'null') return isNull(right)
    const c = this.coerce(left, right)
    return { sql: `(${c.left} ${CMP[name]} ${c.right})`, type: 'bool' }
  }

  /** Both sides of a comparison in a common type, or a 400 where they have none (ClickHouse: NO_COMMON_TYPE). */
  private coerce(left: Compiled, right: Compiled): { left: string; right: string } {
    const one = (a: Compiled, b: Compiled): string | null => {
      // Weave turns a number compared with a timestamp column into that instant (seconds since the epoch).
      if (a.type === 'timestamp' && b.type === 'number') return this.dialect.timestampFromSeconds(b.sql)
      if (a.type === 'timestamp' && b.type === 'string') return this.dialect.timestampFromText(b.sql)
      return null
    }
    const l = one(right, left) ?? left.sql
    const r = one(left, right) ?? right.sql
    const num = (c: Compiled) => c.type === 'number' || c.type === 'bool'
    if (this.opts.lenientJson && left.raw && right.type === 'number') return { left: this.dialect.lenientNumber(left.raw), right: r }
    if (this.opts.lenientJson && right.raw && left.type === 'number') return { left: l, right: this.dialect.lenientNumber(right.raw) }
    if ((left.type === 'string' && num(right)) || (num(left) && right.type === 'string')) {
      throw new DomainError(
        400,
        `Cannot compare a ${left.type} with a ${right.type}: JSON fields are strings; wrap the field in {"$convert": {"input": ..., "to": "double"}}`,
      )
    }
    return { left: l, right: r }
  }

  bool(c: Compiled): string {
    return c.type === 'bool' ? c.sql : this.dialect.toBool(c.sql, false)
  }
}

/** The compiler in DuckDB's dialect (the embedded store, the catalog). */
export class Compiler extends QueryCompiler<Params> {
  constructor(params: Params, opts: CompileOptions) {
    super(params, opts, DUCKDB)
  }
}

/** `{"$expr": op}` → a boolean SQL condition (NULL where SQL's logic says unknown), with the given fields. */
export function compileWith(query: { $expr: unknown }, params: Params, opts: CompileOptions): string {
  const c = new Compiler(params, opts)
  return c.bool(c.operation(query.$expr, 0))
}

/** `{"$expr": op}` over the merged call relation `m`, with any values bound to the query (feedback-fields.ts). */
export function compileQuery(query: { $expr: unknown }, params: Params): string {
  const bound = boundValues(query)
  return compileWith(query, params, { resolve: (f, p) => callField(f, p, bound) })
}

/** A call field (sort keys), with values bound to `owner` (the sort list). */
export function fieldSql(field: string, params: Params, owner?: object | null): Compiled {
  return callField(field, params, boundValues(owner))
}
