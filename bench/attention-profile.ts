/**
 * One layer's attention alone, for prompt chunks (issue 17): n new positions after `past` cached ones, with the
 * 101M bench model's heads (12 query heads, 4 key/value heads of 64), by the two paths attention.ts chooses
 * between: row by row (the SIMD kernels of attention-simd.ts) and as matrix products (attention-block.ts).
 *   node dist/bench/attention-profile.js [--chunks 512:0,488:512,512:512,512:1536,512:3584] [--repeat 3]
 * Prints per chunk and path min / median / max wall ms and CPU ms, GFLOP/s (causal work: the products' share
 * that is not masked), and the largest difference between the two paths' outputs.
 */
import os from 'node:os'
import { parseFlags } from '../src/core/config.js'
import { chooseBackend } from '../src/inference/worker.js'
import { attendRows } from '../src/inference/attention.js'
import { attendBlock } from '../src/inference/attention-block.js'
import { KVCache } from '../src/inference/kv-cache.js'
import { spread } from './util.js'

const { flags } = parseFlags(process.argv.slice(2))
const CHUNKS = (flags.chunks ?? '512:0,488:512,512:512,512:1536,512:3584')
  .split(',')
  .map((p) => p.split(':').map(Number) as [number, number])
const REPEAT = Number(flags.repeat ?? 3)
const d = { heads: 12, kvHeads: 4, headDim: 64, eps: 1e-6 }
const W = d.kvHeads * d.headDim
const STRIDE = (d.heads + 2 * d.kvHeads) * d.headDim

/** A fixed pseudo-random stream in [-1, 1). */
function noise(seed: number): () => number {
  let x = seed
  return () => ((x = (x * 1103515245 + 12345) % 2 ** 31), x / 2 ** 30 - 1)
}

/** Wall and CPU ms of f. */
function timed(f: () => void): { wall: number; cpu: number } {
  const c0 = process.cpuUsage()
  const t0 = performance.now()
  f()
  const wall = performance.now() - t0
  const c = process.cpuUsage(c0)
  return { wall, cpu: (c.user + c.system) / 1000 }
}

async function main(): Promise<void> {
  console.log(`backend ${await chooseBackend('wasm')}; load ${os.loadavg().map((x) => x.toFixed(1))}`)
  for (const [n, past] of CHUNKS) {
    const r = noise(n * 7919 + past)
    const cache = new KVCache(1, W)
    cache.reserve(past + n)
    // The chunk's own keys and values are in the cache already, as attendAll writes them before attending.
    for (let i = 0; i < (past + n) * W; i++) {
      cache.keys[0]![i] = r()
      cache.values[0]![i] = r()
    }
    cache.length = past
    const qkv = Float32Array.from({ length: n * STRIDE }, r)
    const rows = new Float32Array(n * d.heads * d.headDim)
    const block = new Float32Array(n * d.heads * d.headDim)
    const t: Record<string, { wall: number; cpu: number }[]> = { rows: [], block: [] }
    for (let k = 0; k < REPEAT; k++) {
      t.rows!.push(timed(() => attendRows(d, cache, 0, qkv, 0, n, rows)))
      t.block!.push(timed(() => attendBlock(d, cache, 0, qkv, 0, n, past, block)))
    }
    let worst = 0
    for (let i = 0; i < rows.length; i++) worst = Math.max(worst, Math.abs(rows[i]! - block[i]!))
    // q·k and the weighted values over the positions each row sees: 4 × D flops a (head, position) pair.
    const gflop = (4 * d.headDim * d.heads * (n * past + (n * (n + 1)) / 2)) / 1e9
    const line = Object.entries(t).map(([path, xs]) => {
      const w = spread(xs.map((x) => x.wall))
      const c = spread(xs.map((x) => x.cpu))
      return `${path} ${w.min.toFixed(0)}/${w.median.toFixed(0)}/${w.max.toFixed(0)} ms wall, ${c.median.toFixed(0)} ms CPU, ${(gflop / (w.min / 1000)).toFixed(1)} GFLOP/s`
    })
    console.log(`${n} new after ${past}: ${line.join('; ')}; max |Δ| ${worst.toExponential(1)}; load ${os.loadavg()[0]!.toFixed(1)}`)
  }
}

await main()
