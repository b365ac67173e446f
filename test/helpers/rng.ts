/** A small deterministic PRNG (xorshift32) in [0, 1), so a failing case can be replayed from its seed. */
export function rng(seed: number): () => number {
  let x = seed >>> 0 || 1
  return () => {
    x ^= x << 13
    x ^= x >>> 17
    x ^= x << 5
    return (x >>> 0) / 2 ** 32
  }
}
