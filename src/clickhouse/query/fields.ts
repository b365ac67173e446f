import { DomainError } from '../../core/errors.js'
import type { Compiled, SqlType } from '../../query/compiled.js'
import { resolveCallField, type CallFieldDialect } from '../../query/fields.js'
import type { ChParams } from './params.js'

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
  const keys = segs.map((s) => (/^(0|[1-9]\d{0,8})$/.test(s) ? params.add(Number(s) + 1, 'Int64') : params.add(s, 'String')))
  const args = [`coalesce(${column}, '')`, ...keys].join(', ')
  const r = `JSONExtractRaw(${args})`
  const text = `multiIf(${r} IN ('', 'null'), '', startsWith(${r}, '"'), JSONExtractString(${args}), ${r})`
  return { sql: text, raw: `if(${r} IN ('', 'null'), NULL, ${text})`, type: 'string', json: { column: args, path: '' } }
}

/** Call fields on ClickHouse: no values bound to the request yet (feedback and expanded refs). */
export const CH_CALL_FIELDS: CallFieldDialect<ChParams> = {
  derived: CH_DERIVED,
  json: chJsonField,
  feedback: (field) => {
    throw new DomainError(400, `Feedback fields are not supported on the ClickHouse backend yet: ${JSON.stringify(field)}`)
  },
  expand: () => null,
}

/** A call field (`$getField`, sort keys) as ClickHouse SQL over the merged call `m` (query/fields.ts decides which). */
export function chCallField(field: string, params: ChParams): Compiled {
  return resolveCallField(field, params, CH_CALL_FIELDS)
}
