import type { Compiled } from '../../query/compiled.js'
import type { ExpandDialect } from '../../query/expand-fields.js'
import { chJsonArgs } from './json.js'
import type { ChParams } from './params.js'

/**
 * Expanded refs (`expand_columns`) in ClickHouse's SQL: query/expand-fields.ts decides what a field
 * reads; this spells it. Each route's refs and values are two bound arrays (`Array(String)`,
 * `Array(Nullable(String))`) the call's ref is looked up in — no ref or value is SQL text.
 */
export const CH_EXPAND: ExpandDialect<ChParams> = {
  refAt: (column, segs, params) => `JSONExtractString(${chJsonArgs(column, segs, params)})`,
  isRef: (ref) => `startsWith(${ref}, 'weave:///')`,
  lookup: (route, ref, params) => {
    const refs = params.add([...route.values.keys()], 'Array(String)')
    const vals = params.add([...route.values.values()], 'Array(Nullable(String))')
    return `if(has(${refs}, ${ref}), arrayElement(${vals}, indexOf(${refs}, ${ref})), CAST(NULL AS Nullable(String)))`
  },
  // JSONExtractRaw gives '' for a missing path: NULL, as DuckDB's json_extract.
  valueAt: (column, segs, params) => `nullIf(JSONExtractRaw(${chJsonArgs(column, segs, params)}), '')`,
  firstOf: (cases, otherwise) => `multiIf(${[...cases.flatMap((c) => [c.when, c.then]), otherwise].join(', ')})`,
  read: (text): Compiled => {
    // A JSON string reads as its characters, JSON null as missing, anything else as its JSON text (query/compiled.ts).
    const raw = `if(coalesce(${text}, 'null') = 'null', NULL, if(startsWith(${text}, '"'), JSONExtractString(${text}), ${text}))`
    return { sql: `coalesce(${raw}, '')`, raw, type: 'string', json: { column: `coalesce(${text}, '')`, path: '' } }
  },
}
