/**
 * Arrays kept from one forward pass to the next, and read-backs into them. A fresh ArrayBuffer per product
 * read-back cost up to ~70 ms each beside the model's large wasm heap (measured: [64, 1280] read into a new
 * array 78 ms CPU, into a kept one 4 ms), so results are written into arrays that are kept instead.
 */
import * as tf from '@tensorflow/tfjs-core'

/** Arrays reused by name, grown when a pass needs more. */
export class Workspace {
  private readonly arrays = new Map<string, Float32Array>()
  get(name: string, n: number): Float32Array {
    let a = this.arrays.get(name)
    if (!a || a.length < n) this.arrays.set(name, (a = new Float32Array(Math.max(n, 2 * (a?.length ?? 0)))))
    return a.subarray(0, n)
  }
}

/** A float32 tensor's values in the wasm heap, viewed in place (no copy); null on another backend. */
function heapView(t: tf.Tensor): Float32Array | null {
  const b = tf.backend() as unknown as { dataIdMap?: { get(id: object): { memoryOffset: number } }; wasm?: { HEAPU8: Uint8Array } }
  if (!b.wasm || !b.dataIdMap || t.dtype !== 'float32') return null
  return new Float32Array(b.wasm.HEAPU8.buffer, b.dataIdMap.get(t.dataId).memoryOffset, t.size)
}

/** A tensor's values copied into `out`: straight from the wasm heap where it lives there (no array made). */
export function readInto(t: tf.Tensor, out: Float32Array): Float32Array {
  out.set(heapView(t) ?? (t.dataSync() as Float32Array))
  return out
}

/**
 * Rows `ids` of a 2-D tensor (the embedding) into `out`, copied straight from the wasm heap where it lives there.
 * A gather kernel for a 512-token prompt chunk took 15 ms alone and ~400 ms CPU a chunk inside a long prefill
 * (bench/decode-profile.ts --prefill), for 1.5 MB of rows.
 */
export function gatherInto(t: tf.Tensor2D, ids: readonly number[], out: Float32Array): Float32Array {
  const W = t.shape[1]
  const rows = heapView(t)
  if (rows) {
    ids.forEach((id, i) => out.set(rows.subarray(id * W, (id + 1) * W), i * W))
    return out
  }
  const e = tf.tidy(() => tf.gather(t, tf.tensor1d(ids as number[], 'int32')))
  readInto(e, out)
  e.dispose()
  return out
}
