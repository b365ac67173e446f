import type * as tf from '@tensorflow/tfjs'

/** The keys and values a sequence has computed so far, per layer: [kv heads, length, head dim]. */
export class KVCache {
  keys: (tf.Tensor3D | null)[]
  values: (tf.Tensor3D | null)[]
  length = 0

  constructor(layers: number) {
    this.keys = new Array(layers).fill(null)
    this.values = new Array(layers).fill(null)
  }

  dispose(): void {
    for (const t of [...this.keys, ...this.values]) t?.dispose()
    this.keys.fill(null)
    this.values.fill(null)
    this.length = 0
  }
}

/** One sequence's part of a forward pass: its new tokens, its cache, and whether logits of every new position are wanted (else the last only). */
export interface Step {
  tokens: number[]
  cache: KVCache
  allLogits?: boolean
}
