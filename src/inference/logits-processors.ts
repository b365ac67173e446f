/**
 * The logits processors every request runs, each a small function that changes the logits in place.
 * LOGITS_PROCESSORS lists them in the order they run.
 */
import type { SamplingParams } from './sampling-params.js'

/** What a processor may read besides the logits. */
export interface SamplingContext {
  params: SamplingParams
  /** The tokens generated so far. */
  output: readonly number[]
  /** Tokens of prompt and output (the repetition penalty's set). */
  seen: ReadonlySet<number>
  /** Output token id → times generated (the frequency and presence penalties'). */
  counts: ReadonlyMap<number, number>
}

export type LogitsProcessor = (logits: Float32Array, ctx: SamplingContext) => void

/** allowed_token_ids: every other token is impossible. */
export function allowedTokenIds(logits: Float32Array, { params: p }: SamplingContext): void {
  if (p.allowedTokenIds) for (let i = 0; i < logits.length; i++) if (!p.allowedTokenIds.has(i)) logits[i] = -Infinity
}

/** bad_words: the last token of a word is impossible when the output ends with the rest of it. */
export function badWords(logits: Float32Array, { params: p, output }: SamplingContext): void {
  for (const word of p.badWords) {
    const prefix = word.length - 1
    if (prefix > output.length) continue
    let match = true
    for (let j = 0; j < prefix && match; j++) match = output[output.length - prefix + j] === word[j]
    if (match) logits[word[prefix]!] = -Infinity
  }
}

/** min_tokens: end-of-sequence and stop token ids are impossible until the output has min_tokens. */
export function minTokens(logits: Float32Array, { params: p, output }: SamplingContext): void {
  const V = logits.length
  if (output.length < p.minTokens) for (const id of p.stopIds) if (id < V) logits[id] = -Infinity
}

/** logit_bias: added to the named tokens' logits. */
export function logitBias(logits: Float32Array, { params: p }: SamplingContext): void {
  const V = logits.length
  if (p.logitBias) for (const [id, b] of p.logitBias) if (id < V) logits[id]! += b
}

/** repetition_penalty: a token of prompt or output has its logit divided by it (positive) or multiplied (negative). */
export function repetitionPenalty(logits: Float32Array, { params: p, seen }: SamplingContext): void {
  if (p.repetitionPenalty === 1) return
  const V = logits.length
  for (const id of seen) {
    if (id >= V) continue
    const v = logits[id]!
    logits[id] = v > 0 ? v / p.repetitionPenalty : v * p.repetitionPenalty
  }
}

/** frequency_penalty × times generated + presence_penalty, subtracted from each generated token's logit. */
export function frequencyPresencePenalties(logits: Float32Array, { params: p, counts }: SamplingContext): void {
  if (p.frequencyPenalty === 0 && p.presencePenalty === 0) return
  const V = logits.length
  for (const [id, n] of counts) if (id < V) logits[id]! -= p.frequencyPenalty * n + p.presencePenalty
}

/**
 * The order is vLLM v1's Sampler (vllm/v1/sample/sampler.py, its steps 3 to 6): allowed token ids,
 * bad words, the processors that can change the argmax (min_tokens, then logit_bias), then the
 * penalties (repetition, frequency, presence). Raw logprobs are taken before all of them (see
 * Sampler.sample); after them comes the argmax (greedy) or random-sampling.ts: temperature, min_p,
 * top_k, top_p, then the draw. It is also the order weft has always used, and seeded outputs depend
 * on it (logit_bias before the repetition penalty gives (x + b) / r, not x / r + b): keep it.
 */
export const LOGITS_PROCESSORS: readonly LogitsProcessor[] = [
  allowedTokenIds,
  badWords,
  minTokens,
  logitBias,
  repetitionPenalty,
  frequencyPresencePenalties,
]

/**
 * The structured-output mask (xgrammar's bitmask: bit i set when token i may come next) makes every
 * other token impossible. It runs before everything else, raw logprobs included (vLLM's step 0), so
 * it is not in LOGITS_PROCESSORS: the engine applies it to the logits it hands the sampler.
 */
export function applyTokenMask(logits: Float32Array, mask: Int32Array): void {
  const V = logits.length
  for (let w = 0; w < mask.length; w++) {
    const bits = mask[w]!
    if (bits === -1) continue
    const end = Math.min(V, (w + 1) << 5)
    for (let i = w << 5; i < end; i++) if ((bits & (1 << (i & 31))) === 0) logits[i] = -Infinity
  }
}

/** Greedy: the first largest logit. */
export function argmax(logits: Float32Array): number {
  let token = 0
  for (let i = 1; i < logits.length; i++) if (logits[i]! > logits[token]!) token = i
  return token
}
