/**
 * The parts of one decoder layer, as nanoGPT's model.py names them: `attention` (its
 * CausalSelfAttention, here grouped-query with rotary embeddings and a KV cache), `mlp` (SwiGLU) and
 * `block` (pre-norm residual around both). They run inside the caller's tf.tidy.
 */
import * as tf from '@tensorflow/tfjs'
import type { Step } from './kv-cache.js'
import { attendAll, rotateRows, type Dims, type Rotation } from './attention.js'

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

export type { Dims, Rotation }

export function rmsNorm(x: tf.Tensor2D, w: tf.Tensor1D, eps: number): tf.Tensor2D {
  return tf.mul(tf.mul(x, tf.rsqrt(tf.add(tf.mean(tf.square(x), -1, true), eps))), w)
}

/** One layer over the stacked new tokens x [tokens, hidden] of all steps: x + attention(norm(x)), then + mlp(norm(x)). */
export function block(d: Dims, L: Layer, l: number, x: tf.Tensor2D, steps: readonly Step[], r: Rotation): tf.Tensor2D {
  const h = rmsNorm(x, L.inNorm, d.eps)
  x = tf.add(x, attention(d, L, l, h, steps, r))
  const h2 = rmsNorm(x, L.postNorm, d.eps)
  return tf.add(x, mlp(L, h2))
}

/** SwiGLU: down(silu(gate(h)) · up(h)), gate and up as one product. */
export function mlp(L: Layer, h: tf.Tensor2D): tf.Tensor2D {
  const [g, u] = tf.split(tf.matMul(h, L.gateUp), 2, 1)
  return tf.matMul(tf.mul(tf.mul(g!, tf.sigmoid(g!)), u!), L.down)
}

/**
 * Self-attention of layer l: q, k, v of all new tokens in one product, read back once; rotation,
 * the caches' writes and attention over them in attention.ts; then the output projection.
 */
export function attention(d: Dims, L: Layer, l: number, h: tf.Tensor2D, steps: readonly Step[], r: Rotation): tf.Tensor2D {
  const qkv = (L.bqkv ? tf.add(tf.matMul(h, L.wqkv), L.bqkv) : tf.matMul(h, L.wqkv)).dataSync() as Float32Array
  rotateRows(qkv, d, r)
  const attn = attendAll(d, l, qkv, steps)
  return tf.matMul(tf.tensor2d(attn, [h.shape[0], d.heads * d.headDim]), L.wo)
}
