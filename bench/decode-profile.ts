/**
 * Where a decode step's time goes, in-process (no server, no HTTP): the bench's 101M model on the wasm
 * backend, one worker thread's work. Each of B sequences is prefilled with an 81-token prompt, then
 * decode steps of all B run through the same layers as LlamaModel.forward, each phase timed (wall
 * and this thread's CPU time, which is what the shared machine disturbs least):
 *   node dist/bench/decode-profile.js [--batches 1,16,64] [--steps 8] [--prompt 81] [--model 100m|tiny] [--prefill 1000,4000] [--chunk 512] [--check false]
 * With --prefill (and --batches= for prefill only): the cold prefill of prompts of those lengths, chunk by chunk, phase by phase.
 * Phases: weight products (q/k/v, o, gate/up, down, head; each with its upload and read-back), rotation,
 * attention and the cache writes, norms and residual adds (JS), SwiGLU (TF.js), greedy sampling.
 * A final check runs the same steps through model.forward and compares tokens and time per step.
 */
import os from 'node:os'
import path from 'node:path'
import { mkdtempSync, rmSync } from 'node:fs'
import * as tf from '@tensorflow/tfjs'
import { parseFlags } from '../src/core/config.js'
import { makeTinyModel } from '../src/fixtures/tiny-model.js'
import { loadModel, chooseBackend } from '../src/inference/worker.js'
import { rotationOf, rotateRows, attendAll, byBlock } from '../src/inference/attention.js'
import { product, readInto, rmsNorm, type Layer, type Workspace } from '../src/inference/llama-layers.js'
import { gatherInto } from '../src/inference/workspace.js'
import { argmax } from '../src/inference/logits-processors.js'
import type { KVCache, Step } from '../src/inference/kv-cache.js'
import type { LlamaModel } from '../src/inference/llama.js'

const { flags } = parseFlags(process.argv.slice(2))
const BATCHES = (flags.batches ?? '1,16,64').split(',').filter(Boolean).map(Number)
const STEPS = Number(flags.steps ?? 8)
const PROMPT = Number(flags.prompt ?? 81)
// Prompt lengths whose cold prefill is profiled (time to first token in-process), in chunks as the engine's default.
const PREFILL = flags.prefill ? flags.prefill.split(',').map(Number) : []
const CHUNK = Number(flags.chunk ?? 512)
// --check false: the prefill is not run a second time through model.forward (long prompts on a loaded machine).
const CHECK = flags.check !== 'false'
const SHAPES = {
  tiny: {},
  '100m': { hidden: 768, layers: 16, heads: 12, kvHeads: 4, intermediate: 2048, seed: 100 },
}

/** Time by phase: wall ms and CPU ms of this thread. */
class Phases {
  wall = new Map<string, number>()
  cpu = new Map<string, number>()
  time<T>(name: string, f: () => T): T {
    const c0 = process.cpuUsage()
    const t0 = performance.now()
    const r = f()
    const dt = performance.now() - t0
    const c = process.cpuUsage(c0)
    this.wall.set(name, (this.wall.get(name) ?? 0) + dt)
    this.cpu.set(name, (this.cpu.get(name) ?? 0) + (c.user + c.system) / 1000)
    return r
  }
}

// The model's private parts, read as the profile needs them (the layers as llama.ts runs them).
interface Inside {
  dims: { heads: number; kvHeads: number; headDim: number; eps: number }
  embed: tf.Tensor2D
  head: tf.Tensor2D
  layers: Layer[]
  norm: Float32Array
  invFreq: Float32Array
  ropeScale: number
  workspace: Workspace
}

/**
 * One forward pass over the steps (a decode step: one token of each sequence; a prefill chunk: one step of many
 * tokens), phase by phase: the same operations as LlamaModel.forward with block(). Returns the greedy token of
 * each step's last position.
 */
function step(model: LlamaModel, steps: Step[], ph: Phases): number[] {
  const m = model as unknown as Inside
  const d = m.dims
  const tokens = steps.flatMap((s) => s.tokens)
  for (const s of steps) s.cache.reserve(s.tokens.length)
  const rotation = ph.time('rotation', () =>
    rotationOf(
      steps.flatMap((s) => s.tokens.map((_, i) => s.cache.length + i)),
      m.invFreq,
      m.ropeScale,
    ),
  )
  const H = m.embed.shape[1]
  const B = tokens.length
  const ws = m.workspace
  const sum = (x: Float32Array, y: Float32Array) => {
    for (let i = 0; i < x.length; i++) x[i] += y[i]!
  }
  // Prompt chunks over a long cache attend by products (attention-block.ts): timed apart from the rows.
  const attention = steps.some(byBlock) ? 'attention (block products)' : 'attention'
  let x = ws.get('x', B * H)
  ph.time('embed', () => gatherInto(m.embed, tokens, x))
  for (const [l, L] of m.layers.entries()) {
    const h = ph.time('norms, adds (JS)', () => rmsNorm(x, L.inNorm, d.eps, ws.get('h', B * H)))
    const qkv = ph.time('product q/k/v', () => product(h, L.wqkv, ws.get('qkv', B * L.wqkv.shape[1])))
    ph.time('rotation', () => rotateRows(qkv, d, rotation))
    const attn = ph.time(attention, () => attendAll(d, l, qkv, steps, ws.get('attn', B * d.heads * d.headDim)))
    const o = ph.time('product o', () => product(attn, L.wo, ws.get('o', B * H)))
    const h2 = ph.time('norms, adds (JS)', () => {
      sum(x, o)
      return rmsNorm(x, L.postNorm, d.eps, ws.get('h', B * H))
    })
    const y = tf.tidy(() => {
      const gu = ph.time('product gate/up', () => tf.matMul(tf.tensor2d(h2, [B, H]), L.gateUp))
      const act = ph.time('SwiGLU (TF.js)', () => {
        const [g, u] = tf.split(gu, 2, 1)
        return tf.mul(tf.mul(g!, tf.sigmoid(g!)), u!)
      })
      return ph.time('product down', () => tf.matMul(act, L.down))
    })
    const down = ph.time('product down', () => readInto(y, ws.get('mlp', B * H)))
    y.dispose()
    ph.time('norms, adds (JS)', () => sum(x, down))
  }
  // Logits of each step's last position only, as forward computes them.
  if (steps.length < B)
    x = ph.time('norms, adds (JS)', () => {
      const last = ws.get('picked', steps.length * H)
      let at = 0
      steps.forEach((s, i) => last.set(x.subarray((at += s.tokens.length) * H - H, at * H), i * H))
      return last
    })
  const n = ph.time('norms, adds (JS)', () => rmsNorm(x, m.norm, d.eps, ws.get('h', x.length)))
  const logits = ph.time('product head', () => product(n, m.head, new Float32Array(steps.length * model.vocabSize)))
  for (const s of steps) s.cache.length += s.tokens.length
  const V = model.vocabSize
  return ph.time('sampling (greedy)', () => steps.map((_, i) => argmax(logits.subarray(i * V, (i + 1) * V))))
}

/** One token of each sequence. */
const decode = (tokens: number[], caches: KVCache[]): Step[] => tokens.map((t, i) => ({ tokens: [t], cache: caches[i]! }))

/** The phases of a table, costliest first: CPU ms and wall ms per `per`, and the share of CPU. */
function report(ph: Phases, per: number): Record<string, number> {
  const total = [...ph.cpu.values()].reduce((a, b) => a + b, 0)
  const row: Record<string, number> = {}
  for (const [name, c] of [...ph.cpu.entries()].sort((a, b) => b[1] - a[1])) {
    const w = ph.wall.get(name)! / per
    row[name] = c / per
    console.log(
      `  ${name.padEnd(26)} ${(c / per).toFixed(2).padStart(9)} ms CPU ${w.toFixed(2).padStart(9)} ms wall ${((100 * c) / total).toFixed(1).padStart(5)} %`,
    )
  }
  return row
}

/** Prompt token ids of a given length from a seed, as bench/inference.ts makes them for --ttft. */
function promptOf(n: number, seed: number): number[] {
  let x = seed
  return Array.from({ length: n }, () => ((x = (x * 1103515245 + 12345) % 2 ** 31), 3 + (x % 300)))
}

/**
 * Time to first token of an n-token prompt in-process, cold (no prefix cache): its chunks through the phases,
 * then the same chunks through model.forward (what the engine runs), the first tokens compared.
 */
function prefill(model: LlamaModel, n: number): Record<string, number> {
  const prompt = promptOf(n, n)
  const chunks: number[][] = []
  for (let i = 0; i < n; i += CHUNK) chunks.push(prompt.slice(i, i + CHUNK))
  const ph = new Phases()
  const t0 = performance.now()
  const c0 = process.cpuUsage()
  const cache = model.newCache()
  let first = -1
  for (const c of chunks) [first] = ph.time('(chunk)', () => step(model, [{ tokens: c, cache }], ph))
  const wall = performance.now() - t0
  const cu = process.cpuUsage(c0)
  cache.dispose()
  ph.cpu.delete('(chunk)')
  ph.wall.delete('(chunk)')
  let forward = ''
  let fwall = 0
  let fcpu = 0
  if (CHECK) {
    const t1 = performance.now()
    const c1 = process.cpuUsage()
    const check = model.newCache()
    let logits: Float32Array | undefined
    for (const c of chunks) [logits] = model.forward([{ tokens: c, cache: check }])
    fwall = performance.now() - t1
    const fc = process.cpuUsage(c1)
    fcpu = (fc.user + fc.system) / 1000
    check.dispose()
    forward = ` model.forward: ${fwall.toFixed(0)} ms wall, ${fcpu.toFixed(0)} ms CPU, first token ${argmax(logits!) === first ? 'the same' : 'DIFFERENT'};`
  }
  console.log(
    `\nprefill ${n} tokens in ${chunks.length} chunks of ${CHUNK}: ${wall.toFixed(0)} ms wall, ${((cu.user + cu.system) / 1000).toFixed(0)} ms CPU;` +
      `${forward} load ${os.loadavg()[0]!.toFixed(1)}`,
  )
  return { ...report(ph, 1), wall_ms: wall, cpu_ms: (cu.user + cu.system) / 1000, forward_wall_ms: fwall, forward_cpu_ms: fcpu }
}

async function main(): Promise<void> {
  const backend = await chooseBackend('wasm')
  const dir = mkdtempSync(path.join(os.tmpdir(), 'weft-profile-'))
  const shape = (flags.model ?? '100m') as keyof typeof SHAPES
  await makeTinyModel(dir, SHAPES[shape])
  const { model } = await loadModel(dir)
  rmSync(dir, { recursive: true, force: true })
  const prompt = Array.from({ length: PROMPT }, (_, i) => (i * 37 + 11) % 300)
  console.log(
    `backend ${backend}, model ${shape}, prompt ${PROMPT}, ${STEPS} timed steps after 2 warm-up; load ${os.loadavg().map((x) => x.toFixed(1))}`,
  )
  const rows: Record<string, Record<string, number>> = {}
  for (const B of BATCHES) {
    const first = model.newCache()
    const [pl] = model.forward([{ tokens: prompt, cache: first }])
    const caches = Array.from({ length: B }, () => first.clone())
    first.dispose()
    let tokens = caches.map(() => argmax(pl!))
    const warm = new Phases()
    for (let i = 0; i < 2; i++) tokens = step(model, decode(tokens, caches), warm)
    const ph = new Phases()
    const t0 = performance.now()
    const c0 = process.cpuUsage()
    for (let i = 0; i < STEPS; i++) tokens = step(model, decode(tokens, caches), ph)
    const wall = (performance.now() - t0) / STEPS
    const cu = process.cpuUsage(c0)
    const cpu = (cu.user + cu.system) / 1000 / STEPS
    // The same number of steps through model.forward itself: what the engine runs.
    const t1 = performance.now()
    const c1 = process.cpuUsage()
    let check = tokens
    for (let i = 0; i < STEPS; i++) check = model.forward(decode(check, caches)).map((o) => argmax(o))
    const fwall = (performance.now() - t1) / STEPS
    const fc = process.cpuUsage(c1)
    for (const c of caches) c.dispose()
    console.log(
      `\nB = ${B}: ${wall.toFixed(1)} ms wall, ${cpu.toFixed(1)} ms CPU a step (${((B * 1000) / wall).toFixed(0)} tok/s wall);` +
        ` model.forward: ${fwall.toFixed(1)} ms wall, ${((fc.user + fc.system) / 1000 / STEPS).toFixed(1)} ms CPU; load ${os.loadavg()[0]!.toFixed(1)}`,
    )
    rows[B] = report(ph, STEPS)
  }
  if (PREFILL.length) {
    // A first chunk warms the products' and attention's code and the heap for chunk-sized arrays.
    prefill(model, CHUNK)
    for (const n of PREFILL) rows[`prefill ${n}`] = prefill(model, n)
  }
  console.log('\n' + JSON.stringify(rows))
  model.dispose()
}

await main()
