import type { Dialect } from '../../query/dialect.js'
import type { ChParams } from './params.js'

/**
 * The query language in ClickHouse's SQL: `{pN:Type}` parameters, `…OrNull` conversions. The
 * semantics are query/expr.ts's; this only spells them.
 */
export const CLICKHOUSE: Dialect<ChParams> = {
  literal: (params, v) => params.add(v, typeof v === 'string' ? 'String' : typeof v === 'boolean' ? 'Bool' : 'Float64'),
  text: (x) => `toString(${x})`,
  contains: (i, s, ci) => `(${ci ? 'positionCaseInsensitiveUTF8' : 'position'}(${i}, ${s}) > 0)`,
  // A JSON array's length (0 for any other JSON value or a missing one); other values' text length.
  size: (x) => (x.json ? `if(JSONType(${x.json.column}) = 'Array', JSONLength(${x.json.column}), 0)` : `lengthUTF8(toString(${x.sql}))`),
  // `x = a OR x = b` rather than IN: ClickHouse's IN wants constants, and the OR keeps SQL's NULL rules.
  in: (items) => `(${items.map((i) => `${i.left} = ${i.right}`).join(' OR ')})`,
  toDouble: (x, text) => (text ? `toFloat64OrNull(${x})` : `accurateCastOrNull(${x}, 'Float64')`),
  toInt: (x, text) =>
    text ? `if(match(${x}, '^[+-]?[0-9]+$'), toInt64OrNull(${x}), NULL)` : `accurateCastOrNull(trunc(toFloat64(${x})), 'Int64')`,
  toText: (x) => `toString(${x})`,
  toBool: (x, text) =>
    text ? `multiIf(${x} = 'true', 1, ${x} = 'false', 0, toUInt8OrNull(${x}) != 0)` : `accurateCastOrNull(${x}, 'Bool')`,
  timestampFromSeconds: (x) => `fromUnixTimestamp64Micro(toInt64(round(${x} * 1000000)), 'UTC')`,
  timestampFromText: (x) => `parseDateTime64BestEffortOrNull(${x}, 6, 'UTC')`,
  lenientNumber: (raw) => `toFloat64OrNull(${raw})`,
}
