/**
 * The parts of one decoder layer, as nanoGPT's model.py names them: `attention` (its
 * CausalSelfAttention, here grouped-query with rotary embeddings and a KV cache), `mlp` (SwiGLU) and
 * `block` (pre-norm residual around both). The residual stream stays in JS memory between the weight
 * products (rows × hidden floats): the norms and residual adds run here instead of as ~20 small TF.js
 * kernels a layer, whose dispatch (~30 µs each on the shared machine) was a quarter of a one-stream decode
 * step on the 101M model (bench/decode-profile.ts). The TF.js backend does the products and SwiGLU.
 */
import * as tf from '@tensorflow/tfjs-core'
import type { Step } from './kv-cache.js'
import { attendAll, rotateRows, type Dims, type Rotation } from './attention.js'
import { readInto, type Workspace } from './workspace.js'

/** One decoder layer's weights. */
export interface Layer {
  inNorm: Float32Array
  postNorm: Float32Array
  /**
   * Projections stored transposed ([in, out]): x @ w. q, k and v are one product (their columns side
   * by side), as are gate and up: fewer, larger kernels per layer.
   */
  wqkv: tf.Tensor2D
  bqkv: Float32Array | null
  wo: tf.Tensor2D
  gateUp: tf.Tensor2D
  down: tf.Tensor2D
}

export type { Dims, Rotation }
export { Workspace, readInto } from './workspace.js'

/** The rows of x ([rows, w.length]) RMS-normalized and scaled by w, into out; sums in float64. */
export function rmsNorm(x: Float32Array, w: Float32Array, eps: number, out: Float32Array): Float32Array {
  const H = w.length
  for (let o = 0; o < x.length; o += H) {
    let ss = 0
    for (let i = o; i < o + H; i++) ss += x[i]! * x[i]!
    const r = 1 / Math.sqrt(ss / H + eps)
    for (let i = 0; i < H; i++) out[o + i] = x[o + i]! * r * w[i]!
  }
  return out
}

/** x ([rows, in]) @ w ([in, out]) on the backend, into out. */
export function product(x: Float32Array, w: tf.Tensor2D, out: Float32Array): Float32Array {
  const y = tf.tidy(() => tf.matMul(tf.tensor2d(x, [x.length / w.shape[0], w.shape[0]]), w))
  try {
    return readInto(y, out)
  } finally {
    y.dispose()
  }
}

/** x += y, element by element. */
function addInPlace(x: Float32Array, y: Float32Array): Float32Array {
  for (let i = 0; i < x.length; i++) x[i] += y[i]!
  return x
}

/** Every row of x += b. */
function addToRows(x: Float32Array, b: Float32Array): void {
  for (let o = 0; o < x.length; o += b.length) for (let i = 0; i < b.length; i++) x[o + i] += b[i]!
}

/** One layer over the stacked new tokens x [tokens, hidden] of all steps, in place: x + attention(norm(x)), then + mlp(norm(x)). */
export function block(d: Dims, L: Layer, l: number, x: Float32Array, steps: readonly Step[], r: Rotation, ws: Workspace): Float32Array {
  addInPlace(x, attention(d, L, l, rmsNorm(x, L.inNorm, d.eps, ws.get('h', x.length)), steps, r, ws))
  return addInPlace(x, mlp(L, rmsNorm(x, L.postNorm, d.eps, ws.get('h', x.length)), ws.get('mlp', x.length)))
}

/** SwiGLU: down(silu(gate(h)) · up(h)), gate and up as one product; into out. */
export function mlp(L: Layer, h: Float32Array, out: Float32Array): Float32Array {
  const H = L.gateUp.shape[0]
  const y = tf.tidy(() => {
    const [g, u] = tf.split(tf.matMul(tf.tensor2d(h, [h.length / H, H]), L.gateUp), 2, 1)
    return tf.matMul(tf.mul(tf.mul(g!, tf.sigmoid(g!)), u!), L.down)
  })
  try {
    return readInto(y, out)
  } finally {
    y.dispose()
  }
}

/**
 * Self-attention of layer l: q, k, v of all new tokens in one product; rotation, the caches' writes
 * and attention over them in attention.ts; then the output projection.
 */
export function attention(d: Dims, L: Layer, l: number, h: Float32Array, steps: readonly Step[], r: Rotation, ws: Workspace): Float32Array {
  const rows = h.length / L.wqkv.shape[0]
  const qkv = product(h, L.wqkv, ws.get('qkv', rows * L.wqkv.shape[1]))
  if (L.bqkv) addToRows(qkv, L.bqkv)
  rotateRows(qkv, d, r)
  const attn = attendAll(d, l, qkv, steps, ws.get('attn', rows * d.heads * d.headDim))
  return product(attn, L.wo, ws.get('o', rows * L.wo.shape[1]))
}
