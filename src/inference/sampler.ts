/**
 * Token sampling with vLLM's processors in vLLM's order (reference §8): raw logprobs captured first,
 * then allowed_token_ids, bad_words, min_tokens, logit_bias, the repetition/frequency/presence
 * penalties, greedy argmax or temperature, min_p, top_k, top_p, and a draw from the result.
 */
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

export interface Sampled {
  token: number
  /** Raw log probability of the token (before any processing), when logprobs were asked for. */
  logprob?: number
  /** The token's rank in the raw distribution (1: most likely). */
  rank?: number
  top?: [number, number][]
}

export const GREEDY_BELOW = 1e-5

/** xoshiro128** seeded through splitmix64: one stream per (request, choice). */
export class Rng {
  private s = new Uint32Array(4)

  constructor(seed: bigint) {
    let x = BigInt.asUintN(64, seed)
    const next = () => {
      x = BigInt.asUintN(64, x + 0x9e3779b97f4a7c15n)
      let z = x
      z = BigInt.asUintN(64, (z ^ (z >> 30n)) * 0xbf58476d1ce4e5b9n)
      z = BigInt.asUintN(64, (z ^ (z >> 27n)) * 0x94d049bb133111ebn)
      return z ^ (z >> 31n)
    }
    for (let i = 0; i < 4; i += 2) {
      const v = next()
      this.s[i] = Number(v & 0xffffffffn)
      this.s[i + 1] = Number(v >> 32n)
    }
  }

  /** A uniform draw in [0, 1). */
  next(): number {
    const s = this.s
    const r = Math.imul(rotl(Math.imul(s[1]!, 5), 7), 9) >>> 0
    const t = (s[1]! << 9) >>> 0
    s[2]! ^= s[0]!
    s[3]! ^= s[1]!
    s[1]! ^= s[2]!
    s[0]! ^= s[3]!
    s[2]! ^= t
    s[3] = rotl(s[3]!, 11)
    return r / 4294967296
  }
}

const rotl = (x: number, k: number) => ((x << k) | (x >>> (32 - k))) >>> 0

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
export function topK(x: Float32Array, k: number): [number, number][] {
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
    const V = logits.length
    if (p.allowedTokenIds) for (let i = 0; i < V; i++) if (!p.allowedTokenIds.has(i)) logits[i] = -Infinity
    for (const word of p.badWords) {
      const prefix = word.length - 1
      if (prefix > output.length) continue
      let match = true
      for (let j = 0; j < prefix && match; j++) match = output[output.length - prefix + j] === word[j]
      if (match) logits[word[prefix]!] = -Infinity
    }
    if (output.length < p.minTokens) for (const id of p.stopIds) if (id < V) logits[id] = -Infinity
    if (p.logitBias) for (const [id, b] of p.logitBias) if (id < V) logits[id]! += b
    if (p.repetitionPenalty !== 1) {
      for (const id of this.seen) {
        if (id >= V) continue
        const v = logits[id]!
        logits[id] = v > 0 ? v / p.repetitionPenalty : v * p.repetitionPenalty
      }
    }
    if (p.frequencyPenalty !== 0 || p.presencePenalty !== 0) {
      for (const [id, n] of this.counts) if (id < V) logits[id]! -= p.frequencyPenalty * n + p.presencePenalty
    }
    let token: number
    if (this.greedy) {
      token = 0
      for (let i = 1; i < V; i++) if (logits[i]! > logits[token]!) token = i
    } else token = this.draw(logits)
    this.seen.add(token)
    this.counts.set(token, (this.counts.get(token) ?? 0) + 1)
    if (!raw) return { token }
    const lp = raw[token]!
    let rank = 1
    for (let i = 0; i < V; i++) if (raw[i]! > lp) rank++
    return { token, logprob: lp, rank, top: topK(raw, p.logprobs!) }
  }

  /** Temperature, min_p, top_k, top_p, then one categorical draw. */
  private draw(logits: Float32Array): number {
    const p = this.params
    const V = logits.length
    const t = Math.max(p.temperature, 0.01)
    let max = -Infinity
    for (let i = 0; i < V; i++) {
      logits[i]! /= t
      if (logits[i]! > max) max = logits[i]!
    }
    if (max === -Infinity) return 0
    if (p.minP > 0) {
      // p_i < min_p · p_max  ⇔  logit_i < max + ln(min_p)
      const floor = max + Math.log(p.minP)
      for (let i = 0; i < V; i++) if (logits[i]! < floor) logits[i] = -Infinity
    }
    // Candidates sorted by logit, largest first; top_k keeps ties with the k-th.
    const order: number[] = []
    for (let i = 0; i < V; i++) if (logits[i]! > -Infinity) order.push(i)
    order.sort((a, b) => logits[b]! - logits[a]! || a - b)
    let keep = order.length
    if (p.topK > 0 && p.topK < keep) {
      const kth = logits[order[p.topK - 1]!]!
      keep = p.topK
      while (keep < order.length && logits[order[keep]!]! === kth) keep++
    }
    const probs = new Float64Array(keep)
    let sum = 0
    for (let j = 0; j < keep; j++) sum += probs[j] = Math.exp(logits[order[j]!]! - max)
    if (p.topP < 1) {
      // Keep the smallest top set whose mass reaches top_p (the most likely token always).
      let mass = 0
      let j = 0
      for (; j < keep; j++) {
        mass += probs[j]! / sum
        if (mass >= p.topP) {
          j++
          break
        }
      }
      keep = Math.max(1, Math.min(keep, j))
      sum = 0
      for (let i = 0; i < keep; i++) sum += probs[i]!
    }
    let u = this.rng.next() * sum
    for (let j = 0; j < keep; j++) {
      u -= probs[j]!
      if (u < 0) return order[j]!
    }
    return order[keep - 1]!
  }
}
