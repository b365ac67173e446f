import t from 'tap'
import { chooseBackend } from '../src/inference/worker.js'
import { attendAll, byBlock } from '../src/inference/attention.js'
import { KVCache } from '../src/inference/kv-cache.js'
import { rng } from './helpers/rng.js'

// Prompt chunks over a long cache attend by matrix products (attention-block.ts), the rest row by row in JS. Both
// must give causal grouped-query attention: checked here against a plain float64 attention written out below.
type Dims = { heads: number; kvHeads: number; headDim: number; eps: number }
const d: Dims = { heads: 4, kvHeads: 2, headDim: 16, eps: 1e-6 }
const W = d.kvHeads * d.headDim
const STRIDE = (d.heads + 2 * d.kvHeads) * d.headDim

/** Causal GQA by its definition: new row i sees cached positions 0 … past + i. */
function reference(keys: Float32Array, values: Float32Array, qkv: Float32Array, past: number, n: number, d: Dims): Float64Array {
  const D = d.headDim
  const W = d.kvHeads * D
  const STRIDE = (d.heads + 2 * d.kvHeads) * D
  const out = new Float64Array(n * d.heads * D)
  for (let i = 0; i < n; i++)
    for (let h = 0; h < d.heads; h++) {
      const kv = Math.floor(h / (d.heads / d.kvHeads))
      const seen = past + i + 1
      const w: number[] = []
      for (let s = 0; s < seen; s++) {
        let dot = 0
        for (let e = 0; e < D; e++) dot += qkv[i * STRIDE + h * D + e]! * keys[s * W + kv * D + e]!
        w.push(dot / Math.sqrt(D))
      }
      const max = Math.max(...w)
      const ex = w.map((x) => Math.exp(x - max))
      const sum = ex.reduce((a, b) => a + b, 0)
      for (let s = 0; s < seen; s++)
        for (let e = 0; e < D; e++) out[(i * d.heads + h) * D + e] += (ex[s]! / sum) * values[s * W + kv * D + e]!
    }
  return out
}

t.test('causal grouped-query attention, by matrix products and by rows', async (t) => {
  t.equal(await chooseBackend('wasm').then((b) => b.startsWith('wasm')), true, 'the wasm backend, as the engine runs')
  const r = rng(7)
  for (const [past, n] of [
    [0, 800],
    [700, 100],
    [1500, 17],
    [760, 8],
    [40, 30],
  ] as const) {
    const cache = new KVCache(1, W)
    cache.reserve(past + n)
    for (let i = 0; i < past * W; i++) {
      cache.keys[0]![i] = r() * 2 - 1
      cache.values[0]![i] = r() * 2 - 1
    }
    cache.length = past
    const qkv = Float32Array.from({ length: n * STRIDE }, () => r() * 2 - 1)
    const step = { tokens: new Array<number>(n).fill(0), cache }
    const block = byBlock(step)
    const got = attendAll(d, 0, qkv, [step])
    // The new keys and values are in the cache now: the reference reads them from there, as the model does.
    const want = reference(cache.keys[0]!, cache.values[0]!, qkv, past, n, d)
    let worst = 0
    for (let i = 0; i < want.length; i++) worst = Math.max(worst, Math.abs(got[i]! - want[i]!))
    t.ok(worst < 1e-5, `${n} positions after ${past} (${block ? 'matrix products' : 'rows'}): max |Δ| ${worst.toExponential(1)}`)
  }
  t.ok(byBlock({ tokens: new Array(100).fill(0), cache: { length: 700 } } as never), 'a chunk over a long cache goes by products')
  t.notOk(byBlock({ tokens: new Array(8).fill(0), cache: { length: 4000 } } as never), 'a few new positions go by rows')
})

t.test('rows whose head size is not a multiple of 16 (no SIMD kernel): the JS loops', async (t) => {
  await chooseBackend('wasm')
  const e: Dims = { heads: 6, kvHeads: 3, headDim: 8, eps: 1e-6 }
  const w = e.kvHeads * e.headDim
  const r = rng(11)
  const cache = new KVCache(1, w)
  cache.reserve(45)
  for (let i = 0; i < 40 * w; i++) {
    cache.keys[0]![i] = r() * 2 - 1
    cache.values[0]![i] = r() * 2 - 1
  }
  cache.length = 40
  const qkv = Float32Array.from({ length: 5 * (e.heads + 2 * e.kvHeads) * e.headDim }, () => r() * 2 - 1)
  const got = attendAll(e, 0, qkv, [{ tokens: [0, 0, 0, 0, 0], cache }])
  const want = reference(cache.keys[0]!, cache.values[0]!, qkv, 40, 5, e)
  let worst = 0
  for (let i = 0; i < want.length; i++) worst = Math.max(worst, Math.abs(got[i]! - want[i]!))
  t.ok(worst < 1e-5, `5 positions after 40, head size 8: max |Δ| ${worst.toExponential(1)}`)
})
