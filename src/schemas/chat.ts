import { Type, type Static, type TSchema, type SchemaOptions } from '@sinclair/typebox'
import { Nullable, StringEnum } from './common.js'

/*
 * POST /v1/chat/completions (also under /inference/v1). vLLM accepts and ignores unknown fields,
 * at the top level and inside messages, so no object here sets `additionalProperties: false`.
 *
 * Fields vLLM declares `Optional` accept `null` (meaning "use the default"); the others do not.
 * Sampling parameters that vLLM resolves from the model's generation config when unset
 * (temperature, top_p, top_k, min_p, penalties) carry no `default`: the validator fills defaults
 * in, and a filled-in value could not be told from one the client sent.
 */

const opt = <T extends TSchema>(schema: T) => Type.Optional(schema)
const optNull = <T extends TSchema>(schema: T, options: SchemaOptions = {}) => Type.Optional(Nullable(schema, options))
const anyObject = (options: SchemaOptions = {}) => Type.Record(Type.String(), Type.Unknown(), options)

// ---- messages ----

export const ContentPartSchema = Type.Object(
  {
    type: opt(Type.String({ description: '`text`, `image_url`, ...; inferred from the other keys when absent' })),
    text: opt(Type.String()),
  },
  { additionalProperties: true },
)
export type ContentPart = Static<typeof ContentPartSchema>

export const ToolCallSchema = Type.Object(
  {
    id: Type.String(),
    type: Type.Literal('function'),
    function: Type.Object({ name: Type.String(), arguments: Type.String({ description: 'JSON text' }) }, { additionalProperties: true }),
  },
  { additionalProperties: true },
)
export type ToolCall = Static<typeof ToolCallSchema>

/** Roles are free-form: the chat template decides what a role means. */
export const ChatMessageSchema = Type.Object(
  {
    role: Type.String({ description: '`system`, `developer`, `user`, `assistant`, `tool`, or a custom role' }),
    content: optNull(Type.Union([Type.String(), Type.Array(ContentPartSchema)]), { description: 'Text, or a list of content parts' }),
    name: opt(Type.String()),
    tool_calls: optNull(Type.Array(ToolCallSchema), { description: 'Tool calls of an assistant message' }),
    tool_call_id: opt(Type.String({ description: 'The call a `tool` message answers' })),
    reasoning: optNull(Type.String()),
    reasoning_content: optNull(Type.String({ description: 'Older name of `reasoning`' })),
  },
  { additionalProperties: true },
)
export type ChatMessage = Static<typeof ChatMessageSchema>

// ---- tools and structured outputs ----

export const ToolSchema = Type.Object(
  {
    type: opt(Type.Literal('function', { default: 'function' })),
    function: Type.Object(
      {
        name: Type.String(),
        description: optNull(Type.String()),
        parameters: optNull(anyObject({ description: 'JSON Schema of the arguments' })),
        strict: optNull(Type.Boolean()),
      },
      { additionalProperties: true },
    ),
  },
  { additionalProperties: true },
)
export type Tool = Static<typeof ToolSchema>

export const NamedToolChoiceSchema = Type.Object(
  { type: opt(Type.Literal('function')), function: Type.Object({ name: Type.String() }, { additionalProperties: true }) },
  { additionalProperties: true },
)
export type NamedToolChoice = Static<typeof NamedToolChoiceSchema>

export const ResponseFormatSchema = Type.Object(
  {
    type: opt(StringEnum(['text', 'json_object', 'json_schema', 'structural_tag'] as const, { default: 'text' })),
    json_schema: opt(
      Type.Object(
        {
          name: Type.String(),
          description: optNull(Type.String()),
          schema: optNull(anyObject({ description: 'The JSON Schema the reply must match' })),
          strict: optNull(Type.Boolean({ description: 'Ignored: generation is always strictly constrained' })),
        },
        { additionalProperties: true },
      ),
    ),
  },
  { additionalProperties: true, description: 'Constrains the reply format; `json_schema` requires the json_schema member' },
)
export type ResponseFormat = Static<typeof ResponseFormatSchema>

export const StructuredOutputsSchema = Type.Object(
  {
    // Empty json / grammar text is refused in code, with vLLM's messages.
    json: optNull(Type.Union([Type.String(), anyObject()]), { description: 'JSON Schema, as text or an object' }),
    regex: optNull(Type.String({ description: 'The whole reply matches it' })),
    choice: optNull(Type.Array(Type.String(), { minItems: 1, description: 'The reply is exactly one of these' })),
    grammar: optNull(Type.String({ description: 'EBNF grammar (GBNF, as xgrammar takes it), rule `root` first' })),
    json_object: optNull(Type.Boolean({ description: 'true: any JSON object' })),
    disable_fallback: opt(Type.Boolean({ default: false })),
    disable_any_whitespace: opt(Type.Boolean({ default: false })),
    disable_additional_properties: opt(Type.Boolean({ default: false })),
    whitespace_pattern: optNull(Type.String({ description: 'Accepted; not applied (as vLLM with xgrammar)' })),
    structural_tag: optNull(Type.String({ description: 'Structural tag, as JSON text' })),
    _backend: optNull(Type.String()),
    _backend_was_auto: opt(Type.Boolean({ default: false })),
  },
  { additionalProperties: true, description: 'Exactly one constraint of json, regex, choice, grammar, json_object, structural_tag' },
)
export type StructuredOutputs = Static<typeof StructuredOutputsSchema>

export const StreamOptionsSchema = Type.Object(
  {
    include_usage: optNull(Type.Boolean({ description: 'Send a final chunk with usage' })),
    continuous_usage_stats: optNull(Type.Boolean({ default: false, description: 'Usage in every chunk' })),
  },
  { additionalProperties: true, description: 'Only allowed with stream: true' },
)
export type StreamOptions = Static<typeof StreamOptionsSchema>

export const LogitsProcessorSchema = Type.Union([
  Type.String({ description: 'Qualified name' }),
  Type.Object(
    { qualname: Type.String(), args: optNull(Type.Array(Type.Unknown())), kwargs: optNull(anyObject()) },
    { additionalProperties: true },
  ),
])
export type LogitsProcessor = Static<typeof LogitsProcessorSchema>

const xargValue = Type.Union([Type.String(), Type.Number()])
export const XargsSchema = Type.Record(Type.String(), Type.Union([xargValue, Type.Array(xargValue)]), {
  description: 'Extra parameters for custom extensions: string or numeric values, or lists of them',
})
export type Xargs = Static<typeof XargsSchema>

// ---- request ----

// seed must fit a signed 64-bit integer. As doubles both ends round to ±2^63, so these bounds only
// catch what is far out; the exact range is checked on the number's text (api/chat/body.ts).
const INT64_MIN = -(2 ** 63)
const INT64_MAX = 2 ** 63

const tokenIds = (options: SchemaOptions) => Type.Array(Type.Integer({ minimum: 0 }), options)

/**
 * The request fields chat and legacy completions share: the model, sampling, stopping, logprobs of
 * the prompt, structured outputs and the vLLM extras. Each request schema spreads them in.
 */
export const samplingFields = {
  model: optNull(Type.String({ description: 'Served model name; null or empty: the default model' })),
  frequency_penalty: optNull(Type.Number({ minimum: -2, maximum: 2 }), { description: 'Default 0' }),
  logit_bias: optNull(
    Type.Record(Type.String(), Type.Number(), {
      propertyNames: { pattern: '^\\s*[-+]?[0-9]+\\s*$' },
      description: 'Token id → bias added to its logit (clamped to [-100, 100])',
    }),
  ),
  n: optNull(Type.Integer({ minimum: 1 }), { default: 1, description: 'Number of choices' }),
  presence_penalty: optNull(Type.Number({ minimum: -2, maximum: 2 }), { description: 'Default 0' }),
  response_format: optNull(ResponseFormatSchema),
  seed: optNull(Type.Integer({ minimum: INT64_MIN, maximum: INT64_MAX }), { description: 'Sampling seed; -1 or absent: none' }),
  stop: optNull(Type.Union([Type.String({ minLength: 1 }), Type.Array(Type.String({ minLength: 1 }))]), {
    description: 'Stop strings',
  }),
  stream: optNull(Type.Boolean(), { default: false, description: 'Stream the reply as server-sent events' }),
  stream_options: optNull(StreamOptionsSchema),
  temperature: optNull(Type.Number({ minimum: 0 }), { description: '0 (below 1e-5): greedy' }),
  top_p: optNull(Type.Number({ exclusiveMinimum: 0, maximum: 1 }), { description: 'Nucleus sampling, in (0, 1]' }),
  user: optNull(Type.String({ description: 'Accepted and ignored' })),
  use_beam_search: opt(Type.Boolean({ default: false })),
  top_k: optNull(Type.Integer({ minimum: -1 }), { description: '0 or -1: disabled' }),
  min_p: optNull(Type.Number({ minimum: 0, maximum: 1 }), { description: '0: disabled' }),
  repetition_penalty: optNull(Type.Number({ exclusiveMinimum: 0 }), { description: '1: off' }),
  length_penalty: opt(Type.Number({ default: 1, description: 'Beam search only' })),
  stop_token_ids: optNull(tokenIds({ description: 'Stop when one of these tokens is sampled' }), { default: [] }),
  include_stop_str_in_output: opt(Type.Boolean({ default: false })),
  ignore_eos: opt(Type.Boolean({ default: false })),
  min_tokens: opt(Type.Integer({ minimum: 0, default: 0, description: 'End-of-sequence and stop tokens are masked until reached' })),
  skip_special_tokens: opt(Type.Boolean({ default: true })),
  spaces_between_special_tokens: opt(Type.Boolean({ default: true })),
  truncate_prompt_tokens: optNull(Type.Integer({ minimum: -1 }), {
    description: 'Keep only the last N prompt tokens; -1: as many as fit',
  }),
  prompt_logprobs: optNull(Type.Integer({ minimum: 0 }), { description: 'Log probabilities of the prompt tokens; not with stream' }),
  allowed_token_ids: optNull(tokenIds({ minItems: 1, description: 'Only these tokens may be sampled' })),
  bad_words: opt(Type.Array(Type.String({ minLength: 1 }), { default: [], description: 'Words that must not be generated' })),
  structured_outputs: optNull(StructuredOutputsSchema),
  guided_json: optNull(Type.Union([Type.String(), anyObject()]), { description: 'Legacy alias of `structured_outputs.json`' }),
  guided_regex: optNull(Type.String({ description: 'Legacy alias of `structured_outputs.regex`' })),
  guided_choice: optNull(Type.Array(Type.String(), { minItems: 1, description: 'Legacy alias of `structured_outputs.choice`' })),
  guided_grammar: optNull(Type.String({ description: 'Legacy alias of `structured_outputs.grammar`' })),
  guided_whitespace_pattern: optNull(Type.String({ description: 'Legacy alias of `structured_outputs.whitespace_pattern`' })),
  guided_decoding_backend: optNull(Type.String({ description: 'Legacy; only `auto` or `xgrammar`' })),
  priority: opt(Type.Integer({ default: 0, description: 'Lower is handled earlier; non-zero needs priority scheduling' })),
  request_id: opt(Type.String({ minLength: 1, description: 'Used throughout processing and returned; random when omitted' })),
  logits_processors: optNull(Type.Array(LogitsProcessorSchema)),
  return_tokens_as_token_ids: optNull(Type.Boolean({ description: 'With logprobs, tokens as `token_id:<id>`' })),
  return_token_ids: optNull(Type.Boolean({ description: 'Include token ids with the text' })),
  cache_salt: optNull(
    Type.String({
      minLength: 1,
      maxLength: 128,
      pattern: '^[^@/\\\\\\u0000]*$',
      description:
        'Salts the prefix cache: only requests with the same salt share cached prompt blocks (≤ 128 characters, none of @ / \\ or NUL)',
    }),
  ),
  kv_transfer_params: optNull(anyObject({ description: 'Parameters for disaggregated serving' })),
  svc_xargs: optNull(XargsSchema),
  vllm_xargs: optNull(XargsSchema, { description: 'Alias of `svc_xargs`' }),
}

/** The shared fields alone: what request normalisation common to both routes reads. */
export const SamplingReqSchema = Type.Object(samplingFields)
export type SamplingReq = Static<typeof SamplingReqSchema>

export const ChatCompletionReqSchema = Type.Object(
  {
    messages: Type.Array(ChatMessageSchema, {
      minItems: 1,
      description:
        'The conversation. Developer messages are followed regardless of user messages and replace system messages for newer reasoning models',
    }),
    logprobs: optNull(Type.Boolean(), { default: false, description: 'Return log probabilities of the sampled tokens' }),
    top_logprobs: optNull(Type.Integer({ minimum: 0 }), { default: 0, description: 'Alternatives per position; needs logprobs' }),
    max_tokens: optNull(Type.Integer({ minimum: 1 }), { description: 'Deprecated; used when max_completion_tokens is not set' }),
    max_completion_tokens: optNull(Type.Integer({ minimum: 1 }), { description: 'Default: what remains of the context window' }),
    tools: optNull(Type.Array(ToolSchema)),
    tool_choice: optNull(Type.Union([StringEnum(['none', 'auto', 'required'] as const), NamedToolChoiceSchema]), {
      description: '`none` unless tools are given, then `auto`',
    }),
    // The spec names low/medium/high; newer OpenAI clients also send the others.
    reasoning_effort: optNull(StringEnum(['low', 'medium', 'high', 'none', 'minimal', 'xhigh', 'max'] as const), {
      description: '`low`, `medium` or `high`',
    }),
    include_reasoning: opt(Type.Boolean({ default: true })),
    parallel_tool_calls: optNull(Type.Boolean(), { default: true, description: 'When false, only the first tool call is returned' }),
    echo: opt(Type.Boolean({ default: false, description: 'Prepend the last message to the reply when both have the same role' })),
    add_generation_prompt: opt(Type.Boolean({ default: true, description: 'Add the generation prompt of the chat template' })),
    continue_final_message: opt(
      Type.Boolean({
        default: false,
        description: 'Leave the final message open-ended so the model continues it; not with add_generation_prompt',
      }),
    ),
    add_special_tokens: opt(Type.Boolean({ default: false, description: 'Add special tokens on top of those the template adds' })),
    documents: optNull(
      Type.Array(Type.Record(Type.String(), Type.String()), {
        description: 'Documents for retrieval-augmented templates, with `title` and `text`',
      }),
    ),
    chat_template: optNull(Type.String({ description: 'Template; required when the model defines none' })),
    chat_template_kwargs: optNull(anyObject({ description: 'Extra variables for the template' })),
    mm_processor_kwargs: optNull(anyObject({ description: 'Extra arguments for the multimodal processor' })),
    ...samplingFields,
  },
  { description: 'Chat completion request; unknown fields are ignored' },
)
export type ChatCompletionReq = Static<typeof ChatCompletionReqSchema>

// ---- response ----

const TopLogprobSchema = Type.Object({
  token: Type.String(),
  logprob: Type.Number({ minimum: -9999 }),
  bytes: Nullable(Type.Array(Type.Integer({ minimum: 0, maximum: 255 }))),
})

export const TokenLogprobSchema = Type.Object({
  token: Type.String({ description: 'Token text, or `token_id:<id>`' }),
  logprob: Type.Number({ minimum: -9999 }),
  bytes: Nullable(Type.Array(Type.Integer({ minimum: 0, maximum: 255 }))),
  top_logprobs: Type.Array(TopLogprobSchema),
})
export type TokenLogprob = Static<typeof TokenLogprobSchema>

export const ResponseMessageSchema = Type.Object({
  role: Type.String(),
  content: Nullable(Type.String()),
  refusal: optNull(Type.String()),
  annotations: optNull(
    Type.Object({
      type: Type.String(),
      url_citation: Type.Object({ start_index: Type.Integer(), end_index: Type.Integer(), title: Type.String(), url: Type.String() }),
    }),
  ),
  audio: optNull(Type.Object({ id: Type.String(), data: Type.String(), expires_at: Type.Integer(), transcript: Type.String() })),
  function_call: optNull(Type.Object({ name: Type.String(), arguments: Type.String() })),
  tool_calls: opt(Type.Array(ToolCallSchema)),
  reasoning: optNull(Type.String()),
  reasoning_content: optNull(Type.String()),
})
export type ResponseMessage = Static<typeof ResponseMessageSchema>

export const ChoiceSchema = Type.Object({
  index: Type.Integer({ minimum: 0 }),
  message: ResponseMessageSchema,
  logprobs: Nullable(Type.Object({ content: Nullable(Type.Array(TokenLogprobSchema)) })),
  finish_reason: Nullable(Type.String({ description: '`stop`, `length`, `tool_calls`, `abort`' })),
  stop_reason: optNull(Type.Union([Type.Integer(), Type.String()]), {
    description: 'The stop token id or stop string that ended the choice',
  }),
  token_ids: optNull(Type.Array(Type.Integer())),
})
export type Choice = Static<typeof ChoiceSchema>

export const UsageSchema = Type.Object({
  prompt_tokens: Type.Integer({ minimum: 0 }),
  total_tokens: Type.Integer({ minimum: 0 }),
  completion_tokens: Nullable(Type.Integer({ minimum: 0 })),
  prompt_tokens_details: optNull(Type.Object({ cached_tokens: Type.Integer({ minimum: 0 }) })),
})
export type Usage = Static<typeof UsageSchema>

const PromptLogprobSchema = Type.Object({
  logprob: Type.Number({ minimum: -9999 }),
  rank: Nullable(Type.Integer()),
  decoded_token: Nullable(Type.String()),
})

export const ChatCompletionResSchema = Type.Object({
  id: Type.String({ description: '`chatcmpl-` followed by the request id' }),
  object: Type.Literal('chat.completion'),
  created: Type.Integer({ description: 'Unix seconds' }),
  model: Type.String(),
  choices: Type.Array(ChoiceSchema),
  usage: UsageSchema,
  service_tier: optNull(StringEnum(['auto', 'default', 'flex', 'scale', 'priority'] as const)),
  system_fingerprint: optNull(Type.String()),
  prompt_logprobs: optNull(
    Type.Array(Nullable(Type.Record(Type.String(), PromptLogprobSchema)), {
      description: 'One entry per prompt token (the first is null), keyed by token id',
    }),
  ),
  prompt_token_ids: optNull(Type.Array(Type.Integer())),
  kv_transfer_params: optNull(anyObject()),
})
export type ChatCompletionRes = Static<typeof ChatCompletionResSchema>

// ---- GET /v1/models ----

export const ModelPermissionSchema = Type.Object({
  id: Type.String(),
  object: Type.Literal('model_permission'),
  created: Type.Integer(),
  allow_create_engine: Type.Boolean(),
  allow_sampling: Type.Boolean(),
  allow_logprobs: Type.Boolean(),
  allow_search_indices: Type.Boolean(),
  allow_view: Type.Boolean(),
  allow_fine_tuning: Type.Boolean(),
  organization: Type.String(),
  group: Nullable(Type.String()),
  is_blocking: Type.Boolean(),
})
export type ModelPermission = Static<typeof ModelPermissionSchema>

export const ModelCardSchema = Type.Object({
  id: Type.String({ description: 'Served model name' }),
  object: Type.Literal('model'),
  created: Type.Integer({ description: 'Unix seconds' }),
  owned_by: Type.String(),
  root: Nullable(Type.String({ description: 'Model path or id' })),
  parent: Nullable(Type.String({ description: 'Base model of an adapter' })),
  max_model_len: Nullable(Type.Integer({ description: 'Context window, in tokens' })),
  permission: Type.Array(ModelPermissionSchema),
})
export type ModelCard = Static<typeof ModelCardSchema>

export const ModelListResSchema = Type.Object({
  object: Type.Literal('list'),
  data: Type.Array(ModelCardSchema),
})
export type ModelListRes = Static<typeof ModelListResSchema>

// ---- POST /tokenize, POST /detokenize ----

export const TokenizeReqSchema = Type.Object(
  {
    model: Type.Optional(Type.Union([Type.String(), Type.Null()])),
    prompt: Type.Optional(Type.String()),
    messages: Type.Optional(Type.Array(Type.Object({ role: Type.String() }, { additionalProperties: true }), { minItems: 1 })),
    add_special_tokens: Type.Optional(Type.Boolean()),
    add_generation_prompt: Type.Optional(Type.Boolean()),
    continue_final_message: Type.Optional(Type.Boolean()),
    chat_template: Type.Optional(Type.Union([Type.String(), Type.Null()])),
    chat_template_kwargs: Type.Optional(Type.Union([Type.Record(Type.String(), Type.Unknown()), Type.Null()])),
    tools: optNull(Type.Array(ToolSchema), { description: 'Tools the chat template renders into the prompt' }),
    return_token_strs: Type.Optional(Type.Union([Type.Boolean(), Type.Null()])),
  },
  { description: 'A prompt, or messages rendered with the chat template' },
)
export type TokenizeReq = Static<typeof TokenizeReqSchema>

export const DetokenizeReqSchema = Type.Object({
  model: Type.Optional(Type.Union([Type.String(), Type.Null()])),
  tokens: Type.Array(Type.Integer({ minimum: 0 })),
})
export type DetokenizeReq = Static<typeof DetokenizeReqSchema>
