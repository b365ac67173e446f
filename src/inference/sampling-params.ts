/** What a request asks of the sampler, resolved against the model's defaults (see request.ts). */
export interface SamplingParams {
  temperature: number
  topP: number
  /** 0: off. */
  topK: number
  minP: number
  repetitionPenalty: number
  frequencyPenalty: number
  presencePenalty: number
  /** Token id → bias, already clamped to [-100, 100]. */
  logitBias: Map<number, number> | null
  minTokens: number
  allowedTokenIds: Set<number> | null
  /** Token sequences that must not be completed. */
  badWords: number[][]
  /** Ids blocked until min_tokens: end-of-sequence and stop token ids. */
  stopIds: number[]
  /** Top alternatives to report per position (0: the sampled token's only); null: no logprobs. */
  logprobs: number | null
  seed: number | null
}

/** Below this temperature a request is greedy (vLLM's _SAMPLING_EPS). */
export const GREEDY_BELOW = 1e-5
