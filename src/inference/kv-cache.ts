/**
 * The keys and values a sequence has computed so far, per layer, position-major ([capacity, kvHeads ×
 * headDim] in one Float32Array), in JS memory. New positions are written in place (no copy of the
 * whole cache per token, as a concatenation of immutable tensors costs), and the arrays grow by
 * doubling. Outside the wasm heap, a freed cache goes back to the system (the wasm heap never shrinks).
 */
export class KVCache {
  keys: Float32Array[] = []
  values: Float32Array[] = []
  length = 0
  /** Positions the arrays have room for. */
  capacity = 0

  constructor(
    readonly layers: number,
    /** Floats per position: kvHeads × headDim. */
    readonly width: number,
  ) {}

  /** Room for `n` positions past the current length; the arrays grow (by doubling), keeping their contents. */
  reserve(n: number): void {
    const need = this.length + n
    if (need <= this.capacity) return
    const cap = Math.max(need, 2 * this.capacity, 64)
    const grow = (a: Float32Array | undefined) => {
      const b = new Float32Array(cap * this.width)
      if (a) b.set(a.subarray(0, this.length * this.width))
      return b
    }
    for (let l = 0; l < this.layers; l++) {
      this.keys[l] = grow(this.keys[l])
      this.values[l] = grow(this.values[l])
    }
    this.capacity = cap
  }

  /** An independent copy of the filled positions (the n choices of a request, beams). */
  clone(): KVCache {
    const c = new KVCache(this.layers, this.width)
    c.reserve(this.length)
    for (let l = 0; l < this.layers; l++) {
      c.keys[l]!.set(this.keys[l]!.subarray(0, this.length * this.width))
      c.values[l]!.set(this.values[l]!.subarray(0, this.length * this.width))
    }
    c.length = this.length
    return c
  }

  dispose(): void {
    this.keys = []
    this.values = []
    this.length = 0
    this.capacity = 0
  }
}

/** One sequence's part of a forward pass: its new tokens, its cache, and whether logits of every new position are wanted (else the last only). */
export interface Step {
  tokens: number[]
  cache: KVCache
  allLogits?: boolean
}
