import { DomainError } from '../../core/errors.js'
import type { Compiled } from '../../query/compiled.js'
import { chCallField } from './fields.js'
import type { ChParams } from './params.js'

/**
 * Weave's query language (`{"$expr": ...}`) compiled to ClickHouse SQL, with the semantics the
 * embedded store's compiler (query/expr.ts) gives DuckDB — which are ClickHouse's own: JSON fields
 * read as text (`''` when missing), a failed `$convert` is NULL, and NULL follows three-valued logic
 * through NOT, AND and OR (ClickHouse's `and`/`or` are three-valued on Nullable). The caller keeps
 * a row only where the whole condition is true. User values only ever become bound parameters.
 */
export type ChResolver = (field: string, params: ChParams) => Compiled

const MAX_NODES = 2000
const MAX_DEPTH = 64
const CMP: Record<string, string> = { $eq: '=', $gt: '>', $gte: '>=', $lt: '<', $lte: '<=' }

export class ChCompiler {
  private nodes = 0
  constructor(
    private readonly params: ChParams,
    private readonly resolve: ChResolver,
  ) {}

  operation(op: unknown, depth: number): Compiled {
    const [name, arg] = this.operator(op, depth)
    const d = depth + 1
    switch (name) {
      case '$literal':
        return this.literal(arg)
      case '$getField':
        if (typeof arg !== 'string') throw new DomainError(400, '$getField takes a field name string')
        return this.resolve(arg, this.params)
      case '$convert':
        return this.convert(arg, d)
      case '$and':
      case '$or':
        return this.andOr(name, arg, d)
      case '$not':
        if (!Array.isArray(arg) || arg.length !== 1) throw new DomainError(400, '$not takes a list of exactly one operand')
        return { sql: `(NOT (${this.bool(this.operation(arg[0], d))}))`, type: 'bool' }
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

  private operator(op: unknown, depth: number): [string, unknown] {
    if (++this.nodes > MAX_NODES) throw new DomainError(400, `Query has more than ${MAX_NODES} nodes`)
    if (depth > MAX_DEPTH) throw new DomainError(400, `Query is nested deeper than ${MAX_DEPTH} levels`)
    if (op === null || typeof op !== 'object' || Array.isArray(op))
      throw new DomainError(400, 'Each query operand must be an object such as {"$literal": ...}')
    const keys = Object.keys(op)
    if (keys.length !== 1)
      throw new DomainError(400, `Each query operand must have exactly one operator, got ${JSON.stringify(keys.slice(0, 5))}`)
    return [keys[0]!, (op as Record<string, unknown>)[keys[0]!]]
  }

  private andOr(name: '$and' | '$or', arg: unknown, d: number): Compiled {
    if (!Array.isArray(arg)) throw new DomainError(400, `${name} takes a list of operands`)
    if (arg.length === 0) throw new DomainError(400, `Empty ${name === '$and' ? 'AND' : 'OR'} operation`)
    const parts = arg.map((a) => this.bool(this.operation(a, d)))
    if (parts.length === 1) return { sql: parts[0]!, type: 'bool' }
    return { sql: '(' + parts.join(name === '$and' ? ' AND ' : ' OR ') + ')', type: 'bool' }
  }

  /** `x IN (a, b)` as `x = a OR x = b`: ClickHouse's IN wants constants, and the OR keeps SQL's NULL rules. */
  private in(arg: unknown, d: number): Compiled {
    if (!Array.isArray(arg) || arg.length !== 2 || !Array.isArray(arg[1])) throw new DomainError(400, '$in takes [operand, [operand, ...]]')
    const left = this.operation(arg[0], d)
    if ((arg[1] as unknown[]).length === 0) return { sql: 'false', type: 'bool' }
    const items = (arg[1] as unknown[]).map((x) => this.coerce(left, this.operation(x, d)))
    return { sql: `(${items.map((i) => `${i.left} = ${i.right}`).join(' OR ')})`, type: 'bool' }
  }

  private contains(arg: unknown, d: number): Compiled {
    const a = arg as { input?: unknown; substr?: unknown; case_insensitive?: unknown }
    if (!a || typeof a !== 'object' || Array.isArray(a) || a.input === undefined || a.substr === undefined)
      throw new DomainError(400, '$contains takes {input, substr, case_insensitive?}')
    const i = `toString(${this.operation(a.input, d).sql})`
    const s = `toString(${this.operation(a.substr, d).sql})`
    return { sql: `(${a.case_insensitive === true ? 'positionCaseInsensitiveUTF8' : 'position'}(${i}, ${s}) > 0)`, type: 'bool' }
  }

  /** A JSON array's length (0 for any other JSON value or a missing one); other values' text length. */
  private size(arg: unknown, d: number): Compiled {
    const x = this.operation(arg, d)
    if (x.json) return { sql: `if(JSONType(${x.json.column}) = 'Array', JSONLength(${x.json.column}), 0)`, type: 'number' }
    return { sql: `lengthUTF8(toString(${x.sql}))`, type: 'number' }
  }

  private literal(v: unknown): Compiled {
    if (v === null) return { sql: 'NULL', type: 'null', literal: null }
    if (typeof v === 'string') return { sql: this.params.add(v, 'String'), type: 'string', literal: v }
    if (typeof v === 'boolean') return { sql: this.params.add(v, 'Bool'), type: 'bool', literal: v }
    if (typeof v === 'number' && Number.isFinite(v)) return { sql: this.params.add(v, 'Float64'), type: 'number', literal: v }
    throw new DomainError(400, '$literal must be a string, number, boolean or null here')
  }

  private convert(arg: unknown, d: number): Compiled {
    const a = arg as { input?: unknown; to?: unknown }
    if (!a || typeof a !== 'object' || a.input === undefined) throw new DomainError(400, '$convert takes {input, to}')
    const x = this.operation(a.input, d)
    const text = x.type === 'string'
    switch (a.to) {
      case 'double':
        return { sql: text ? `toFloat64OrNull(${x.sql})` : `accurateCastOrNull(${x.sql}, 'Float64')`, type: 'number' }
      case 'int':
        // An integer's text only: "1.5" is NULL, not 1.
        if (text) return { sql: `if(match(${x.sql}, '^[+-]?[0-9]+$'), toInt64OrNull(${x.sql}), NULL)`, type: 'number' }
        return { sql: `accurateCastOrNull(trunc(toFloat64(${x.sql})), 'Int64')`, type: 'number' }
      case 'string':
        return { sql: `toString(${x.sql})`, type: 'string' }
      case 'bool':
        // JSON booleans read as 'true'/'false'; other text as a number (non-zero is true), else NULL.
        if (text) return { sql: `multiIf(${x.sql} = 'true', 1, ${x.sql} = 'false', 0, toUInt8OrNull(${x.sql}) != 0)`, type: 'bool' }
        return { sql: `accurateCastOrNull(${x.sql}, 'Bool')`, type: 'bool' }
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

  /** Both sides in a common type, or a 400 where they have none (as ClickHouse's NO_COMMON_TYPE). */
  private coerce(left: Compiled, right: Compiled): { left: string; right: string } {
    const one = (a: Compiled, b: Compiled): string | null => {
      // A number compared with a timestamp column is that instant in seconds since the epoch (as Weave).
      if (a.type === 'timestamp' && b.type === 'number') return `fromUnixTimestamp64Micro(toInt64(round(${b.sql} * 1000000)), 'UTC')`
      if (a.type === 'timestamp' && b.type === 'string') return `parseDateTime64BestEffortOrNull(${b.sql}, 6, 'UTC')`
      return null
    }
    const l = one(right, left) ?? left.sql
    const r = one(left, right) ?? right.sql
    const num = (c: Compiled) => c.type === 'number' || c.type === 'bool'
    if ((left.type === 'string' && num(right)) || (num(left) && right.type === 'string')) {
      throw new DomainError(
        400,
        `Cannot compare a ${left.type} with a ${right.type}: JSON fields are strings; wrap the field in {"$convert": {"input": ..., "to": "double"}}`,
      )
    }
    return { left: l, right: r }
  }

  bool(c: Compiled): string {
    return c.type === 'bool' ? c.sql : `accurateCastOrNull(${c.sql}, 'Bool')`
  }
}

/** `{"$expr": op}` over the merged call `m` → a ClickHouse condition (NULL where three-valued logic says unknown). */
export function chCompileQuery(query: { $expr: unknown }, params: ChParams, resolve: ChResolver = chCallField): string {
  const c = new ChCompiler(params, resolve)
  return c.bool(c.operation(query.$expr, 0))
}
