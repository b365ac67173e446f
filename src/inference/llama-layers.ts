/**
 * The parts of one decoder layer, as nanoGPT's model.py names them: `attention` (its
 * CausalSelfAttention, here grouped-query with rotary embeddings and a KV cache), `mlp` (SwiGLU) and
 * `block` (pre-norm residual around both). They run inside the caller's tf.tidy.
 */
import * as tf from '@tensorflow/tfjs'
import type { KVCache, Step } from './kv-cache.js'

/** One decoder layer's weights. */
export interface Layer {
  inNorm: tf.Tensor1D
  postNorm: tf.Tensor1D
  /**
   * Projections stored transposed ([in, out]): x @ w. q, k and v are one product (their columns side
   * by side), as are gate and up: fewer, larger kernels per layer.
   */
  wqkv: tf.Tensor2D
  bqkv: tf.Tensor1D | null
  wo: tf.Tensor2D
  gateUp: tf.Tensor2D
  down: tf.Tensor2D
}

/** The shape every layer shares. */
export interface Dims {
  heads: number
  kvHeads: number
  headDim: number
  eps: number
}

/** Cosines and sines of the new positions' rotary angles, [tokens, 1, headDim]. */
export interface Rotation {
  cos: tf.Tensor3D
  sin: tf.Tensor3D
}

/** What a pass does to the caches: the tensors they now hold (they outlive the pass) and those they let go (freed after it). */
export interface CacheWrites {
  kept: tf.Tensor[]
  replaced: tf.Tensor[]
}

export function rmsNorm(x: tf.Tensor2D, w: tf.Tensor1D, eps: number): tf.Tensor2D {
  return tf.mul(tf.mul(x, tf.rsqrt(tf.add(tf.mean(tf.square(x), -1, true), eps))), w)
}

/** Rotary embedding of x [n, heads, headDim] at the given cos/sin [n, 1, headDim]. */
function rotate(x: tf.Tensor3D, r: Rotation, headDim: number): tf.Tensor3D {
  const half = headDim / 2
  const [a, b] = tf.split(x, [half, half], 2)
  const rotated = tf.concat([tf.neg(b!), a!], 2)
  return tf.add(tf.mul(x, r.cos), tf.mul(rotated, r.sin))
}

/** One layer over the stacked new tokens x [tokens, hidden] of all steps: x + attention(norm(x)), then + mlp(norm(x)). */
export function block(d: Dims, L: Layer, l: number, x: tf.Tensor2D, steps: Step[], r: Rotation, io: CacheWrites): tf.Tensor2D {
  const h = rmsNorm(x, L.inNorm, d.eps)
  x = tf.add(x, attention(d, L, l, h, steps, r, io))
  const h2 = rmsNorm(x, L.postNorm, d.eps)
  return tf.add(x, mlp(L, h2))
}

/** SwiGLU: down(silu(gate(h)) · up(h)), gate and up as one product. */
export function mlp(L: Layer, h: tf.Tensor2D): tf.Tensor2D {
  const [g, u] = tf.split(tf.matMul(h, L.gateUp), 2, 1)
  return tf.matMul(tf.mul(tf.mul(g!, tf.sigmoid(g!)), u!), L.down)
}

/**
 * Self-attention of layer l: q, k, v of all new tokens in one product, each step's keys and values
 * appended to its cache, each step attending over its own cache; returns the output projection.
 */
export function attention(d: Dims, L: Layer, l: number, h: tf.Tensor2D, steps: Step[], r: Rotation, io: CacheWrites): tf.Tensor2D {
  const D = d.headDim
  const qkv = (L.bqkv ? tf.add(tf.matMul(h, L.wqkv), L.bqkv) : tf.matMul(h, L.wqkv)).reshape([
    h.shape[0],
    d.heads + 2 * d.kvHeads,
    D,
  ]) as tf.Tensor3D
  // q and k heads rotate together, then part.
  const [qk, v] = tf.split(qkv, [d.heads + d.kvHeads, d.kvHeads], 1) as [tf.Tensor3D, tf.Tensor3D]
  const [q, k] = tf.split(rotate(qk, r, D), [d.heads, d.kvHeads], 1) as [tf.Tensor3D, tf.Tensor3D]
  const outs: tf.Tensor2D[] = []
  let at = 0
  for (const s of steps) {
    const n = s.tokens.length
    const [K, V] = appendKV(d, s.cache, l, k, v, at, n, io)
    outs.push(attend(d, q.slice([at, 0, 0], [n, d.heads, D]), K, V, s.cache.length))
    at += n
  }
  const attn = outs.length === 1 ? outs[0]! : (tf.concat(outs, 0) as tf.Tensor2D)
  return tf.matMul(attn, L.wo)
}

/** Appends rows [at, at + n) of k and v to the cache at layer l; returns the cache's keys and values now. */
function appendKV(
  d: Dims,
  cache: KVCache,
  l: number,
  k: tf.Tensor3D,
  v: tf.Tensor3D,
  at: number,
  n: number,
  io: CacheWrites,
): [tf.Tensor3D, tf.Tensor3D] {
  const D = d.headDim
  // [n, kvHeads, D] → [kvHeads, n, D]; for one token a reshape moves no data (one kernel fewer).
  const heads = (x: tf.Tensor3D) => (n === 1 ? x.reshape([d.kvHeads, 1, D]) : tf.transpose(x, [1, 0, 2])) as tf.Tensor3D
  const ks = heads(k.slice([at, 0, 0], [n, d.kvHeads, D]))
  const vs = heads(v.slice([at, 0, 0], [n, d.kvHeads, D]))
  const prevK = cache.keys[l]
  const prevV = cache.values[l]
  const K = prevK ? (tf.concat([prevK, ks], 1) as tf.Tensor3D) : ks
  const V = prevV ? (tf.concat([prevV, vs], 1) as tf.Tensor3D) : vs
  io.kept.push(K, V)
  if (prevK) io.replaced.push(prevK)
  if (prevV) io.replaced.push(prevV)
  cache.keys[l] = K
  cache.values[l] = V
  return [K, V]
}

/** Causal attention of q [n, heads, D] (positions from `past`) over K, V [kvHeads, past + n, D]; returns [n, heads × D]. */
function attend(d: Dims, q: tf.Tensor3D, K: tf.Tensor3D, V: tf.Tensor3D, past: number): tf.Tensor2D {
  const n = q.shape[0]
  const D = d.headDim
  const g = d.heads / d.kvHeads
  const S = past + n
  // Heads of one key/value group side by side: [kvHeads, g × n, D].
  const qg =
    n === 1 ? q.reshape([d.kvHeads, g, D]) : tf.transpose(q.reshape([n, d.kvHeads, g, D]), [1, 2, 0, 3]).reshape([d.kvHeads, g * n, D])
  let scores = tf.mul(tf.matMul(qg, K, false, true), 1 / Math.sqrt(D)).reshape([d.kvHeads, g, n, S])
  if (n > 1) {
    // Query i (at position past + i) sees keys up to past + i.
    const mask = tf.tidy(() => {
      const rows = tf.range(0, n, 1, 'int32').reshape([n, 1])
      const cols = tf.range(0, S, 1, 'int32').reshape([1, S])
      return tf.where(tf.lessEqual(cols, tf.add(rows, past)), tf.zeros([n, S]), tf.fill([n, S], -Infinity))
    })
    scores = tf.add(scores, mask)
  }
  const p = tf.softmax(scores).reshape([d.kvHeads, g * n, S])
  const o = tf.matMul(p, V).reshape([d.kvHeads, g, n, D])
  return (n === 1 ? o.reshape([1, d.heads * D]) : tf.transpose(o, [2, 0, 1, 3]).reshape([n, d.heads * D])) as tf.Tensor2D
}
