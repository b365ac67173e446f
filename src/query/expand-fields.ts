import { DomainError } from '../core/errors.js'
import { jsonPath, splitPath, type Compiled } from './compiled.js'
import type { Params } from './params.js'

/**
 * `expand_columns` in call queries and sorts. A field such as `inputs.example.label`, with
 * `inputs.example` among the expand columns, reads the value the ref at `inputs.example` points to.
 * Refs live in the catalog, calls in the call store: the api layer reads the distinct refs of the
 * matching calls first, resolves them, and binds, for each such field, each ref's value at the rest
 * of the path here; the call query then looks the call's ref up in those bound lists — no user string
 * is SQL text. Where the call holds no ref there (a plain value), the field reads the call's own JSON,
 * as the expanded call would show it.
 */

export const MAX_EXPAND_COLUMNS = 64
/** Expanded fields one query and sort may name (each becomes bound lists). */
export const MAX_EXPAND_FIELDS = 20
/** Segments one expand column may have: bounds nesting. */
export const MAX_EXPAND_DEPTH = 16

const ROOTS = new Set(['inputs', 'output', 'attributes', 'summary'])

/** Checks and splits `expand_columns`: dotted paths under inputs, output, attributes or summary. */
export function parseExpandColumns(columns: readonly string[] | null | undefined): string[][] {
  if (!columns || columns.length === 0) return []
  if (columns.length > MAX_EXPAND_COLUMNS) throw new DomainError(400, `expand_columns has more than ${MAX_EXPAND_COLUMNS} paths`)
  const out: string[][] = []
  for (const c of columns) {
    const segs = typeof c === 'string' && c.length > 0 && c.length <= 512 ? splitPath(c) : []
    if (!ROOTS.has(segs[0] ?? '') || segs.some((s) => s.length === 0) || segs.length > MAX_EXPAND_DEPTH)
      throw new DomainError(
        400,
        `Invalid expand column ${JSON.stringify(String(c).slice(0, 100))}: a dotted path of at most ${MAX_EXPAND_DEPTH} non-empty keys under inputs, output, attributes or summary`,
      )
    out.push(segs)
  }
  return out
}

/** A field read through expanded refs: its path and the expand columns that are proper prefixes of it, shortest first. */
export interface ExpandedField {
  name: string
  segs: string[]
  prefixes: string[][]
}

const isPrefix = (p: string[], segs: string[]) => p.length < segs.length && p.every((s, i) => s === segs[i])

/** Every query (`$getField`) and sort field that an expand column is a prefix of, distinct, bounded. */
export function expandedFieldsOf(
  query: unknown,
  sort: readonly { field: string }[] | null | undefined,
  columns: string[][],
): ExpandedField[] {
  if (columns.length === 0) return []
  const names = new Set<string>()
  const walk = (x: unknown, depth: number): void => {
    if (depth > 200 || x === null || typeof x !== 'object') return
    if (Array.isArray(x)) return x.forEach((y) => walk(y, depth + 1))
    for (const [k, v] of Object.entries(x)) {
      if (k === '$getField' && typeof v === 'string') names.add(v)
      else if (k !== '$literal') walk(v, depth + 1)
    }
  }
  walk(query, 0)
  for (const s of sort ?? []) if (typeof s.field === 'string') names.add(s.field)
  const out: ExpandedField[] = []
  for (const name of names) {
    const segs = splitPath(name)
    const prefixes = columns.filter((p) => isPrefix(p, segs)).sort((a, b) => a.length - b.length)
    if (prefixes.length) out.push({ name, segs, prefixes })
  }
  if (out.length > MAX_EXPAND_FIELDS)
    throw new DomainError(400, `A query may name at most ${MAX_EXPAND_FIELDS} fields under expand_columns`)
  return out
}

/** For one prefix of a field: each ref found there → the JSON text of its value at the rest of the path (null: none). */
export interface ExpandRoute {
  prefix: string[]
  values: Map<string, string | null>
}

/** Per expanded field name, its routes (one per prefix, shortest first). */
export type ExpandBinding = Map<string, ExpandRoute[]>

const bound = new WeakMap<object, ExpandBinding>()

/** Binds resolved values to the objects the call query compiles (the query and the sort list), by identity. */
export function bindExpand(targets: (object | null | undefined)[], values: ExpandBinding): void {
  for (const t of targets) if (t) bound.set(t, values)
}

export function boundExpand(target: object | null | undefined): ExpandBinding | undefined {
  return target ? bound.get(target) : undefined
}

const ROOT_COLUMN: Record<string, string> = { inputs: 'm.inputs', output: 'm.output', attributes: 'm.attributes', summary: 'm.summary' }

/**
 * How one engine spells an expanded field (expandedField decides what it reads): `P` is the engine's
 * bound-parameter list. DuckDB's is below, ClickHouse's clickhouse/query/expand.ts.
 */
export interface ExpandDialect<P> {
  /** The text at a path of a root column (`m.inputs`): a string's characters; what is not a string never starts like a ref. */
  refAt(column: string, segs: string[], params: P): string
  /** Whether that text is a ref (`weave:///…`). */
  isRef(ref: string): string
  /** The route's bound value for the call's ref: JSON text, NULL when the ref has none. */
  lookup(route: ExpandRoute, ref: string, params: P): string
  /** The JSON text of the call's own value at a path of a root column, NULL when missing. */
  valueAt(column: string, segs: string[], params: P): string
  /** The first `then` whose `when` holds, else `otherwise`. */
  firstOf(cases: { when: string; then: string }[], otherwise: string): string
  /** JSON text read the way a JSON field is (`''` when missing or JSON null). */
  read(text: string): Compiled
}

/**
 * An expanded field over the merged call `m`, or null when none is bound (the field reads as plain
 * JSON). The first prefix holding a ref decides; with none, the call's own JSON at the whole path.
 * The value is JSON text read the way a JSON field is (`''` when missing), so comparisons, `$convert`
 * and the mixed-type sort treat it exactly as they treat the call's own fields.
 */
export function expandedField<P>(field: string, binding: ExpandBinding | undefined, params: P, d: ExpandDialect<P>): Compiled | null {
  const routes = binding?.get(field)
  if (!routes) return null
  const segs = splitPath(field)
  const column = ROOT_COLUMN[segs[0]!]!
  const cases = routes.map((r) => {
    const ref = d.refAt(column, r.prefix.slice(1), params)
    return { when: d.isRef(ref), then: d.lookup(r, ref, params) }
  })
  return d.read(d.firstOf(cases, d.valueAt(column, segs.slice(1), params)))
}

/** Expanded fields in DuckDB's SQL: the bound lists travel as JSON text (see lookup). */
const DUCKDB_EXPAND: ExpandDialect<Params> = {
  refAt: (column, segs, params) => `json_extract_string(${column}, ${params.add(jsonPath(segs))})`,
  isRef: (ref) => `starts_with(${ref}, 'weave:///')`,
  lookup: (route, ref, params) => {
    // JSON-encoded lists: a list parameter of only NULLs would have no element type to bind.
    const refs = params.add(JSON.stringify([...route.values.keys()]))
    const vals = params.add(JSON.stringify([...route.values.values()]))
    const list = (p: string) => `unnest(from_json(${p}::JSON, '["VARCHAR"]'))`
    return `(SELECT x.v FROM (SELECT ${list(refs)} AS r, ${list(vals)} AS v) x WHERE x.r = ${ref})`
  },
  valueAt: (column, segs, params) => `CAST(json_extract(${column}, ${params.add(jsonPath(segs))}) AS VARCHAR)`,
  firstOf: (cases, otherwise) => `(CASE ${cases.map((c) => `WHEN ${c.when} THEN ${c.then}`).join(' ')} ELSE ${otherwise} END)`,
  read: (text) => {
    const raw = `json_extract_string(${text}, '$')`
    return { sql: `coalesce(${raw}, '')`, raw, type: 'string', json: { column: text, path: `'$'` } }
  },
}

/** An expanded field in DuckDB's SQL (expandedField). */
export function expandFieldSql(field: string, binding: ExpandBinding | undefined, params: Params): Compiled | null {
  return expandedField(field, binding, params, DUCKDB_EXPAND)
}
