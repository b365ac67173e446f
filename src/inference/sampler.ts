/**
 * Token sampling with vLLM's processors in vLLM's order (docs/chat.md): raw logprobs captured first,
 * then the logits processors (logits-processors.ts: allowed_token_ids, bad_words, min_tokens,
 * logit_bias, the repetition/frequency/presence penalties), then greedy argmax or random sampling
 * (random-sampling.ts: temperature, min_p, top_k, top_p, and a draw from the result).
 */
import { LOGITS_PROCESSORS, argmax, type SamplingContext } from './logits-processors.js'
import { drawToken } from './random-sampling.js'
import type { Rng } from './rng.js'
import { GREEDY_BELOW, type SamplingParams } from './sampling-params.js'

export interface Sampled {
  token: number
  /** Raw log probability of the token (before any processing), when logprobs were asked for. */
  logprob?: number
  /** The token's rank in the raw distribution (1: most likely). */
  rank?: number
  top?: [number, number][]
}

/** log-softmax of x into a new array. */
export function logSoftmax(x: Float32Array): Float32Array {
  let max = -Infinity
  for (const v of x) if (v > max) max = v
  let sum = 0
  for (const v of x) sum += Math.exp(v - max)
  const lse = max + Math.log(sum)
  const out = new Float32Array(x.length)
  for (let i = 0; i < x.length; i++) out[i] = x[i]! - lse
  return out
}

/** The k largest entries of x as [index, value], largest first (ties: lower index first). */
export function largest(x: Float32Array, k: number): [number, number][] {
  if (k <= 0) return []
  const out: [number, number][] = []
  for (let i = 0; i < x.length; i++) {
    const v = x[i]!
    if (out.length === k && v <= out[k - 1]![1]) continue
    let j = out.length < k ? out.length : k - 1
    if (out.length < k) out.push([i, v])
    while (j > 0 && out[j - 1]![1] < v) {
      out[j] = out[j - 1]!
      j--
    }
    out[j] = [i, v]
  }
  return out
}

/** The token's raw log probability, its rank among all (1: most likely) and the k most likely. */
function rawLogprob(raw: Float32Array, token: number, k: number): Required<Omit<Sampled, 'token'>> {
  const lp = raw[token]!
  let rank = 1
  for (let i = 0; i < raw.length; i++) if (raw[i]! > lp) rank++
  return { logprob: lp, rank, top: largest(raw, k) }
}

/** One sequence's sampler: its parameters, its random stream, and what it has produced so far. */
export class Sampler {
  private readonly rng: Rng
  /** Tokens of prompt and output (the repetition penalty's set). */
  private readonly seen: Set<number>
  private readonly counts = new Map<number, number>()

  constructor(
    readonly params: SamplingParams,
    prompt: readonly number[],
    rng: Rng,
  ) {
    this.rng = rng
    this.seen = new Set(prompt)
  }

  get greedy(): boolean {
    return this.params.temperature < GREEDY_BELOW
  }

  /** Picks the next token from the model's logits (modified in place) given the output so far. */
  sample(logits: Float32Array, output: readonly number[]): Sampled {
    const p = this.params
    const raw = p.logprobs !== null ? logSoftmax(logits) : null
    const ctx: SamplingContext = { params: p, output, seen: this.seen, counts: this.counts }
    for (const process of LOGITS_PROCESSORS) process(logits, ctx)
    const token = this.greedy ? argmax(logits) : drawToken(logits, p, this.rng)
    this.seen.add(token)
    this.counts.set(token, (this.counts.get(token) ?? 0) + 1)
    if (!raw) return { token }
    return { token, ...rawLogprob(raw, token, p.logprobs!) }
  }
}
