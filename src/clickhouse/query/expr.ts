import type { Compiled } from '../../query/compiled.js'
import { QueryCompiler } from '../../query/expr.js'
import { CLICKHOUSE } from './dialect.js'
import { chCallField } from './fields.js'
import type { ChParams } from './params.js'

/**
 * Weave's query language (`{"$expr": ...}`) compiled to ClickHouse SQL: the one compiler
 * (query/expr.ts, whose semantics are ClickHouse's own: JSON fields read as text, a failed
 * `$convert` is NULL, three-valued NOT/AND/OR) in ClickHouse's dialect (dialect.ts). The caller
 * keeps a row only where the whole condition is true. User values only ever become bound parameters.
 */
export type ChResolver = (field: string, params: ChParams) => Compiled

export interface ChCompileOptions {
  /** Compare a JSON field with a number as a number (feedback queries); otherwise 400, as Weave. */
  lenientJson?: boolean
}

export class ChCompiler extends QueryCompiler<ChParams> {
  constructor(params: ChParams, resolve: ChResolver, opts: ChCompileOptions = {}) {
    super(params, { resolve, lenientJson: opts.lenientJson }, CLICKHOUSE)
  }
}

/** `{"$expr": op}` over the merged call `m` → a ClickHouse condition (NULL where three-valued logic says unknown). */
export function chCompileQuery(query: { $expr: unknown }, params: ChParams, resolve: ChResolver = chCallField): string {
  const c = new ChCompiler(params, resolve)
  return c.bool(c.operation(query.$expr, 0))
}
