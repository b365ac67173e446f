import { Type, type Static, type TSchema, type SchemaOptions } from '@sinclair/typebox'
import { Nullable } from './common.js'
import { samplingFields, UsageSchema } from './chat.js'

/*
 * POST /v1/completions (also under /inference/v1): vLLM's legacy completions. The sampling fields are
 * chat's (samplingFields); what differs is the prompt, integer `logprobs`, `echo`, `max_tokens`
 * defaulting to 16 and `add_special_tokens` to true. Unknown fields are ignored, as in vLLM.
 */

const opt = <T extends TSchema>(schema: T) => Type.Optional(schema)
const optNull = <T extends TSchema>(schema: T, options: SchemaOptions = {}) => Type.Optional(Nullable(schema, options))

/** Prompts in one request at most: each becomes its own engine request. */
export const MAX_PROMPTS = 256

const tokenId = Type.Integer({ minimum: 0 })

export const PromptSchema = Type.Union(
  [
    Type.String(),
    Type.Array(Type.String(), { minItems: 1, maxItems: MAX_PROMPTS }),
    Type.Array(tokenId, { minItems: 1 }),
    Type.Array(Type.Array(tokenId, { minItems: 1 }), { minItems: 1, maxItems: MAX_PROMPTS }),
  ],
  { description: `A prompt as text or token ids, or a list of up to ${MAX_PROMPTS} of either` },
)

export const CompletionReqSchema = Type.Object(
  {
    prompt: PromptSchema,
    best_of: optNull(Type.Integer({ minimum: 1 }), { description: 'Only 1 (or null): vLLM V1 does not support more' }),
    echo: opt(Type.Boolean({ default: false, description: 'Prepend the prompt to the text (and its logprobs with `logprobs`)' })),
    logprobs: optNull(Type.Integer({ minimum: 0 }), { description: 'Log probabilities of the sampled token and this many alternatives' }),
    max_tokens: optNull(Type.Integer({ minimum: 1 }), { default: 16, description: 'Tokens to generate per choice' }),
    suffix: optNull(Type.String({ description: 'Not supported (400)' })),
    add_special_tokens: opt(Type.Boolean({ default: true, description: "Add the tokenizer's special tokens (BOS) to text prompts" })),
    ...samplingFields,
  },
  { description: 'Legacy completion request; unknown fields are ignored' },
)
export type CompletionReq = Static<typeof CompletionReqSchema>

// ---- response ----

export const LegacyLogprobsSchema = Type.Object(
  {
    text_offset: Type.Array(Type.Integer({ minimum: 0 })),
    token_logprobs: Type.Array(Nullable(Type.Number({ minimum: -9999 }))),
    tokens: Type.Array(Type.String()),
    top_logprobs: Type.Array(Nullable(Type.Record(Type.String(), Type.Number({ minimum: -9999 })))),
  },
  { description: 'One entry per token in each list; the first prompt token (with echo) has null logprobs' },
)
export type LegacyLogprobs = Static<typeof LegacyLogprobsSchema>

export const CompletionChoiceSchema = Type.Object({
  index: Type.Integer({ minimum: 0, description: 'prompt index × n + choice' }),
  text: Type.String(),
  logprobs: Nullable(LegacyLogprobsSchema),
  finish_reason: Nullable(Type.String({ description: '`stop`, `length`, `abort`' })),
  stop_reason: optNull(Type.Union([Type.Integer(), Type.String()])),
  prompt_logprobs: optNull(Type.Array(Nullable(Type.Record(Type.String(), Type.Unknown())))),
  token_ids: optNull(Type.Array(Type.Integer())),
  prompt_token_ids: optNull(Type.Array(Type.Integer())),
})

export const CompletionResSchema = Type.Object({
  id: Type.String({ description: '`cmpl-` followed by the request id' }),
  object: Type.Literal('text_completion'),
  created: Type.Integer({ description: 'Unix seconds' }),
  model: Type.String(),
  choices: Type.Array(CompletionChoiceSchema),
  usage: UsageSchema,
  service_tier: optNull(Type.String()),
  system_fingerprint: optNull(Type.String()),
  kv_transfer_params: optNull(Type.Record(Type.String(), Type.Unknown())),
})
export type CompletionRes = Static<typeof CompletionResSchema>
