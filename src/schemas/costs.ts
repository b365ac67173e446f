import { Type, type Static } from '@sinclair/typebox'
import { Nullable, ProjectIdSchema, timestampIn } from './common.js'
import { QuerySchema } from './calls.js'
import { SortBySchema } from '../schemas/calls-write.js'

// Bounded so that an integral price still binds as a DuckDB BIGINT (past 2^63 it would not).
const price = (description: string) => Type.Number({ minimum: 0, maximum: 1e9, description })

export const CostCreateInputSchema = Type.Object({
  prompt_token_cost: price('Cost per prompt (input) token'),
  completion_token_cost: price('Cost per completion (output) token'),
  cache_read_input_token_cost: Type.Optional(price('Cost per cached input token read')),
  cache_creation_input_token_cost: Type.Optional(price('Cost per input token written to the cache')),
  prompt_token_cost_unit: Type.Optional(Nullable(Type.String({ maxLength: 16 }), { default: 'USD' })),
  completion_token_cost_unit: Type.Optional(Nullable(Type.String({ maxLength: 16 }), { default: 'USD' })),
  effective_date: Type.Optional(Nullable(timestampIn({ description: 'From when the price applies; default now' }))),
  provider_id: Type.Optional(Nullable(Type.String({ maxLength: 128 }), { description: "e.g. 'openai'; default 'default'" })),
})

/** POST /cost/create */
export const CostCreateReqSchema = Type.Object(
  {
    project_id: ProjectIdSchema,
    costs: Type.Record(Type.String({ minLength: 1, maxLength: 256 }), CostCreateInputSchema, {
      maxProperties: 1000,
      description: 'Model id → price',
    }),
    wb_user_id: Type.Optional(Nullable(Type.String(), { description: 'Set by the server from the API key' })),
  },
  { additionalProperties: false },
)
export type CostCreateReq = Static<typeof CostCreateReqSchema>

export const CostCreateResSchema = Type.Object({
  ids: Type.Array(Type.Tuple([Type.String(), Type.String()]), { description: '[cost id, model id] per created price' }),
})

/** POST /cost/query */
export const CostQueryReqSchema = Type.Object(
  {
    project_id: ProjectIdSchema,
    fields: Type.Optional(Nullable(Type.Array(Type.String(), { maxItems: 32 }))),
    query: Type.Optional(Nullable(QuerySchema)),
    sort_by: Type.Optional(Nullable(Type.Array(SortBySchema, { maxItems: 16 }))),
    limit: Type.Optional(Nullable(Type.Integer({ minimum: 0, maximum: Number.MAX_SAFE_INTEGER }))),
    offset: Type.Optional(Nullable(Type.Integer({ minimum: 0, maximum: Number.MAX_SAFE_INTEGER }))),
  },
  { additionalProperties: false },
)
export type CostQueryReq = Static<typeof CostQueryReqSchema>

export const CostQueryResSchema = Type.Object({ results: Type.Array(Type.Record(Type.String(), Type.Unknown())) })

/** POST /cost/purge */
export const CostPurgeReqSchema = Type.Object({ project_id: ProjectIdSchema, query: QuerySchema }, { additionalProperties: false })
export type CostPurgeReq = Static<typeof CostPurgeReqSchema>
