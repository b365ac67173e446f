import { Type, type Static } from '@sinclair/typebox'
import { CallFilterSchema, Nullable, ProjectIdSchema, timestampIn } from './common.js'
import { QuerySchema } from './calls.js'

const Obj = (description: string) => Type.Record(Type.String(), Type.Unknown(), { description })
const Id = (description: string) => Type.String({ minLength: 1, maxLength: 128, description })

/**
 * One call's start. Inner payloads accept unknown keys (docs/calls-and-storage.md: the SDKs send extras); the
 * request wrappers around them do not.
 */
export const StartedCallSchema = Type.Object({
  project_id: ProjectIdSchema,
  id: Type.Optional(Nullable(Id('16 lowercase hex digits or a lowercase UUID; generated (UUIDv7) when absent'))),
  op_name: Type.String({ minLength: 1, maxLength: 2048 }),
  display_name: Type.Optional(Nullable(Type.String({ maxLength: 1024 }))),
  trace_id: Type.Optional(Nullable(Id('32 lowercase hex digits or a lowercase UUID; generated when absent'))),
  parent_id: Type.Optional(Nullable(Id('The parent call id'))),
  thread_id: Type.Optional(Nullable(Type.String({ maxLength: 256 }))),
  turn_id: Type.Optional(Nullable(Type.String({ maxLength: 256 }))),
  started_at: timestampIn(),
  attributes: Obj('Attributes of the call'),
  inputs: Obj('Inputs of the call'),
  svc_run_id: Type.Optional(Nullable(Type.String({ maxLength: 512 }))),
  wb_run_id: Type.Optional(Nullable(Type.String({ maxLength: 512 }))),
  svc_run_step: Type.Optional(Nullable(Type.Integer())),
  wb_run_step: Type.Optional(Nullable(Type.Integer())),
})
export type StartedCall = Static<typeof StartedCallSchema>

export const EndedCallSchema = Type.Object({
  project_id: ProjectIdSchema,
  id: Id('The call id'),
  ended_at: timestampIn(),
  exception: Type.Optional(Nullable(Type.String())),
  output: Type.Optional(Type.Unknown()),
  summary: Obj('Summary; `usage` holds token counts per model'),
  display_name: Type.Optional(Nullable(Type.String({ maxLength: 1024 }))),
  svc_run_step_end: Type.Optional(Nullable(Type.Integer())),
  wb_run_step_end: Type.Optional(Nullable(Type.Integer())),
})
export type EndedCall = Static<typeof EndedCallSchema>

export const CallStartReqSchema = Type.Object({ start: StartedCallSchema }, { additionalProperties: false })
export const CallStartResSchema = Type.Object({ id: Type.String(), trace_id: Type.String() })
export const CallEndReqSchema = Type.Object({ end: EndedCallSchema }, { additionalProperties: false })

/** Items are checked one by one in the handler: a bad item is reported in place, never the batch. */
export const CallCreateBatchReqSchema = Type.Object(
  {
    batch: Type.Array(Type.Object({ mode: Type.Optional(Type.String()), req: Type.Record(Type.String(), Type.Unknown()) }), {
      maxItems: 10_000,
      description: 'start/end items, applied in order',
    }),
  },
  { additionalProperties: false },
)
export const CallCreateBatchResSchema = Type.Object({
  res: Type.Array(
    Type.Union([
      CallStartResSchema,
      Type.Object({}),
      Type.Object({ error: Type.String(), detail: Type.Optional(Type.Array(Type.Unknown())) }),
    ]),
  ),
})

export const CallReadReqSchema = Type.Object(
  {
    project_id: ProjectIdSchema,
    id: Id('The call id'),
    include_costs: Type.Optional(Nullable(Type.Boolean())),
    include_storage_size: Type.Optional(Nullable(Type.Boolean())),
    include_total_storage_size: Type.Optional(Nullable(Type.Boolean())),
  },
  { additionalProperties: false },
)

export const CallUpdateReqSchema = Type.Object(
  {
    project_id: ProjectIdSchema,
    call_id: Id('The call id'),
    display_name: Type.Optional(Nullable(Type.String({ maxLength: 1024 }))),
    svc_user_id: Type.Optional(Nullable(Type.String())),
    wb_user_id: Type.Optional(Nullable(Type.String())),
  },
  { additionalProperties: false },
)

export const CallsDeleteReqSchema = Type.Object(
  {
    project_id: ProjectIdSchema,
    call_ids: Type.Array(Id('A call id'), { description: 'At most 1000; descendants are deleted too' }),
    svc_user_id: Type.Optional(Nullable(Type.String())),
    wb_user_id: Type.Optional(Nullable(Type.String())),
  },
  { additionalProperties: false },
)

export const SortBySchema = Type.Object(
  { field: Type.String({ minLength: 1, maxLength: 512 }), direction: Type.Union([Type.Literal('asc'), Type.Literal('desc')]) },
  { additionalProperties: false },
)

export const CallsQueryReqSchema = Type.Object(
  {
    project_id: ProjectIdSchema,
    filter: Type.Optional(Nullable(CallFilterSchema)),
    limit: Type.Optional(Nullable(Type.Integer({ minimum: 0, maximum: Number.MAX_SAFE_INTEGER }))),
    offset: Type.Optional(Nullable(Type.Integer({ minimum: 0, maximum: Number.MAX_SAFE_INTEGER }))),
    sort_by: Type.Optional(Nullable(Type.Array(SortBySchema, { maxItems: 16 }))),
    query: Type.Optional(Nullable(QuerySchema)),
    include_costs: Type.Optional(Nullable(Type.Boolean())),
    include_feedback: Type.Optional(Nullable(Type.Boolean())),
    include_storage_size: Type.Optional(Nullable(Type.Boolean())),
    include_total_storage_size: Type.Optional(Nullable(Type.Boolean())),
    include_usernames: Type.Optional(Nullable(Type.Boolean())),
    columns: Type.Optional(Nullable(Type.Array(Type.String({ maxLength: 512 }), { maxItems: 256 }))),
    expand_columns: Type.Optional(Nullable(Type.Array(Type.String({ maxLength: 512 }), { maxItems: 64 }))),
    return_expanded_column_values: Type.Optional(Nullable(Type.Boolean())),
  },
  { additionalProperties: false },
)
export type CallsQueryReq = Static<typeof CallsQueryReqSchema>

export const CallsDeleteResSchema = Type.Object({ num_deleted: Type.Integer() })
