/**
 * Messages between the HTTP side and an inference worker. The worker renders, tokenizes, schedules,
 * runs the model and detokenizes; the HTTP side only validates, forwards and writes responses.
 */
import type { TemplateMessage } from './tokenizer.js'
import type { ToolParserName } from '../core/config.js'
import type { Constraint } from './structured/constraint.js'

export type { Constraint, ConstraintKind } from './structured/constraint.js'

/** A chat request as the engine takes it: validated, sampling fields still null where the model's defaults apply. */
export interface GenerateRequest {
  id: string
  messages: TemplateMessage[]
  addGenerationPrompt: boolean
  continueFinalMessage: boolean
  addSpecialTokens: boolean
  /**
   * A prompt given as token ids (legacy completions): the engine takes these ids as they are, as vLLM does, instead
   * of rendering and encoding `messages` (which then only carry its text, for echo). null or absent: encode.
   */
  promptTokenIds?: number[] | null
  tools: unknown[] | null
  documents: unknown[] | null
  chatTemplate: string | null
  chatTemplateKwargs: Record<string, unknown> | null
  truncatePromptTokens: number | null
  n: number
  /** max_completion_tokens ?? max_tokens. */
  maxTokens: number | null
  temperature: number | null
  topP: number | null
  topK: number | null
  minP: number | null
  repetitionPenalty: number | null
  frequencyPenalty: number | null
  presencePenalty: number | null
  logitBias: [number, number][] | null
  minTokens: number
  allowedTokenIds: number[] | null
  badWords: string[]
  stop: string[]
  stopTokenIds: number[]
  includeStopStrInOutput: boolean
  ignoreEos: boolean
  skipSpecialTokens: boolean
  spacesBetweenSpecialTokens: boolean
  /** Top alternatives per token; null: no logprobs. */
  logprobs: number | null
  returnTokensAsTokenIds: boolean
  seed: number | null
  priority: number
  /** Send text as it is made (stop strings held back), or only at the end. */
  stream: boolean
  /** Top alternatives per prompt token; null: no prompt logprobs. */
  promptLogprobs: number | null
  /** Structured outputs: decoding is masked to this grammar; null: free. */
  constraint: Constraint | null
  /** Salts the prefix cache: only requests with the same salt (or both none) share cached blocks. */
  cacheSalt?: string | null
  /** Beam search (beam.ts) with `n` beams instead of sampling; null or absent: sampling. */
  beamSearch?: { lengthPenalty: number } | null
}

export type PromptLogprobs = (Record<string, { logprob: number; rank: number; decoded_token: string }> | null)[]

export interface TokenLogprob {
  token: string
  logprob: number
  bytes: number[] | null
  top_logprobs: { token: string; logprob: number; bytes: number[] | null }[]
}

/** New text of one choice: the tokens decoded since the last event. */
export interface ChoiceDelta {
  id: string
  choice: number
  text: string
  tokenIds: number[]
  logprobs: TokenLogprob[] | null
  completionTokens: number
}

export type WorkerEvent =
  | { type: 'ready'; model: ModelInfo }
  | { type: 'accepted'; id: string; promptTokens: number; promptIds: number[]; queuedMs: number }
  | ({ type: 'delta' } & ChoiceDelta)
  | ({ type: 'finish'; finishReason: 'stop' | 'length' | 'abort'; stopReason: string | number | null } & ChoiceDelta)
  | {
      type: 'done'
      id: string
      promptTokens: number
      completionTokens: number
      /** Prompt tokens taken from the prefix cache, not computed (the engine always sets it; 0 without a hit). */
      cachedTokens?: number
      promptLogprobs: PromptLogprobs | null
      timings: Timings
    }
  | { type: 'error'; id: string; status: number; message: string; param?: string | null }
  | { type: 'reply'; id: string; result?: unknown; error?: { status: number; message: string } }

export type WorkerCommand =
  | { type: 'generate'; req: GenerateRequest }
  | { type: 'cancel'; id: string }
  | {
      type: 'tokenize'
      id: string
      prompt?: string
      messages?: TemplateMessage[]
      addSpecialTokens: boolean
      addGenerationPrompt?: boolean
      continueFinalMessage?: boolean
      chatTemplate?: string | null
      chatTemplateKwargs?: Record<string, unknown> | null
      tools?: unknown[] | null
      returnTokenStrs: boolean
    }
  | { type: 'detokenize'; id: string; tokens: number[] }
  | { type: 'stats'; id: string }
  | { type: 'stop' }

export interface Timings {
  queued_ms: number
  prefill_ms: number
  time_to_first_token_ms: number
  /** Mean gap between tokens after the first, per choice averaged. */
  inter_token_ms: number
  total_ms: number
}

export interface ModelInfo {
  name: string
  root: string
  maxModelLen: number
  vocabSize: number
  backend: string
  /** Threads the backend computes with (wasm: XNNPACK's pool; 0: the backend's own choice). */
  threads: number
  /** Set when more wasm threads were asked for and the threaded build did not start (one thread runs instead). */
  threadsError?: string
  architecture: string
  parameters: number
  /** The tool-call parser the chat template's conventions call for (`<tool_call>` → hermes); null: unclear. */
  toolCallParser?: ToolParserName | null
}

/** What an engine holds right now. */
export interface EngineStats {
  running_requests: number
  waiting_requests: number
  running_sequences: number
  kv_positions_used: number
  kv_positions: number
  /** TF.js tensors alive in the worker (the model's weights; KV caches and cached blocks are plain arrays). */
  tensors: number
  /** Automatic prefix caching: on unless the server runs with --no-enable-prefix-caching. */
  prefix_cache: PrefixCacheStats | null
}

/** What the prefix cache has done and holds; blocks are of `block_tokens` positions. */
export interface PrefixCacheStats {
  block_tokens: number
  /** Prompt tokens looked up, and those found cached (hit_rate = hit / queried; 0 before any lookup). */
  queried_tokens: number
  hit_tokens: number
  hit_rate: number
  /** Blocks held by running requests, blocks kept (held or idle), and blocks the KV budget has room for. */
  blocks_in_use: number
  blocks_cached: number
  blocks_total: number
  /** Tensors the cached blocks hold (part of `tensors`): 0 since blocks are plain arrays; kept for the stats' shape. */
  tensors: number
}
