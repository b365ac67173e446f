import { Type, type Static } from '@sinclair/typebox'
import { Nullable, ProjectIdSchema, StringEnum } from './common.js'

/** Rows are checked to be JSON objects by the store (400 with a reason, as docs/tables.md says), not here (422). */
const Rows = Type.Array(Type.Unknown({ description: 'A JSON object' }), { description: 'Rows, in order' })
const Digest = Type.String({ minLength: 1, maxLength: 128 })
const expectedDigest = Type.Optional(Nullable(Type.String(), { description: 'Client-computed table digest; a different one is 409' }))

/** POST /table/create */
export const TableCreateReqSchema = Type.Object({
  table: Type.Object({ project_id: ProjectIdSchema, rows: Rows, expected_digest: expectedDigest }),
})
export type TableCreateReq = Static<typeof TableCreateReqSchema>

export const TableCreateResSchema = Type.Object({
  digest: Type.String({ description: 'Hex SHA-256 of the row digests, in order' }),
  row_digests: Type.Array(Type.String(), { description: 'The digest of each row, in order' }),
})
export type TableCreateRes = Static<typeof TableCreateResSchema>

const index = Type.Integer({ description: '0-based position' })
export const TableUpdateSpecSchema = Type.Union([
  Type.Object({ append: Type.Object({ row: Type.Unknown() }) }, { additionalProperties: false }),
  Type.Object({ pop: Type.Object({ index }) }, { additionalProperties: false }),
  Type.Object({ insert: Type.Object({ index, row: Type.Unknown() }) }, { additionalProperties: false }),
])
export type TableUpdateSpec = Static<typeof TableUpdateSpecSchema>

/** POST /table/update */
export const TableUpdateReqSchema = Type.Object({
  project_id: ProjectIdSchema,
  base_digest: Digest,
  updates: Type.Array(TableUpdateSpecSchema, { description: 'Applied in order to the base table' }),
})
export type TableUpdateReq = Static<typeof TableUpdateReqSchema>

export const TableUpdateResSchema = Type.Object({
  digest: Type.String(),
  updated_row_digests: Type.Array(Type.String(), { description: 'The row appended, popped or inserted by each update' }),
})
export type TableUpdateRes = Static<typeof TableUpdateResSchema>

/** POST /table/create_from_digests */
export const TableCreateFromDigestsReqSchema = Type.Object({
  project_id: ProjectIdSchema,
  row_digests: Type.Array(Digest, { description: 'Digests of rows already stored in the project' }),
  expected_digest: expectedDigest,
})
export type TableCreateFromDigestsReq = Static<typeof TableCreateFromDigestsReqSchema>

export const TableCreateFromDigestsResSchema = Type.Object({ digest: Type.String() })

/** Dot paths into a row: segments of letters, digits, `_` and `-`. */
export const TableSortBySchema = Type.Object(
  {
    field: Type.String({ pattern: '^[A-Za-z0-9_-]+(\\.[A-Za-z0-9_-]+)*$', maxLength: 512, description: 'Dot path into the row' }),
    direction: StringEnum(['asc', 'desc'] as const),
  },
  { additionalProperties: false },
)

/** POST /table/query and /table/query_stream */
export const TableQueryReqSchema = Type.Object(
  {
    project_id: ProjectIdSchema,
    digest: Digest,
    filter: Type.Optional(Nullable(Type.Object({ row_digests: Type.Optional(Nullable(Type.Array(Digest))) }))),
    limit: Type.Optional(
      Nullable(Type.Integer({ minimum: 0, maximum: Number.MAX_SAFE_INTEGER }), { description: 'Maximum number of rows' }),
    ),
    offset: Type.Optional(Nullable(Type.Integer({ minimum: 0, maximum: Number.MAX_SAFE_INTEGER }), { description: 'Rows to skip' })),
    sort_by: Type.Optional(Nullable(Type.Array(TableSortBySchema), { description: 'Default: table order' })),
  },
  { additionalProperties: false },
)
export type TableQueryReq = Static<typeof TableQueryReqSchema>

export const TableRowSchema = Type.Object({
  digest: Type.String(),
  val: Type.Unknown(),
  original_index: Type.Integer({ minimum: 0, description: '0-based position in the table' }),
})
export type TableRow = Static<typeof TableRowSchema>

export const TableQueryResSchema = Type.Object({ rows: Type.Array(TableRowSchema) })

const includeSize = Type.Optional(Nullable(Type.Boolean(), { default: false, description: 'Also answer storage_size_bytes' }))

/** POST /table/query_stats */
export const TableQueryStatsReqSchema = Type.Object({ project_id: ProjectIdSchema, digest: Digest, include_storage_size: includeSize })
export type TableQueryStatsReq = Static<typeof TableQueryStatsReqSchema>

/** POST /table/query_stats_batch */
export const TableQueryStatsBatchReqSchema = Type.Object({
  project_id: ProjectIdSchema,
  digests: Type.Optional(Nullable(Type.Array(Digest))),
  include_storage_size: includeSize,
})
export type TableQueryStatsBatchReq = Static<typeof TableQueryStatsBatchReqSchema>

export const TableStatsRowSchema = Type.Object({
  digest: Type.String(),
  count: Type.Integer({ minimum: 0 }),
  storage_size_bytes: Type.Optional(Nullable(Type.Integer({ description: 'Bytes of the distinct rows it lists' }))),
})
export type TableStatsRow = Static<typeof TableStatsRowSchema>

export const TableQueryStatsResSchema = Type.Omit(TableStatsRowSchema, ['digest'])
export const TableQueryStatsBatchResSchema = Type.Object({ tables: Type.Array(TableStatsRowSchema) })
