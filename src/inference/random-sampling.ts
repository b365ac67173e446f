/**
 * Random sampling, after the logits processors, for temperatures from GREEDY_BELOW up, as vLLM's
 * Sampler.sample does it: temperature, min_p, top_k, top_p, then one categorical draw. Each step is
 * its own function; drawToken runs them in that order.
 */
import type { Rng } from './rng.js'
import type { SamplingParams } from './sampling-params.js'

/** Divides the logits by the temperature (at least 0.01); returns the largest scaled logit. */
export function temperature(logits: Float32Array, temp: number): number {
  const V = logits.length
  const t = Math.max(temp, 0.01)
  let max = -Infinity
  for (let i = 0; i < V; i++) {
    logits[i]! /= t
    if (logits[i]! > max) max = logits[i]!
  }
  return max
}

/** min_p: drops the tokens less likely than min_p times the most likely one (whose logit is `max`). */
export function minP(logits: Float32Array, max: number, minP: number): void {
  if (minP <= 0) return
  // p_i < min_p · p_max  ⇔  logit_i < max + ln(min_p)
  const floor = max + Math.log(minP)
  for (let i = 0; i < logits.length; i++) if (logits[i]! < floor) logits[i] = -Infinity
}

/** The tokens still possible, sorted by logit, largest first (ties: lower id first). */
export function rank(logits: Float32Array): number[] {
  const order: number[] = []
  for (let i = 0; i < logits.length; i++) if (logits[i]! > -Infinity) order.push(i)
  order.sort((a, b) => logits[b]! - logits[a]! || a - b)
  return order
}

/** top_k: how many of the ranked tokens stay (all when k is 0); ties with the k-th stay too. */
export function topK(logits: Float32Array, order: readonly number[], k: number): number {
  let keep = order.length
  if (k > 0 && k < keep) {
    const kth = logits[order[k - 1]!]!
    keep = k
    while (keep < order.length && logits[order[keep]!]! === kth) keep++
  }
  return keep
}

/** The unnormalised probabilities exp(logit − max) of the first `keep` ranked tokens. */
export function weigh(logits: Float32Array, order: readonly number[], keep: number, max: number): Float64Array {
  const probs = new Float64Array(keep)
  for (let j = 0; j < keep; j++) probs[j] = Math.exp(logits[order[j]!]! - max)
  return probs
}

/** Sum of the first `keep` weights, in order. */
export function total(probs: Float64Array, keep: number): number {
  let sum = 0
  for (let j = 0; j < keep; j++) sum += probs[j]!
  return sum
}

/** top_p: how many of the weighted tokens stay: the smallest top set whose mass reaches top_p (the most likely token always). */
export function topP(probs: Float64Array, sum: number, topP: number): number {
  if (topP >= 1) return probs.length
  let mass = 0
  let j = 0
  for (; j < probs.length; j++) {
    mass += probs[j]! / sum
    if (mass >= topP) {
      j++
      break
    }
  }
  return Math.max(1, Math.min(probs.length, j))
}

/** One categorical draw over the first `keep` weights (summing to `sum`) with the uniform u in [0, 1). */
export function draw(order: readonly number[], probs: Float64Array, keep: number, sum: number, u: number): number {
  let left = u * sum
  for (let j = 0; j < keep; j++) {
    left -= probs[j]!
    if (left < 0) return order[j]!
  }
  return order[keep - 1]!
}

/** Temperature, min_p, top_k, top_p, then one draw from the rng (logits changed in place). */
export function drawToken(logits: Float32Array, p: SamplingParams, rng: Pick<Rng, 'next'>): number {
  const max = temperature(logits, p.temperature)
  if (max === -Infinity) return 0
  minP(logits, max, p.minP)
  const order = rank(logits)
  let keep = topK(logits, order, p.topK)
  const probs = weigh(logits, order, keep, max)
  let sum = total(probs, keep)
  if (p.topP < 1) {
    keep = topP(probs, sum, p.topP)
    sum = total(probs, keep)
  }
  return draw(order, probs, keep, sum, rng.next())
}
