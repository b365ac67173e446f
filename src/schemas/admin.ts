import { Type, type Static } from '@sinclair/typebox'

/** An API key as the admin routes and `weft keys` show it: never the key itself. */
export const KeyInfoSchema = Type.Object({
  key_id: Type.String(),
  name: Type.String(),
  user_id: Type.String({ description: 'Becomes svc_user_id on everything written with this key' }),
  entities: Type.Union([Type.Array(Type.String()), Type.Null()], { description: 'null: every entity' }),
  is_admin: Type.Boolean(),
  prefix: Type.String({ description: 'The first characters of the key, to recognise it' }),
  created_at: Type.String({ format: 'date-time' }),
  revoked_at: Type.Union([Type.String({ format: 'date-time' }), Type.Null()]),
})
export type KeyInfoJson = Static<typeof KeyInfoSchema>

/** POST /admin/keys */
export const KeyCreateReqSchema = Type.Object(
  {
    user_id: Type.String({ minLength: 1, maxLength: 128, pattern: '^[A-Za-z0-9_.@-]+$' }),
    name: Type.Optional(Type.String({ maxLength: 200 })),
    entities: Type.Optional(
      Type.Union([
        Type.Array(Type.String({ minLength: 1, maxLength: 128, pattern: '^[A-Za-z0-9_.-]+$' }), { minItems: 1, maxItems: 1000 }),
        Type.Null(),
      ]),
    ),
    is_admin: Type.Optional(Type.Boolean({ default: false })),
  },
  { additionalProperties: false },
)
export type KeyCreateReq = Static<typeof KeyCreateReqSchema>

export const KeyCreateResSchema = Type.Object({ key: Type.String(), info: KeyInfoSchema })
export type KeyCreateRes = Static<typeof KeyCreateResSchema>

/** GET /admin/keys */
export const KeyListResSchema = Type.Object({ keys: Type.Array(KeyInfoSchema) })
export type KeyListRes = Static<typeof KeyListResSchema>

/** GET /admin/stats */
export const AdminStatsQuerySchema = Type.Object({ reset: Type.Optional(Type.Boolean()) })
export type AdminStatsQuery = Static<typeof AdminStatsQuerySchema>
