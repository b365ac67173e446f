import type { TableQueryReq } from '../schemas/tables.js'
import { table, type Layout } from './layout.js'
import type { ChParams } from './query/params.js'

/** One stored table's row digests (any of its identical rows: a table is content-addressed). */
export function rowListSql(l: Layout, p: ChParams, project: string, digest: string, what: string): string {
  return `SELECT ${what} FROM ${table(l, 'tables')} WHERE project_id = ${p.add(project, 'String')}
    AND digest = ${p.add(digest, 'String')} LIMIT 1`
}

/** Rows by digest, each once (a row inserted twice before a merge is the same row). */
export function rowsByDigestSql(l: Layout, p: ChParams, project: string, digests: string[]): string {
  return `SELECT digest, any(val_dump) AS val_dump FROM ${table(l, 'table_rows')}
    WHERE project_id = ${p.add(project, 'String')} AND digest IN ${p.add(digests, 'Array(String)')} GROUP BY digest`
}

/** Bytes of the distinct rows a table lists. */
export function tableSizeSql(l: Layout, p: ChParams, project: string, digest: string): string {
  return `SELECT sum(length(val_dump)) AS size FROM (SELECT digest, any(val_dump) AS val_dump FROM ${table(l, 'table_rows')}
    WHERE project_id = ${p.add(project, 'String')}
      AND digest IN (SELECT arrayJoin(row_digests) FROM (${rowListSql(l, p, project, digest, 'row_digests')})) GROUP BY digest)`
}

/**
 * A value at a dot path of a row as text, as DuckDB's json_extract_string reads it for the embedded store: a
 * string's contents, JSON null or a missing key as NULL, anything else its JSON text. Each segment is bound.
 */
function valueAt(p: ChParams, field: string): string {
  const keys = field
    .split('.')
    .map((seg) => p.add(seg, 'String'))
    .join(', ')
  return `multiIf(JSONType(r.val_dump, ${keys}) = 'String', JSONExtractString(r.val_dump, ${keys}),
    JSONType(r.val_dump, ${keys}) = 'Null', NULL, JSONExtractRaw(r.val_dump, ${keys}))`
}

/** The calls' mixed-type order (table-order.ts): numbers before strings, missing last, in either direction; ties in table order. */
function orderBy(p: ChParams, sort: TableQueryReq['sort_by']): string {
  const keys: string[] = []
  for (const s of sort ?? []) {
    const x = valueAt(p, s.field)
    const dir = s.direction === 'desc' ? 'DESC' : 'ASC'
    keys.push(`isNull(${x}) ASC`, `isNull(toFloat64OrNull(${x})) ASC`, `toFloat64OrNull(${x}) ${dir}`, `(${x}) ${dir}`)
  }
  return `ORDER BY ${[...keys, 'original_index ASC'].join(', ')}`
}

/**
 * A table's rows with their positions, filtered by row digest and sorted, paged: every entry of the table is
 * joined to its row (the sort and the filter can keep rows from anywhere in it).
 */
export function sortedRowsSql(l: Layout, p: ChParams, project: string, q: Omit<TableQueryReq, 'project_id'>): string {
  const list = rowListSql(l, p, project, q.digest, 'row_digests')
  const filter = q.filter?.row_digests ? `WHERE has(${p.add(q.filter.row_digests, 'Array(String)')}, u.d)` : ''
  let sql = `SELECT u.i - 1 AS original_index, u.d AS digest, r.val_dump AS val_dump
  FROM (SELECT d, i FROM (${list}) ARRAY JOIN row_digests AS d, arrayEnumerate(row_digests) AS i) AS u
  INNER JOIN (SELECT digest, any(val_dump) AS val_dump FROM ${table(l, 'table_rows')}
    WHERE project_id = ${p.add(project, 'String')} AND digest IN (SELECT arrayJoin(row_digests) FROM (${list})) GROUP BY digest) AS r
  ON r.digest = u.d
  ${filter} ${orderBy(p, q.sort_by)}`
  if (q.limit !== undefined && q.limit !== null) sql += ` LIMIT ${p.add(q.limit, 'UInt64')}`
  if (q.offset)
    sql += `${q.limit === undefined || q.limit === null ? ' LIMIT 18446744073709551615' : ''} OFFSET ${p.add(q.offset, 'UInt64')}`
  return sql
}
