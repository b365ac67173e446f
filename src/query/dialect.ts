import type { Compiled } from './compiled.js'

/**
 * What the query language's compiler (expr.ts) needs to know about one SQL engine: how a value is
 * bound and typed, and the engine's spelling of casts, text search and JSON lengths. The semantics —
 * operators, three-valued logic, what a failed `$convert` gives, the bounds and the error messages —
 * live once, in the compiler; a dialect only spells them. DuckDB's is duckdb-dialect.ts, ClickHouse's
 * clickhouse/query/dialect.ts. `P` is the engine's bound-parameter list.
 */
export interface Dialect<P> {
  /** A `$literal` as a bound parameter of its own type (never SQL text). */
  literal(params: P, value: string | boolean | number): string
  /** Any value as text (`$contains`, `$size` of a non-JSON value). */
  text(sql: string): string
  /** Whether `substr` occurs in `input` (both text), optionally ignoring case. */
  contains(input: string, substr: string, caseInsensitive: boolean): string
  /** `$size`: a JSON field's array length (the field's `json` handle is the dialect's own), else text length. */
  size(x: Compiled): string
  /** `left IN (right, …)`, NULL rules as SQL's; each item is the pair coerced to a common type. */
  in(items: { left: string; right: string }[]): string
  /** `$convert` to double, int, string or bool; `text` when the input is text. A failed conversion is NULL. */
  toDouble(sql: string, text: boolean): string
  toInt(sql: string, text: boolean): string
  toText(sql: string): string
  toBool(sql: string, text: boolean): string
  /** A number of seconds since the epoch, and a timestamp's text, as the engine's timestamp. */
  timestampFromSeconds(sql: string): string
  timestampFromText(sql: string): string
  /** A JSON field's raw value as a number, NULL when it is not one (lenient comparisons). */
  lenientNumber(raw: string): string
}
