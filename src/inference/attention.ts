/**
 * Rotary embeddings and causal grouped-query attention over the KV caches, in plain JS on the rows
 * of the q/k/v product. TF.js has no kernel for attention over ragged caches: done with tensors, each
 * sequence costs ~16 kernel dispatches a layer (slices, a concatenation copying its whole cache,
 * two small batched products on the backend's slow path), which at 16–64 streams cost more than the
 * weight products. Here a layer reads the q/k/v product once, writes the new keys and values into
 * each cache in place, and hands back one array for the output projection. Sums are in float64.
 */
import { attendBlock, BLOCK_MIN_SPAN, BLOCK_MIN_TOKENS } from './attention-block.js'
import type { KVCache, Step } from './kv-cache.js'
import { AttentionKernels } from './attention-simd.js'

/** The shape every layer shares. */
export interface Dims {
  heads: number
  kvHeads: number
  headDim: number
  eps: number
}

/** Cosines and sines of the new positions' rotary angles, [tokens, headDim / 2] each (both halves use the same). */
export interface Rotation {
  cos: Float64Array
  sin: Float64Array
}

/** The rotation of each position (YaRN's attention factor folded into cos and sin). */
export function rotationOf(positions: readonly number[], invFreq: Float32Array, scale: number): Rotation {
  const half = invFreq.length
  const cos = new Float64Array(positions.length * half)
  const sin = new Float64Array(positions.length * half)
  positions.forEach((p, t) => {
    for (let i = 0; i < half; i++) {
      const a = Math.fround(p * invFreq[i]!)
      cos[t * half + i] = Math.cos(a) * scale
      sin[t * half + i] = Math.sin(a) * scale
    }
  })
  return { cos, sin }
}

/**
 * Rotates, in place, the q and k heads of the rows of a q/k/v product ([tokens, (heads + 2 kvHeads) ×
 * headDim]): Hugging Face's rotate-half, x·cos + rotate_half(x)·sin.
 */
export function rotateRows(qkv: Float32Array, d: Dims, r: Rotation): void {
  const D = d.headDim
  const half = D / 2
  const stride = (d.heads + 2 * d.kvHeads) * D
  const rotated = d.heads + d.kvHeads
  const tokens = qkv.length / stride
  for (let t = 0; t < tokens; t++) {
    const at = t * half
    for (let h = 0; h < rotated; h++) {
      const o = t * stride + h * D
      for (let i = 0; i < half; i++) {
        const a = qkv[o + i]!
        const b = qkv[o + i + half]!
        const c = r.cos[at + i]!
        const s = r.sin[at + i]!
        qkv[o + i] = a * c - b * s
        qkv[o + i + half] = b * c + a * s
      }
    }
  }
}

/**
 * Attention of layer l for every step: each step's new keys and values (rows [at, at + n) of qkv)
 * written into its cache at its current length, then each new position attending causally over its
 * cache. Returns [tokens, heads × headDim] (in `out` when given).
 */
export function attendAll(
  d: Dims,
  l: number,
  qkv: Float32Array,
  steps: readonly Step[],
  out: Float32Array = new Float32Array(steps.reduce((s, x) => s + x.tokens.length, 0) * d.heads * d.headDim),
): Float32Array {
  const longest = steps.reduce((m, s) => (byBlock(s) ? m : Math.max(m, s.cache.length + s.tokens.length)), 0)
  const scratch = new Float64Array(longest)
  let at = 0
  for (const s of steps) {
    writeKV(d, s.cache, l, qkv, at, s.tokens.length)
    if (byBlock(s)) attendBlock(d, s.cache, l, qkv, at, s.tokens.length, s.cache.length, out)
    else attendRows(d, s.cache, l, qkv, at, s.tokens.length, out, scratch)
    at += s.tokens.length
  }
  return out
}

/**
 * Rows [at, at + n) of qkv over the cache of layer l (its keys and values already written; the first row sees its
 * length + 1 positions), one row at a time. By the SIMD kernels when the head size allows: the cache's keys and
 * values copied into their memory once, then per row the scores, a softmax here (float64), and the weighted
 * values. Else by the JS loops (`scratch` holds a row's scores).
 */
export function attendRows(
  d: Dims,
  c: KVCache,
  l: number,
  qkv: Float32Array,
  at: number,
  n: number,
  out: Float32Array,
  scratch: Float64Array = new Float64Array(c.length + n),
): void {
  const k = d.headDim % 16 === 0 ? AttentionKernels.get() : null
  if (!k) {
    for (let i = 0; i < n; i++) attendRow(d, c, l, qkv, at + i, c.length + i + 1, out, scratch)
    return
  }
  const { heads: H, kvHeads: KV, headDim: D } = d
  const W = KV * D
  const stride = (H + 2 * KV) * D
  const span = c.length + n
  // Layout (floats): q [H × D], output [H × D], scores [H × span], keys and values [span × W] each.
  const qAt = 0
  const oAt = H * D
  const pAt = 2 * H * D
  const kAt = pAt + H * span
  const vAt = kAt + span * W
  const m = k.reserve(vAt + span * W)
  m.set(c.keys[l]!.subarray(0, span * W), kAt)
  m.set(c.values[l]!.subarray(0, span * W), vAt)
  const scale = 1 / Math.sqrt(D)
  for (let i = 0; i < n; i++) {
    const S = c.length + i + 1
    const row = (at + i) * stride
    m.set(qkv.subarray(row, row + H * D), qAt)
    k.scores(qAt * 4, kAt * 4, pAt * 4, S, H, H / KV, W, D)
    for (let h = 0; h < H; h++) softmaxInPlace(m, pAt + h * S, S, scale)
    k.weighted(pAt * 4, vAt * 4, oAt * 4, S, H, H / KV, W, D)
    out.set(m.subarray(oAt, oAt + H * D), (at + i) * H * D)
  }
}

/** p[from, from + n) ← softmax(scale · p), computed in float64. */
function softmaxInPlace(p: Float32Array, from: number, n: number, scale: number): void {
  let max = -Infinity
  for (let s = from; s < from + n; s++) if (p[s]! > max) max = p[s]!
  let sum = 0
  for (let s = from; s < from + n; s++) {
    const e = Math.exp((p[s]! - max) * scale)
    p[s] = e
    sum += e
  }
  for (let s = from; s < from + n; s++) p[s] = p[s]! / sum
}

/** Whether a step's attention runs as matrix products (attention-block.ts): a prompt chunk over a long cache. */
export const byBlock = (s: Step): boolean => s.tokens.length >= BLOCK_MIN_TOKENS && s.cache.length + s.tokens.length >= BLOCK_MIN_SPAN

/** Rows [at, at + n) of the k and v parts of qkv into the cache at positions [length, length + n) (room reserved). */
function writeKV(d: Dims, c: KVCache, l: number, qkv: Float32Array, at: number, n: number): void {
  const W = d.kvHeads * d.headDim
  const stride = (d.heads + 2 * d.kvHeads) * d.headDim
  const kFrom = d.heads * d.headDim
  for (let i = 0; i < n; i++) {
    const row = (at + i) * stride
    c.keys[l]!.set(qkv.subarray(row + kFrom, row + kFrom + W), (c.length + i) * W)
    c.values[l]!.set(qkv.subarray(row + kFrom + W, row + kFrom + 2 * W), (c.length + i) * W)
  }
}

/**
 * Every query head of qkv row `t` over the first `S` cached positions, into row t of out. The loops
 * run over contiguous rows, four products at a time (V8 keeps these in registers): ~2× the plain loop.
 */
function attendRow(d: Dims, c: KVCache, l: number, qkv: Float32Array, t: number, S: number, out: Float32Array, p: Float64Array): void {
  const D = d.headDim
  const W = d.kvHeads * D
  const g = d.heads / d.kvHeads
  const stride = (d.heads + 2 * d.kvHeads) * D
  const K = c.keys[l]!
  const V = c.values[l]!
  const scale = 1 / Math.sqrt(D)
  const acc = new Float64Array(D)
  for (let h = 0; h < d.heads; h++) {
    const q = t * stride + h * D
    const kv = Math.floor(h / g) * D
    let max = -Infinity
    for (let s = 0; s < S; s++) {
      const dot = dot4(qkv, q, K, s * W + kv, D) * scale
      p[s] = dot
      if (dot > max) max = dot
    }
    let sum = 0
    for (let s = 0; s < S; s++) sum += p[s] = Math.exp(p[s]! - max)
    acc.fill(0)
    for (let s = 0; s < S; s++) axpy4(acc, p[s]!, V, s * W + kv, D)
    const o = (t * d.heads + h) * D
    for (let e = 0; e < D; e++) out[o + e] = acc[e]! / sum
  }
}

/** a[i..i+n) · b[j..j+n). */
function dot4(a: Float32Array, i: number, b: Float32Array, j: number, n: number): number {
  let s0 = 0
  let s1 = 0
  let s2 = 0
  let s3 = 0
  const m = n & ~3
  for (let e = m; e < n; e++) s0 += a[i + e]! * b[j + e]!
  for (let e = 0; e < m; e += 4) {
    s0 += a[i + e]! * b[j + e]!
    s1 += a[i + e + 1]! * b[j + e + 1]!
    s2 += a[i + e + 2]! * b[j + e + 2]!
    s3 += a[i + e + 3]! * b[j + e + 3]!
  }
  return s0 + s1 + s2 + s3
}

/** acc[0..n) += w · b[j..j+n). */
function axpy4(acc: Float64Array, w: number, b: Float32Array, j: number, n: number): void {
  const m = n & ~3
  for (let e = m; e < n; e++) acc[e] += w * b[j + e]!
  for (let e = 0; e < m; e += 4) {
    acc[e] += w * b[j + e]!
    acc[e + 1] += w * b[j + e + 1]!
    acc[e + 2] += w * b[j + e + 2]!
    acc[e + 3] += w * b[j + e + 3]!
  }
}
