import { Type, type Static } from '@sinclair/typebox'
import { Nullable, ProjectIdSchema, StringEnum, timestamp } from './common.js'

/** One version of an object, as `/objs/query` returns it. */
export const ObjectVersionSchema = Type.Object({
  project_id: Type.String({ description: 'Project the object belongs to' }),
  object_id: Type.String({ description: 'Name of the object' }),
  created_at: timestamp(),
  digest: Type.String({ description: 'Identifies one version of the object' }),
  version_index: Type.Integer({ minimum: 0, description: '0-based rank of this version by creation time' }),
  is_latest: Type.Integer({ minimum: 0, maximum: 1, description: '1 for the latest non-deleted version' }),
  kind: Type.String({ description: '`op` or `object`' }),
  base_object_class: Nullable(Type.String()),
  leaf_object_class: Type.Optional(Nullable(Type.String())),
  val: Type.Unknown({ description: 'Object content; empty when the query sets metadata_only' }),
  deleted_at: Type.Optional(Nullable(timestamp())),
  svc_user_id: Type.Optional(Nullable(Type.String())),
  size_bytes: Type.Optional(Nullable(Type.Integer({ description: 'With include_storage_size' }))),
})
export type ObjectVersion = Static<typeof ObjectVersionSchema>

const names = (description: string) => Type.Optional(Nullable(Type.Array(Type.String()), { description }))

/**
 * Upstream `ObjectVersionFilter`. Nested, so unknown members are ignored rather than refused: newer
 * SDKs also send `tags` and `aliases` (as null), which this server does not keep.
 */
export const ObjectVersionFilterSchema = Type.Object({
  latest_only: Type.Optional(Nullable(Type.Boolean(), { description: 'Only the latest version of each object' })),
  object_ids: names('Object ids'),
  base_object_classes: names('Base classes, e.g. `Model`, `Dataset`'),
  exclude_base_object_classes: names('Base classes to leave out'),
  leaf_object_classes: names('Leaf classes'),
  is_op: Type.Optional(Nullable(Type.Boolean(), { description: 'true: ops only; false: non-ops only; null: both' })),
})
export type ObjectVersionFilter = Static<typeof ObjectVersionFilterSchema>

export const ObjSortBySchema = Type.Object(
  {
    field: StringEnum(['object_id', 'created_at'] as const),
    direction: StringEnum(['asc', 'desc'] as const),
  },
  { additionalProperties: false },
)
export type ObjSortBy = Static<typeof ObjSortBySchema>

/** POST /objs/query */
export const ObjQueryReqSchema = Type.Object(
  {
    project_id: ProjectIdSchema,
    filter: Type.Optional(Nullable(ObjectVersionFilterSchema)),
    limit: Type.Optional(
      Nullable(Type.Integer({ minimum: 0, maximum: Number.MAX_SAFE_INTEGER }), { description: 'Maximum number of results' }),
    ),
    offset: Type.Optional(
      Nullable(Type.Integer({ minimum: 0, maximum: Number.MAX_SAFE_INTEGER }), { description: 'Number of results to skip' }),
    ),
    sort_by: Type.Optional(Nullable(Type.Array(ObjSortBySchema), { description: 'Sort keys in order; default created_at ascending' })),
    metadata_only: Type.Optional(
      Nullable(Type.Boolean(), { default: false, description: 'When true, val is not read and is empty; all other fields are returned' }),
    ),
    include_storage_size: Type.Optional(Nullable(Type.Boolean(), { default: false, description: 'When true, size_bytes is returned' })),
    // Newer Python SDKs always send it (model_dump includes defaults); refusing it would break them.
    include_tags_and_aliases: Type.Optional(
      Nullable(Type.Boolean(), { default: false, description: 'Accepted for compatibility; this server keeps no tags or aliases' }),
    ),
  },
  { additionalProperties: false, description: 'Query object versions' },
)
export type ObjQueryReq = Static<typeof ObjQueryReqSchema>

export const ObjQueryResSchema = Type.Object({ objs: Type.Array(ObjectVersionSchema) })
export type ObjQueryRes = Static<typeof ObjQueryResSchema>

/** POST /obj/create (docs/objects.md) */
export const ObjCreateReqSchema = Type.Object(
  {
    obj: Type.Object({
      project_id: ProjectIdSchema,
      object_id: Type.String({ minLength: 1, maxLength: 1024 }),
      val: Type.Unknown(),
      builtin_object_class: Type.Optional(Nullable(Type.String())),
      set_base_object_class: Type.Optional(Nullable(Type.String())),
      expected_digest: Type.Optional(Nullable(Type.String())),
      svc_user_id: Type.Optional(Nullable(Type.String())),
      wb_user_id: Type.Optional(Nullable(Type.String())),
    }),
  },
  { additionalProperties: false },
)
export type ObjCreateReq = Static<typeof ObjCreateReqSchema>

export const ObjCreateResSchema = Type.Object({ digest: Type.String(), object_id: Type.String() })
export type ObjCreateRes = Static<typeof ObjCreateResSchema>

/** POST /obj/read */
export const ObjReadReqSchema = Type.Object(
  {
    project_id: ProjectIdSchema,
    object_id: Type.String({ minLength: 1, maxLength: 1024 }),
    digest: Type.String({ minLength: 1, maxLength: 128, description: 'A content digest, "latest" or "v<N>"' }),
    metadata_only: Type.Optional(Nullable(Type.Boolean())),
    include_tags_and_aliases: Type.Optional(Nullable(Type.Boolean())),
  },
  { additionalProperties: false },
)
export type ObjReadReq = Static<typeof ObjReadReqSchema>

/** How many digests one `/obj/delete` may name (Weave's limit; more is a 400, as Weave answers). */
export const MAX_DELETE_DIGESTS = 100

/** POST /obj/delete */
export const ObjDeleteReqSchema = Type.Object(
  {
    project_id: ProjectIdSchema,
    object_id: Type.String({ minLength: 1, maxLength: 1024 }),
    digests: Type.Optional(
      Nullable(Type.Array(Type.String({ minLength: 1, maxLength: 128 })), {
        description: `Content digests, "latest" or "v<N>", at most ${MAX_DELETE_DIGESTS}; absent or null: every version`,
      }),
    ),
  },
  { additionalProperties: false, description: 'Soft-delete object versions' },
)
export type ObjDeleteReq = Static<typeof ObjDeleteReqSchema>

/** POST /file/create answers with the digest (its body is multipart, not described here). */
export const FileCreateResSchema = Type.Object({ digest: Type.String() })
export type FileCreateRes = Static<typeof FileCreateResSchema>

/** POST /file/content */
export const FileContentReqSchema = Type.Object(
  { project_id: ProjectIdSchema, digest: Type.String({ minLength: 1, maxLength: 128 }) },
  { additionalProperties: false },
)
export type FileContentReq = Static<typeof FileContentReqSchema>
