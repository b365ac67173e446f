/** xoshiro128** seeded through splitmix64: one stream per (request, choice). */
export class Rng {
  private s = new Uint32Array(4)

  constructor(seed: bigint) {
    let x = BigInt.asUintN(64, seed)
    const next = () => {
      x = BigInt.asUintN(64, x + 0x9e3779b97f4a7c15n)
      let z = x
      z = BigInt.asUintN(64, (z ^ (z >> 30n)) * 0xbf58476d1ce4e5b9n)
      z = BigInt.asUintN(64, (z ^ (z >> 27n)) * 0x94d049bb133111ebn)
      return z ^ (z >> 31n)
    }
    for (let i = 0; i < 4; i += 2) {
      const v = next()
      this.s[i] = Number(v & 0xffffffffn)
      this.s[i + 1] = Number(v >> 32n)
    }
  }

  /** A uniform draw in [0, 1). */
  next(): number {
    const s = this.s
    const r = Math.imul(rotl(Math.imul(s[1]!, 5), 7), 9) >>> 0
    const t = (s[1]! << 9) >>> 0
    s[2]! ^= s[0]!
    s[3]! ^= s[1]!
    s[1]! ^= s[2]!
    s[0]! ^= s[3]!
    s[2]! ^= t
    s[3] = rotl(s[3]!, 11)
    return r / 4294967296
  }
}

const rotl = (x: number, k: number) => ((x << k) | (x >>> (32 - k))) >>> 0
