import type { Dialect } from './dialect.js'
import type { Params } from './params.js'

/** The query language in DuckDB's SQL (the embedded store and the catalog): `$N` parameters, TRY_CAST. */
export const DUCKDB: Dialect<Params> = {
  literal(params, v) {
    const type = typeof v === 'string' ? 'VARCHAR' : typeof v === 'boolean' ? 'BOOLEAN' : 'DOUBLE'
    return `CAST(${params.add(v)} AS ${type})`
  },
  text: (x) => `CAST(${x} AS VARCHAR)`,
  contains: (i, s, ci) => (ci ? `contains(lower(${i}), lower(${s}))` : `contains(${i}, ${s})`),
  size: (x) =>
    x.json ? `coalesce(json_array_length(${x.json.column}, ${x.json.path}), length(${x.sql}))` : `length(CAST(${x.sql} AS VARCHAR))`,
  in: (items) => `(${items[0]!.left} IN (${items.map((i) => i.right).join(', ')}))`,
  toDouble: (x) => `TRY_CAST(${x} AS DOUBLE)`,
  // An integer's text only: "1.5" is NULL, not 2 (DuckDB's cast would round it).
  toInt: (x, text) =>
    text
      ? `(CASE WHEN regexp_full_match(${x}, '[+-]?[0-9]+') THEN TRY_CAST(${x} AS BIGINT) END)`
      : `TRY_CAST(trunc(TRY_CAST(${x} AS DOUBLE)) AS BIGINT)`,
  toText: (x) => `CAST(${x} AS VARCHAR)`,
  toBool: (x, text) =>
    text
      ? `(CASE ${x} WHEN 'true' THEN true WHEN 'false' THEN false ELSE TRY_CAST(TRY_CAST(${x} AS UTINYINT) AS BOOLEAN) END)`
      : `TRY_CAST(${x} AS BOOLEAN)`,
  timestampFromSeconds: (x) => `make_timestamp(CAST(${x} * 1000000 AS BIGINT))`,
  timestampFromText: (x) => `TRY_CAST(${x} AS TIMESTAMP)`,
  lenientNumber: (raw) => `TRY_CAST(${raw} AS DOUBLE)`,
}
