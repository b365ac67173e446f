/**
 * Seeded randomness for reproducible runs: the same --seed gives the same prompts, lengths and arrival
 * times. A small PRNG (mulberry32) is enough: the draws shape load, they guard nothing.
 */
export class Rng {
  private s: number
  constructor(seed: number) {
    this.s = seed >>> 0
  }

  /** Uniform in [0, 1). */
  next(): number {
    let t = (this.s = (this.s + 0x6d2b79f5) >>> 0)
    t = Math.imul(t ^ (t >>> 15), t | 1)
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61)
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296
  }

  /** An integer in [lo, hi], both included (numpy's `integers(lo, hi + 1)`). */
  int(lo: number, hi: number): number {
    return lo + Math.floor(this.next() * (hi - lo + 1))
  }

  normal(): number {
    const u = 1 - this.next()
    return Math.sqrt(-2 * Math.log(u)) * Math.cos(2 * Math.PI * this.next())
  }

  /** Gamma(shape, scale) by Marsaglia and Tsang; shapes below 1 through the boost `x · U^(1/shape)`. */
  gamma(shape: number, scale: number): number {
    if (shape < 1) return this.gamma(shape + 1, scale) * Math.pow(this.next(), 1 / shape)
    const d = shape - 1 / 3
    const c = 1 / Math.sqrt(9 * d)
    for (;;) {
      let x: number
      let v: number
      do {
        x = this.normal()
        v = 1 + c * x
      } while (v <= 0)
      v = v * v * v
      const u = this.next()
      if (u < 1 - 0.0331 * x ** 4 || Math.log(u) < 0.5 * x * x + d * (1 - v + Math.log(v))) return d * v * scale
    }
  }
}

/**
 * When each request is sent, in seconds from the start, as vLLM draws them: gaps from a gamma distribution
 * of shape `burstiness` and scale `1 / (rate · burstiness)` (burstiness 1: a Poisson process); rate ∞: all at 0.
 */
export function arrivalTimes(n: number, rate: number, burstiness: number, rng: Rng): number[] {
  const out: number[] = []
  let t = 0
  for (let i = 0; i < n; i++) {
    out.push(t)
    if (Number.isFinite(rate)) t += rng.gamma(burstiness, 1 / (rate * burstiness))
  }
  return out
}

/** A time-ordered id (UUIDv7 layout), so traced calls sort by when they were made. */
export function uuidv7(ms = Date.now()): string {
  const b = new Uint8Array(16)
  crypto.getRandomValues(b)
  let t = ms
  for (let i = 5; i >= 0; i--) {
    b[i] = t % 256
    t = Math.floor(t / 256)
  }
  b[6] = (b[6]! & 0x0f) | 0x70
  b[8] = (b[8]! & 0x3f) | 0x80
  const h = Buffer.from(b).toString('hex')
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-${h.slice(12, 16)}-${h.slice(16, 20)}-${h.slice(20)}`
}
