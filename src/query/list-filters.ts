/**
 * SQL conditions for the list filters calls and statistics share (op names with `:*` versions, id lists):
 * bounded, every value bound as a parameter. Kept below both, so statistics use them on their own tables
 * without reaching into the calls store's SQL.
 */
import { listValue } from '@duckdb/node-api'
import { DomainError } from '../core/errors.js'
import type { Params } from './params.js'

const MAX_FILTER_LIST = 1000

/** Filter lists are bounded (each becomes a bound list parameter): past the bound, 400. */
export function checkFilterList(name: string, values: readonly unknown[]): void {
  if (values.length > MAX_FILTER_LIST) throw new DomainError(400, `filter.${name} has more than ${MAX_FILTER_LIST} entries`)
}

/** `filter.op_names` split: exact names, and the prefixes of `weave:///e/p/op/name:*` (every version). */
export interface OpNames {
  exact: string[]
  prefixes: string[]
}

export function splitOpNames(names: string[]): OpNames {
  checkFilterList('op_names', names)
  return { exact: names.filter((n) => !n.endsWith(':*')), prefixes: names.filter((n) => n.endsWith(':*')).map((n) => n.slice(0, -1)) }
}

/** `filter.op_names` as a condition on a column `op_name`; `weave:///e/p/op/name:*` matches every version. */
export function opNamesSql(names: string[], params: Params): string {
  return opNamesCond(splitOpNames(names), params)
}

export function opNamesCond({ exact, prefixes }: OpNames, params: Params): string {
  // An empty list literal has no element type for DuckDB to bind: leave the term out instead.
  const ors = exact.length ? [`list_contains(${params.add(listValue(exact))}, op_name)`] : []
  for (const n of prefixes) ors.push(`starts_with(op_name, ${params.add(n)})`)
  return ors.length ? `(${ors.join(' OR ')})` : 'false'
}

/**
 * ` AND column BETWEEN min AND max` of a list filter: segments are sorted by id (and UUIDv7 ids and
 * trace ids follow time), so DuckDB's row-group statistics skip what lies outside — a list match
 * alone cannot use them. Only for ASCII values, where JavaScript's order is DuckDB's byte order.
 */
export function rangeOf(values: string[], column: string, params: Params): string {
  if (values.length === 0 || values.some((v) => !/^[\x20-\x7e]*$/.test(v))) return ''
  let lo = values[0]!
  let hi = values[0]!
  for (const v of values) {
    if (v < lo) lo = v
    if (v > hi) hi = v
  }
  return ` AND ${column} >= ${params.add(lo)} AND ${column} <= ${params.add(hi)}`
}
