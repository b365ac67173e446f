import { Type, type Static } from '@sinclair/typebox'
import { Nullable, ProjectIdSchema, StringEnum } from './common.js'
import { QuerySchema } from './calls.js'

const optRef = (description: string) => Type.Optional(Nullable(Type.String({ maxLength: 2048 }), { description }))

/** The fields of one feedback row a client sends (upstream `FeedbackCreateReq`); `wb_user_id` is the caller's. */
const createFields = {
  id: Type.Optional(Nullable(Type.String({ minLength: 1, maxLength: 128 }), { description: 'Client-chosen id; default a new UUID' })),
  project_id: ProjectIdSchema,
  weave_ref: Type.String({ minLength: 1, maxLength: 2048, description: 'What the feedback is about, e.g. weave:///e/p/call/<id>' }),
  creator: Type.Optional(Nullable(Type.String({ maxLength: 1024 }))),
  feedback_type: Type.String({ minLength: 1, maxLength: 512, description: 'wandb.reaction.1, wandb.note.1, wandb.runnable.<name>, …' }),
  payload: Type.Record(Type.String(), Type.Unknown(), { description: 'A JSON object; at most 1 MiB serialised' }),
  annotation_ref: optRef('Required for wandb.annotation.<name>'),
  runnable_ref: optRef('Required for wandb.runnable.<name>'),
  call_ref: optRef('Required for wandb.runnable.<name> when the runnable is an op'),
  trigger_ref: optRef('Only with annotation and runnable types'),
  wb_user_id: Type.Optional(Nullable(Type.String(), { description: 'Ignored: the server sets the caller' })),
}

/** POST /feedback/create */
export const FeedbackCreateReqSchema = Type.Object(createFields, { additionalProperties: false })
export type FeedbackCreateReq = Static<typeof FeedbackCreateReqSchema>

export const FeedbackCreateResSchema = Type.Object({
  id: Type.String(),
  created_at: Type.String({ format: 'date-time' }),
  wb_user_id: Type.String(),
  payload: Type.Record(Type.String(), Type.Unknown(), { description: 'With the fields the server added (reactions)' }),
})
export type FeedbackCreateRes = Static<typeof FeedbackCreateResSchema>

/** POST /feedback/batch/create */
export const FeedbackCreateBatchReqSchema = Type.Object(
  { batch: Type.Array(FeedbackCreateReqSchema, { maxItems: 10_000 }) },
  { additionalProperties: false },
)
export type FeedbackCreateBatchReq = Static<typeof FeedbackCreateBatchReqSchema>
export const FeedbackCreateBatchResSchema = Type.Object({ res: Type.Array(FeedbackCreateResSchema) })

/** A column name or a dot path into the payload (`payload.note`): segments of letters, digits, `_` and `-`. */
const FieldPath = Type.String({ pattern: '^[A-Za-z0-9_-]+(\\.[A-Za-z0-9_-]+)*$', maxLength: 512 })

export const FeedbackSortBySchema = Type.Object(
  { field: FieldPath, direction: StringEnum(['asc', 'desc'] as const) },
  { additionalProperties: false },
)

/** POST /feedback/query */
export const FeedbackQueryReqSchema = Type.Object(
  {
    project_id: ProjectIdSchema,
    fields: Type.Optional(Nullable(Type.Array(FieldPath, { maxItems: 64 }), { description: 'Columns or payload.<path>; default all' })),
    query: Type.Optional(Nullable(QuerySchema)),
    sort_by: Type.Optional(Nullable(Type.Array(FeedbackSortBySchema, { maxItems: 16 }), { description: 'Default: created_at' })),
    limit: Type.Optional(Nullable(Type.Integer({ minimum: 0, maximum: Number.MAX_SAFE_INTEGER }))),
    offset: Type.Optional(Nullable(Type.Integer({ minimum: 0, maximum: Number.MAX_SAFE_INTEGER }))),
  },
  { additionalProperties: false },
)
export type FeedbackQueryReq = Static<typeof FeedbackQueryReqSchema>

export const FeedbackQueryResSchema = Type.Object({
  result: Type.Array(Type.Record(Type.String(), Type.Unknown())),
  total_count: Type.Integer({ minimum: 0, description: 'Rows matching the query, before limit and offset' }),
})

/** POST /feedback/purge */
export const FeedbackPurgeReqSchema = Type.Object({ project_id: ProjectIdSchema, query: QuerySchema }, { additionalProperties: false })
export type FeedbackPurgeReq = Static<typeof FeedbackPurgeReqSchema>
export const FeedbackPurgeResSchema = Type.Object({})

/** POST /feedback/replace: the create fields and the row it replaces. */
export const FeedbackReplaceReqSchema = Type.Object(
  { ...createFields, feedback_id: Type.String({ minLength: 1, maxLength: 128, description: 'The feedback row to replace' }) },
  { additionalProperties: false },
)
export type FeedbackReplaceReq = Static<typeof FeedbackReplaceReqSchema>
