import type { Compiled, SqlType } from '../../query/compiled.js'
import { boundValues, resolveCallField, type BoundValues, type CallFieldDialect } from '../../query/fields.js'
import { feedbackValuesOf, type FeedbackValues } from '../../query/feedback-fields.js'
import type { ChParams } from './params.js'
import { expandedField } from '../../query/expand-fields.js'
import { CH_EXPAND } from './expand.js'
import { chJsonArgs } from './json.js'

/**
 * Call fields as ClickHouse SQL over the merged call `m` (calls-sql.ts): the same names, types and
 * reading rules as the embedded store's (query/fields.ts), in ClickHouse's functions.
 */

/** Derived at read time from the merged call, as the embedded store derives them. */
export const CH_DERIVED: Record<string, { sql: string; type: SqlType }> = {
  'summary.weave.status': {
    sql: `multiIf(m.exception IS NOT NULL, 'error', m.ended_at IS NULL, 'running',
      coalesce(toInt64OrNull(JSONExtractRaw(coalesce(m.summary, ''), 'status_counts', 'error')), 0) > 0, 'descendant_error', 'success')`,
    type: 'string',
  },
  'summary.weave.latency_ms': { sql: '(toUnixTimestamp64Milli(m.ended_at) - toUnixTimestamp64Milli(m.started_at))', type: 'number' },
  'summary.weave.trace_name': {
    sql: `coalesce(nullIf(m.display_name, ''), nullIf(extract(m.op_name, '/([^/:]*):'), ''), m.op_name)`,
    type: 'string',
  },
}

/**
 * A path into a JSON column: `JSONExtractRaw` with each key bound (an array index as a 1-based
 * Int64, which is how ClickHouse's JSON functions count). A string reads as its characters, a number
 * or boolean as its text, an object or array as its JSON text, and a missing key or JSON null as ''.
 */
export function chJsonField(column: string, segs: string[], params: ChParams): Compiled {
  const args = chJsonArgs(column, segs, params)
  const r = `JSONExtractRaw(${args})`
  const text = `multiIf(${r} IN ('', 'null'), '', startsWith(${r}, '"'), JSONExtractString(${args}), ${r})`
  return { sql: text, raw: `if(${r} IN ('', 'null'), NULL, ${text})`, type: 'string', json: { column: args, path: '' } }
}

/**
 * A feedback field over the merged call `m` from the values the api layer read and bound to the request
 * (query/feedback-fields.ts): a lookup of `m.id` in two bound arrays. Read as the embedded store reads
 * it: payload paths like JSON fields ('' when the call has none), the ref columns as text (NULL when none).
 */
export function chFeedbackField(name: string, values: Map<string, FeedbackValues> | undefined, params: ChParams): Compiled {
  const { field: f, values: vals } = feedbackValuesOf(name, values)
  const ids = params.add([...vals.keys()], 'Array(String)')
  const vs = params.add([...vals.values()], 'Array(Nullable(String))')
  const raw = `if(has(${ids}, m.id), arrayElement(${vs}, indexOf(${ids}, m.id)), CAST(NULL AS Nullable(String)))`
  return f.column === 'payload' ? { sql: `coalesce(${raw}, '')`, raw, type: 'string' } : { sql: raw, type: 'string' }
}

/** Call fields on ClickHouse, with the values bound to the request (feedback, expanded refs). */
export function chCallFields(bound: BoundValues = {}): CallFieldDialect<ChParams> {
  return {
    derived: CH_DERIVED,
    json: chJsonField,
    feedback: (field, params) => chFeedbackField(field, bound.feedback, params),
    expand: (field, params) => expandedField(field, bound.expand, params, CH_EXPAND),
  }
}

/** A call field (`$getField`, sort keys) as ClickHouse SQL over the merged call `m` (query/fields.ts decides which). */
export function chCallField(field: string, params: ChParams, bound: BoundValues = {}): Compiled {
  return resolveCallField(field, params, chCallFields(bound))
}

/** The resolver for one request's query or sort list: the values bound to it (by identity) included. */
export function chFieldsOf(target: object | null | undefined): (field: string, params: ChParams) => Compiled {
  const bound = boundValues(target)
  return (field, params) => chCallField(field, params, bound)
}
