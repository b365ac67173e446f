import { DomainError } from '../core/errors.js'
import { splitPath, type Compiled } from './compiled.js'
import type { Params } from './params.js'

/**
 * Feedback fields in call queries and sorts: `feedback.[<feedback_type>].payload.<path>`,
 * `feedback.[<type>].runnable_ref`, `feedback.[<type>].trigger_ref` (`*` for any type). Feedback lives
 * in the catalog, calls in the call store: the api layer reads each call's value of every such field
 * from the catalog first (one bounded query) and binds them to the request's query and sort here;
 * the call query then reads them as bound lists joined on the call id — no user string is SQL text.
 */
export interface FeedbackField {
  /** The field name as the query spells it. */
  name: string
  /** A feedback type, or `*` for any. */
  type: string
  column: 'payload' | 'runnable_ref' | 'trigger_ref'
  /** Path into the payload (empty for the ref columns and for the whole payload). */
  path: string[]
}

/** Each call's value of one feedback field (calls without one are absent). */
export type FeedbackValues = Map<string, string | null>

export const MAX_FEEDBACK_FIELDS = 20

/** Parses `feedback.[type].payload.a.b`; null when the name is not a feedback field. */
export function parseFeedbackField(name: string): FeedbackField | null {
  if (!name.startsWith('feedback.')) return null
  const m = /^feedback\.\[(.+)\]\.(.+)$/s.exec(name)
  if (!m) throw new DomainError(403, `Invalid field: ${JSON.stringify(name)}: feedback fields are feedback.[<type>].payload.<path>`)
  const [head, ...path] = splitPath(m[2]!)
  if (head === 'payload' && path.every((s) => s.length > 0)) return { name, type: m[1]!, column: 'payload', path }
  if ((head === 'runnable_ref' || head === 'trigger_ref') && path.length === 0) return { name, type: m[1]!, column: head, path }
  throw new DomainError(403, `Invalid field: ${JSON.stringify(name)}: feedback fields are feedback.[<type>].payload.<path>`)
}

/** Every feedback field a query (`$getField` anywhere in it) and a sort name, distinct, bounded. */
export function feedbackFieldsOf(query: unknown, sort: readonly { field: string }[] | null | undefined): FeedbackField[] {
  const names = new Set<string>()
  const walk = (x: unknown, depth: number): void => {
    if (depth > 200 || x === null || typeof x !== 'object') return
    if (Array.isArray(x)) return x.forEach((y) => walk(y, depth + 1))
    for (const [k, v] of Object.entries(x)) {
      if (k === '$getField' && typeof v === 'string' && v.startsWith('feedback.')) names.add(v)
      else if (k !== '$literal') walk(v, depth + 1)
    }
  }
  walk(query, 0)
  for (const s of sort ?? []) if (typeof s.field === 'string' && s.field.startsWith('feedback.')) names.add(s.field)
  if (names.size > MAX_FEEDBACK_FIELDS) throw new DomainError(400, `A query may name at most ${MAX_FEEDBACK_FIELDS} feedback fields`)
  return [...names].map((n) => parseFeedbackField(n)!)
}

/** Values bound to a request's query object or sort list (by identity: they pass through the store untouched). */
const bound = new WeakMap<object, Map<string, FeedbackValues>>()

/** Binds resolved feedback values to the objects the call query compiles (the query and the sort list). */
export function bindFeedback(targets: (object | null | undefined)[], values: Map<string, FeedbackValues>): void {
  for (const t of targets) if (t) bound.set(t, values)
}

/** The values bound to a query or sort list, if any. */
export function boundFeedback(target: object | null | undefined): Map<string, FeedbackValues> | undefined {
  return target ? bound.get(target) : undefined
}

/**
 * The parsed field and each call's value bound to the request for it (both dialects): a field the
 * request had no values read for is one named outside the call queries that read them.
 */
export function feedbackValuesOf(
  name: string,
  values: Map<string, FeedbackValues> | undefined,
): { field: FeedbackField; values: FeedbackValues } {
  const field = parseFeedbackField(name)!
  const vals = values?.get(name)
  if (!vals)
    throw new DomainError(
      400,
      `Feedback fields such as ${JSON.stringify(name)} can be used in /calls/query, /calls/stream_query and /calls/query_stats only`,
    )
  return { field, values: vals }
}

/**
 * A feedback field over the merged call `m`, from its bound values: a lookup of `m.id` in two bound
 * lists (call ids, values), which DuckDB runs as a join. Payload paths read like JSON fields (`''` when
 * the call has none); the ref columns are plain text (NULL when none).
 */
export function feedbackFieldSql(name: string, values: Map<string, FeedbackValues> | undefined, params: Params): Compiled {
  const { field: f, values: vals } = feedbackValuesOf(name, values)
  if (vals.size === 0) {
    const raw = 'CAST(NULL AS VARCHAR)'
    return f.column === 'payload' ? { sql: `''`, raw, type: 'string' } : { sql: raw, type: 'string' }
  }
  // JSON-encoded lists: a list parameter of only NULLs would have no element type to bind.
  const ids = params.add(JSON.stringify([...vals.keys()]))
  const vs = params.add(JSON.stringify([...vals.values()]))
  const list = (p: string) => `unnest(from_json(${p}::JSON, '["VARCHAR"]'))`
  const raw = `(SELECT fb.v FROM (SELECT ${list(ids)} AS id, ${list(vs)} AS v) fb WHERE fb.id = m.id)`
  return f.column === 'payload' ? { sql: `coalesce(${raw}, '')`, raw, type: 'string' } : { sql: raw, type: 'string' }
}
