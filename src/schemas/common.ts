import { Type, type Static, type TSchema, type SchemaOptions, type TUnsafe } from '@sinclair/typebox'

/**
 * `T | null`. Upstream models are pydantic `Optional[...]`, and the Python SDK serialises with
 * `model_dump_json()`, which writes every unset optional field as an explicit `null`.
 */
export const Nullable = <T extends TSchema>(schema: T, options: SchemaOptions = {}) => Type.Union([schema, Type.Null()], options)

/**
 * A string limited to a fixed list, written as `enum` rather than TypeBox's `anyOf` of consts so a
 * failure reads "Input should be 'a' or 'b'" instead of a bare union mismatch.
 */
export const StringEnum = <const T extends readonly string[]>(values: T, options: SchemaOptions = {}): TUnsafe<T[number]> =>
  Type.Unsafe<T[number]>({ type: 'string', enum: [...values], ...options })

/** One part of `entity/project`: no `/`, no whitespace, no control characters. */
export const PROJECT_PART_PATTERN = '[^/\\s\\x00-\\x1f\\x7f-\\x9f]+'

export const ProjectIdSchema = Type.String({
  pattern: `^${PROJECT_PART_PATTERN}/${PROJECT_PART_PATTERN}$`,
  minLength: 3,
  maxLength: 256,
  description: 'Project, of the form `<entity>/<project>`',
  examples: ['my-team/my-project'],
})
export type ProjectId = Static<typeof ProjectIdSchema>

/** A timestamp the server writes: ISO 8601 in UTC with its offset (`...Z`). */
export const timestamp = (options: SchemaOptions = {}) => Type.String({ ...options, format: 'date-time' })
export const TimestampSchema = timestamp()
export type Timestamp = Static<typeof TimestampSchema>

/**
 * A timestamp a client sends. The offset is optional because pydantic accepts naive datetimes
 * (Python clients often send `datetime.now().isoformat()`); upstream reads a naive value as UTC,
 * so must whoever parses it (`new Date()` would read it as local time).
 */
export const timestampIn = (options: SchemaOptions = {}) => Type.String({ ...options, format: 'iso-date-time' })
export const TimestampInSchema = timestampIn()
export type TimestampIn = Static<typeof TimestampInSchema>

const ids = (description: string) => Type.Optional(Nullable(Type.Array(Type.String()), { description }))

/**
 * The calls filter. Both spellings of the user/run lists are accepted: weft's `svc_*` and upstream's
 * `wb_*`, which every Weave SDK sends. When both are present the handler should use their union.
 */
export const CallFilterSchema = Type.Object(
  {
    op_names: ids('Op names or op refs; a ref ending in `:*` matches every version'),
    input_refs: ids('Refs that appear anywhere in the call inputs'),
    output_refs: ids('Refs that appear anywhere in the call output'),
    parent_ids: ids('Parent call ids'),
    trace_ids: ids('Trace ids'),
    call_ids: ids('Call ids'),
    thread_ids: ids('Thread ids'),
    turn_ids: ids('Turn ids'),
    trace_roots_only: Type.Optional(Nullable(Type.Boolean(), { description: 'Only calls without a parent' })),
    svc_user_ids: ids('User ids'),
    svc_run_ids: ids('Run ids'),
    wb_user_ids: ids('Alias of `svc_user_ids`'),
    wb_run_ids: ids('Alias of `svc_run_ids`'),
  },
  { additionalProperties: false, description: 'Call filter; every member optional, `null` means no filter' },
)
export type CallFilter = Static<typeof CallFilterSchema>

export const ValidationErrorSchema = Type.Object(
  {
    detail: Type.Array(
      Type.Object({
        loc: Type.Array(Type.Union([Type.String(), Type.Integer()]), { description: 'Path to the offending element' }),
        msg: Type.String(),
        type: Type.String(),
      }),
      { description: 'One entry per problem' },
    ),
  },
  { description: 'Request validation failure' },
)
export type ValidationError = Static<typeof ValidationErrorSchema>

/** Upstream's error registry adds members for some errors, e.g. `deleted_at` or `api_key`. */
export const ReasonErrorSchema = Type.Object({ reason: Type.String() }, { additionalProperties: true, description: 'Domain error' })
export type ReasonError = Static<typeof ReasonErrorSchema>

export const OpenAIErrorSchema = Type.Object(
  {
    error: Type.Object({
      message: Type.String(),
      type: Type.String({ description: 'Error class, e.g. `BadRequestError`' }),
      param: Nullable(Type.String(), { description: 'The offending request field, when known' }),
      code: Type.Integer({ description: 'The HTTP status' }),
    }),
  },
  { description: 'Error envelope of the chat-completion API' },
)
export type OpenAIError = Static<typeof OpenAIErrorSchema>

export const NumDeletedSchema = Type.Object({ num_deleted: Type.Integer({ minimum: 0, description: 'Number of items deleted' }) })
export type NumDeleted = Static<typeof NumDeletedSchema>
