/**
 * Chat inference: weft (TF.js, one worker per model) against llama.cpp (node-llama-cpp, in this
 * process) on the same weights, for the built-in tiny model and a ~100M-parameter Llama model.
 *   npm --prefix bench/peer-deps install         # node-llama-cpp, kept out of weft's own install
 *   node dist/bench/inference.js [--models tiny,100m] [--concurrency 1,4,16,64] [--tokens 64] [--runs 3] [--replicas N] [--inference-threads N] [--llama-threads N] [--ttft 1000,4000]
 * Per model: single-stream time to first token and decode tokens/s, then aggregate tokens/s with
 * 1, 4, 16 and 64 streams at once; greedy, end-of-sequence ignored, the same prompt token ids on
 * both sides. Before timing, both sides' greedy tokens are checked equal (the same model). Runs
 * alternate between the two. With --ttft, per prompt length: weft's time to first token cold and on a
 * prefix-cache hit (the same prompt again), and llama.cpp's cold. Writes bench/results/inference-<stamp>.json and .svg.
 */
import { mkdirSync, mkdtempSync, rmSync, statSync, writeFileSync } from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { parseFlags } from '../src/core/config.js'
import { ROOT_DIR, VERSION } from '../src/core/version.js'
import { makeTinyModel, type TinyModelOptions } from '../src/fixtures/tiny-model.js'
import { sizeChart } from './chart.js'
import { writeGguf } from './gguf.js'
import { spread, startWeft } from './util.js'

const { flags } = parseFlags(process.argv.slice(2))
const MODELS: Record<string, TinyModelOptions> = {
  tiny: {},
  '100m': { hidden: 768, layers: 16, heads: 12, kvHeads: 4, intermediate: 2048, seed: 100 },
}
const models = (flags.models ?? 'tiny,100m').split(',')
const levels = (flags.concurrency ?? '1,4,16,64').split(',').map(Number)
const TOKENS = Number(flags.tokens ?? 64)
const RUNS = Number(flags.runs ?? 3)
const TTFT = flags.ttft ? flags.ttft.split(',').map(Number) : []
// One wasm worker computes on one core; llama.cpp uses every core: weft runs a replica per core.
const REPLICAS = Number(flags.replicas ?? os.cpus().length)
// wasm threads per replica (--inference-threads); unset: the server's default.
const THREADS = flags['inference-threads']
const KEY = 'bench-key'
const messages = [
  { role: 'system', content: 'You are a helpful assistant.' },
  { role: 'user', content: 'Tell me about looms, weaving and the history of cloth, briefly.' },
]

/** The part of node-llama-cpp's API used here (it lives in bench/peer-deps, outside weft's types). */
interface LlamaSequence {
  clearHistory(): Promise<void>
  evaluate(tokens: number[], opts: { temperature: number }): AsyncIterable<number>
}
interface LlamaApi {
  // createContext takes { threads, sequences, contextSize, batchSize }.
  getLlama(o: Record<string, unknown>): Promise<{
    loadModel(o: { modelPath: string }): Promise<{
      createContext(o: Record<string, unknown>): Promise<{ getSequence(): LlamaSequence; dispose(): Promise<void> }>
      dispose(): Promise<void>
    }>
  }>
}
// eslint-disable-next-line @typescript-eslint/no-explicit-any
type Json = any

interface Sample {
  ttft_ms: number
  decode_tps: number
}

async function main(): Promise<void> {
  const { getLlama } = (await import(
    path.join(ROOT_DIR, 'bench', 'peer-deps', 'node_modules', 'node-llama-cpp', 'dist', 'index.js')
  )) as LlamaApi
  const llama = await getLlama({ gpu: false, build: 'never', logLevel: 'error' })
  const results: Record<string, unknown> = {}
  const curve: Record<string, { weft: (number | null)[]; llama: (number | null)[] }> = {}
  for (const name of models) {
    const dir = mkdtempSync(path.join(os.tmpdir(), 'weft-infer-'))
    const modelDir = path.join(dir, 'model')
    await makeTinyModel(modelDir, MODELS[name])
    const gguf = path.join(dir, 'model.gguf')
    await writeGguf(modelDir, gguf)
    const params = Math.round(statSync(path.join(modelDir, 'model.safetensors')).size / 4)
    const server = await startWeft({
      root: ROOT_DIR,
      dataDir: path.join(dir, 'data'),
      key: KEY,
      env: {
        WEFT_ACCESS_LOG: 'false',
        WEFT_MODEL: modelDir,
        WEFT_SERVED_MODEL_NAME: 'm',
        WEFT_MAX_NUM_SEQS: '64',
        WEFT_MODEL_REPLICAS: String(REPLICAS),
        ...(THREADS ? { WEFT_INFERENCE_THREADS: THREADS } : {}),
      },
    })
    const headers = { authorization: `Bearer ${KEY}`, 'content-type': 'application/json' }
    const prompt: number[] = (
      (await (
        await fetch(server.url + '/tokenize', { method: 'POST', headers, body: JSON.stringify({ model: 'm', messages }) })
      ).json()) as Json
    ).tokens

    /** One streamed completion: time to first token and decode rate. */
    const weftStream = async (): Promise<Sample & { tokens: number }> => {
      const t0 = performance.now()
      const res = await fetch(server.url + '/v1/chat/completions', {
        method: 'POST',
        headers,
        body: JSON.stringify({ model: 'm', messages, max_tokens: TOKENS, temperature: 0, ignore_eos: true, stream: true }),
      })
      const reader = res.body!.getReader()
      let first = 0
      let last = 0
      let chunks = 0
      let buf = ''
      for (;;) {
        const { value, done } = await reader.read()
        if (done) break
        buf += Buffer.from(value).toString()
        let at
        while ((at = buf.indexOf('\n\n')) >= 0) {
          const ev = buf.slice(0, at)
          buf = buf.slice(at + 2)
          if (!ev.startsWith('data: {')) continue
          const j = JSON.parse(ev.slice(6))
          const c = j.choices?.[0]
          if (!c || c.delta?.role) continue
          chunks++
          last = performance.now()
          if (!first) first = last
        }
      }
      return { ttft_ms: first - t0, decode_tps: (chunks - 1) / ((last - first) / 1000), tokens: chunks }
    }
    const weftGreedy = async (): Promise<number[]> => {
      const r = (await (
        await fetch(server.url + '/v1/chat/completions', {
          method: 'POST',
          headers,
          body: JSON.stringify({ model: 'm', messages, max_tokens: 16, temperature: 0, ignore_eos: true, return_token_ids: true }),
        })
      ).json()) as Json
      return r.choices[0].token_ids
    }

    const maxC = Math.max(...levels)
    const model = await llama.loadModel({ modelPath: gguf })
    // llama.cpp's threads spin-wait: on this 2-core machine, beside Node's own thread, its default (4
    // here) and even 2 threads can run far slower than 1. Its best count is probed and used.
    let threads = Number(flags['llama-threads'] ?? 0)
    const probes: Record<number, number> = {}
    if (!threads) {
      for (const n of [1, 2]) {
        const c = await model.createContext({ contextSize: prompt.length + 40, threads: n })
        const seq = c.getSequence()
        const t0 = performance.now()
        let k = 0
        for await (const _ of seq.evaluate(prompt, { temperature: 0 })) if (++k >= 32) break
        probes[n] = Math.round(k / ((performance.now() - t0) / 1000))
        await c.dispose()
      }
      threads = probes[2]! > probes[1]! ? 2 : 1
    }
    const ctx = await model.createContext({ sequences: maxC, contextSize: maxC * (prompt.length + TOKENS + 8), batchSize: 512, threads })
    const seqs = Array.from({ length: maxC }, () => ctx.getSequence())
    const llamaStream = async (i: number): Promise<Sample & { tokens: number }> => {
      const seq = seqs[i]!
      await seq.clearHistory()
      const t0 = performance.now()
      let first = 0
      let last = 0
      let n = 0
      for await (const _ of seq.evaluate(prompt, { temperature: 0 })) {
        last = performance.now()
        if (!first) first = last
        if (++n >= TOKENS) break
      }
      return { ttft_ms: first - t0, decode_tps: (n - 1) / ((last - first) / 1000), tokens: n }
    }
    const llamaGreedy = async (): Promise<number[]> => {
      await seqs[0]!.clearHistory()
      const out: number[] = []
      for await (const t of seqs[0]!.evaluate(prompt, { temperature: 0 })) if (out.push(t) >= 16) break
      return out
    }
    const same = JSON.stringify(await weftGreedy()) === JSON.stringify(await llamaGreedy())
    process.stdout.write(
      `${name}: ${(params / 1e6).toFixed(2)}M parameters, prompt ${prompt.length} tokens, greedy tokens ${same ? 'identical' : 'DIFFERENT'} on both sides, llama.cpp threads ${threads} ${JSON.stringify(probes)}\n`,
    )

    // Warm both sides.
    await weftStream()
    await llamaStream(0)
    const single = { weft: [] as Sample[], llama: [] as Sample[] }
    const aggregate: Record<number, { weft: number[]; llama: number[] }> = {}
    for (let r = 0; r < RUNS; r++) {
      single.weft.push(await weftStream())
      single.llama.push(await llamaStream(0))
      for (const c of levels) {
        aggregate[c] ??= { weft: [], llama: [] }
        let t = performance.now()
        const w = await Promise.all(Array.from({ length: c }, () => weftStream()))
        aggregate[c].weft.push(w.reduce((a, x) => a + x.tokens, 0) / ((performance.now() - t) / 1000))
        t = performance.now()
        const l = await Promise.all(Array.from({ length: c }, (_, i) => llamaStream(i)))
        aggregate[c].llama.push(l.reduce((a, x) => a + x.tokens, 0) / ((performance.now() - t) / 1000))
        process.stdout.write(
          `  run ${r + 1} c=${c}: weft ${aggregate[c].weft.at(-1)!.toFixed(0)} tok/s, llama.cpp ${aggregate[c].llama.at(-1)!.toFixed(0)} tok/s\n`,
        )
      }
    }
    const ttft = await ttftByLength(server.url, headers, model, threads)
    const stats = (await (await fetch(server.url + '/admin/stats', { headers })).json()) as Json
    const sp = (xs: number[]) => spread(xs)
    const res = {
      parameters: params,
      prompt_tokens: prompt.length,
      tokens_per_stream: TOKENS,
      greedy_tokens_identical: same,
      llama_cpp_threads: threads,
      llama_cpp_thread_probe_tps: probes,
      backend: stats.inference?.m?.backend,
      single_stream: {
        weft: { ttft_ms: sp(single.weft.map((s) => s.ttft_ms)), decode_tps: sp(single.weft.map((s) => s.decode_tps)) },
        llama_cpp: { ttft_ms: sp(single.llama.map((s) => s.ttft_ms)), decode_tps: sp(single.llama.map((s) => s.decode_tps)) },
      },
      aggregate_tps: Object.fromEntries(
        levels.map((c) => [
          c,
          {
            weft: sp(aggregate[c]!.weft),
            llama_cpp: sp(aggregate[c]!.llama),
            weft_over_llama_cpp: round(sp(aggregate[c]!.weft).median / sp(aggregate[c]!.llama).median),
          },
        ]),
      ),
      ttft_ms_by_prompt_tokens: ttft,
      memory: { weft_server_rss_bytes: stats.memory.rss_bytes, bench_process_rss_bytes_with_llama_cpp: process.memoryUsage().rss },
    }
    const s1 = res.single_stream
    process.stdout.write(
      `  single stream: weft TTFT ${s1.weft.ttft_ms.median.toFixed(1)} ms, ${s1.weft.decode_tps.median.toFixed(0)} tok/s; llama.cpp TTFT ${s1.llama_cpp.ttft_ms.median.toFixed(1)} ms, ${s1.llama_cpp.decode_tps.median.toFixed(0)} tok/s\n`,
    )
    results[name] = res
    curve[name] = { weft: levels.map((c) => sp(aggregate[c]!.weft).median), llama: levels.map((c) => sp(aggregate[c]!.llama).median) }
    await ctx.dispose()
    await model.dispose()
    await server.stop()
    rmSync(dir, { recursive: true, force: true })
  }
  const stamp = new Date().toISOString().replace(/[:.]/g, '-')
  const outDir = path.join(ROOT_DIR, 'bench', 'results')
  mkdirSync(outDir, { recursive: true })
  writeFileSync(
    path.join(outDir, `inference-${stamp}.json`),
    JSON.stringify(
      {
        bench: 'inference',
        weft_version: VERSION,
        date: new Date().toISOString(),
        machine: { cpus: os.cpus().length, model: os.cpus()[0]?.model, node: process.version },
        setup: {
          tokens_per_stream: TOKENS,
          runs: RUNS,
          concurrency: levels,
          weft_replicas: REPLICAS,
          weft_inference_threads: THREADS ?? 'default',
          peer: 'llama.cpp via node-llama-cpp 3.22.1 (prebuilt CPU binary, its default threads), f32 GGUF written from the same safetensors (bench/gguf.ts)',
        },
        results,
      },
      null,
      2,
    ) + '\n',
  )
  writeFileSync(
    path.join(outDir, `inference-${stamp}.svg`),
    sizeChart(
      'Aggregate decode tokens/s against concurrent streams (median, log scale)',
      levels.map(String),
      Object.entries(curve).map(([m, c]) => ({
        title: m,
        series: [
          { label: 'weft (TF.js)', values: c.weft },
          { label: 'llama.cpp', values: c.llama },
        ],
      })),
      (v) => `${v}`,
    ),
  )
  process.stdout.write(`wrote bench/results/inference-${stamp}.json and .svg\n`)
  process.exit(0)
}

/** Prompt token ids of a given length from a seed (within the model's 300 first ids: every vocabulary here has them). */
function promptOf(n: number, seed: number): number[] {
  let x = seed
  return Array.from({ length: n }, () => ((x = (x * 1103515245 + 12345) % 2 ** 31), 3 + (x % 300)))
}

/**
 * Time to first token for each --ttft prompt length: weft cold (a prompt never seen), weft on a
 * prefix-cache hit (the same prompt again: all but its last partial block cached), llama.cpp cold.
 */
async function ttftByLength(
  url: string,
  headers: Record<string, string>,
  model: { createContext(o: Record<string, unknown>): Promise<{ getSequence(): LlamaSequence; dispose(): Promise<void> }> },
  threads: number,
): Promise<Record<number, Json>> {
  const out: Record<number, Json> = {}
  for (const n of TTFT) {
    const prompt = promptOf(n, n)
    const weft = async () => {
      const t0 = performance.now()
      const res = await fetch(url + '/v1/completions', {
        method: 'POST',
        headers,
        body: JSON.stringify({ model: 'm', prompt, max_tokens: 1 }),
      })
      const r = (await res.json()) as Json
      // A refused prompt would time the refusal: fail loudly instead.
      if (!res.ok) throw new Error(`TTFT ${n} tokens: ${res.status} ${JSON.stringify(r)}`)
      return { ms: round(performance.now() - t0), cached: r.usage?.prompt_tokens_details?.cached_tokens ?? null }
    }
    const cold = await weft()
    const hit = await weft()
    const ctx = await model.createContext({ contextSize: n + 16, threads, batchSize: 512 })
    const t0 = performance.now()
    for await (const _ of ctx.getSequence().evaluate(prompt, { temperature: 0 })) break
    const llamaCold = round(performance.now() - t0)
    await ctx.dispose()
    out[n] = {
      weft_cold: cold.ms,
      weft_prefix_hit: hit.ms,
      cached_tokens: hit.cached,
      hit_speedup: round(cold.ms / hit.ms),
      llama_cpp_cold: llamaCold,
    }
    process.stdout.write(
      `  TTFT ${n} tokens: weft cold ${cold.ms.toFixed(0)} ms, prefix hit ${hit.ms.toFixed(0)} ms (${hit.cached} cached), llama.cpp cold ${llamaCold.toFixed(0)} ms\n`,
    )
  }
  return out
}

const round = (x: number) => Math.round(x * 1000) / 1000
main().catch((e) => {
  console.error(e)
  process.exit(1)
})
