import type { ObjQueryReq } from '../schemas/objects.js'
import { table, type Layout } from './layout.js'
import type { ChParams } from './query/params.js'

/**
 * The live row of each version of a project's objects (of one object when `objectId` is given) with its
 * `version_index` (rank by first creation, deleted versions included) and `latest` (the newest live version by
 * creation time). `FINAL` leaves one row per version: ReplacingMergeTree keeps the newest by `updated_at`.
 */
export function versionsSql(l: Layout, p: ChParams, project: string, objectId: string | null, metadataOnly: boolean): string {
  const where = [`project_id = ${p.add(project, 'String')}`]
  if (objectId !== null) where.push(`object_id = ${p.add(objectId, 'String')}`)
  return `SELECT *, isNull(deleted_us) AND digest = argMaxIf(digest, (created_us, version_index), isNull(deleted_us))
    OVER (PARTITION BY object_id) AS latest
  FROM (
    SELECT project_id, object_id, digest, kind, base_object_class, leaf_object_class,
      ${metadataOnly ? "'{}'" : 'val_dump'} AS val_dump, length(val_dump) AS size_bytes, user_id,
      toUnixTimestamp64Micro(created_at) AS created_us,
      if(isNull(deleted_at), NULL, toUnixTimestamp64Micro(assumeNotNull(deleted_at))) AS deleted_us,
      row_number() OVER (PARTITION BY object_id ORDER BY first_created_at, digest) - 1 AS version_index
    FROM ${table(l, 'object_versions')} FINAL
    WHERE ${where.join(' AND ')}
  )`
}

const SORT_COLUMNS = { created_at: 'created_us', object_id: 'object_id' } as const

/**
 * `/objs/query` as ClickHouse SQL: the filters, order and page of the embedded store (catalog/objects.ts), every
 * user value bound. An empty list filters nothing, as in Weave; NOT IN drops versions with no base class.
 */
export function objQuerySql(l: Layout, p: ChParams, req: ObjQueryReq): string {
  const f = req.filter ?? {}
  const list = (vs: string[]) => p.add(vs, 'Array(String)')
  const where = ['isNull(deleted_us)']
  if (f.object_ids?.length) where.push(`has(${list(f.object_ids)}, object_id)`)
  if (f.is_op === true || f.is_op === false) where.push(`kind ${f.is_op ? '=' : '!='} 'op'`)
  if (f.latest_only === true) where.push('latest')
  if (f.base_object_classes?.length) where.push(`has(${list(f.base_object_classes)}, assumeNotNull(base_object_class))`)
  if (f.base_object_classes?.length || f.exclude_base_object_classes?.length) where.push('isNotNull(base_object_class)')
  if (f.exclude_base_object_classes?.length) where.push(`NOT has(${list(f.exclude_base_object_classes)}, assumeNotNull(base_object_class))`)
  if (f.leaf_object_classes?.length)
    where.push(`isNotNull(leaf_object_class) AND has(${list(f.leaf_object_classes)}, assumeNotNull(leaf_object_class))`)
  const keys = [
    ...(req.sort_by?.length ? req.sort_by : [{ field: 'created_at', direction: 'asc' } as const]).map(
      (s) => `${SORT_COLUMNS[s.field]} ${s.direction === 'desc' ? 'DESC' : 'ASC'}`,
    ),
    'object_id ASC',
    'version_index ASC',
  ]
  const inner = versionsSql(l, p, req.project_id, null, req.metadata_only === true)
  let sql = `SELECT * FROM (${inner})
  WHERE ${where.join(' AND ')} ORDER BY ${keys.join(', ')}`
  if (req.limit !== undefined && req.limit !== null) sql += ` LIMIT ${p.add(req.limit, 'UInt64')}`
  if (req.offset)
    sql += `${req.limit === undefined || req.limit === null ? ' LIMIT 18446744073709551615' : ''} OFFSET ${p.add(req.offset, 'UInt64')}`
  return sql
}
