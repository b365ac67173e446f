/**
 * Causal attention of a block of new positions (a prompt chunk) over a long cache, as plain 2-D matrix products
 * on the TF.js backend, one key/value head at a time. The row-at-a-time JS loops of attention.ts suit decode
 * (one new position a sequence) and short prompts, but a chunk of n positions over S cached ones costs them
 * n × S scalar dot products per head: measured here (12 heads of 64, a 512-token chunk, quiet machine) 195 ms
 * a layer over S = 512, 536 ms over 1,000, 1.2 s over 2,048 and 5.4 s over 4,096; this path took 279, 294, 301
 * and 580 ms. Plain 2-D products run on the wasm backend's XNNPACK path; its batched products and a softmax in
 * JS over the read-back scores were both several times slower than that. Most of those ~280 ms a layer were the
 * read-backs into fresh arrays (see workspace.ts); into kept ones, CPU ms a layer by the SIMD rows / by products
 * (bench/attention-profile.ts, loaded machine): 512 after 0 cached, 55 / 81; 488 after 512, 133 / 73; 512 after
 * 3,584, 808 / 282 (~22 GFLOP/s, the backend's product rate).
 */
import * as tf from '@tensorflow/tfjs-core'
import type { KVCache } from './kv-cache.js'
import { Workspace, readInto } from './workspace.js'

/** A step attends by matrix products when it adds at least this many positions... */
export const BLOCK_MIN_TOKENS = 16
/** ...and its cache then spans at least this many (below, the rows are as fast or faster: a causal first chunk is half the work). */
export const BLOCK_MIN_SPAN = 768

/** The mask, the heads' packed rows and the products' results: kept from layer to layer and pass to pass. */
const kept = new Workspace()

/**
 * Rows [at, at + n) of qkv attending over the cache of layer l, whose first `past` positions precede them
 * (their own keys and values already written at [past, past + n)); into rows [at, at + n) of out.
 */
export function attendBlock(
  d: { heads: number; kvHeads: number; headDim: number },
  c: KVCache,
  l: number,
  qkv: Float32Array,
  at: number,
  n: number,
  past: number,
  out: Float32Array,
): void {
  const { heads: H, kvHeads: KV, headDim: D } = d
  const g = H / KV
  const W = KV * D
  const stride = (H + 2 * KV) * D
  const S = past + n
  // Position s is hidden from new row i when it comes after it: s > past + i.
  const mask = kept.get('mask', n * S).fill(0)
  for (let i = 0; i < n; i++) mask.fill(-Infinity, i * S + past + i + 1, (i + 1) * S)
  const masked = tf.tensor2d(mask, [n, S])
  const qh = kept.get('q', g * n * D)
  const kT = kept.get('kT', D * S)
  const vh = kept.get('v', S * D)
  const o = kept.get('o', g * n * D)
  const K = c.keys[l]!
  const V = c.values[l]!
  const scale = 1 / Math.sqrt(D)
  try {
    for (let kv = 0; kv < KV; kv++) {
      // The g query heads sharing key/value head kv, stacked as rows [g × n, D]; its keys as [D, S], values [S, D].
      for (let j = 0; j < g; j++)
        for (let i = 0; i < n; i++) {
          const from = (at + i) * stride + (kv * g + j) * D
          qh.set(qkv.subarray(from, from + D), (j * n + i) * D)
        }
      for (let s = 0; s < S; s++) {
        const from = s * W + kv * D
        for (let e = 0; e < D; e++) kT[e * S + s] = K[from + e]!
        vh.set(V.subarray(from, from + D), s * D)
      }
      const y = tf.tidy(() => {
        const scores = tf.mul(tf.matMul(tf.tensor2d(qh, [g * n, D]), tf.tensor2d(kT, [D, S])), scale)
        const p = tf.reshape(tf.softmax(tf.add(tf.reshape(scores, [g, n, S]), masked)), [g * n, S])
        return tf.matMul(p, tf.tensor2d(vh, [S, D]))
      })
      // Read into a kept array: a fresh one per read-back (dataSync) costs far more than the copy beside the model's heap.
      readInto(y, o)
      y.dispose()
      for (let j = 0; j < g; j++)
        for (let i = 0; i < n; i++) out.set(o.subarray((j * n + i) * D, (j * n + i + 1) * D), ((at + i) * H + kv * g + j) * D)
    }
  } finally {
    masked.dispose()
  }
}
