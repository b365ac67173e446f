/**
 * Structured outputs: the cost of the grammar mask per token, and of compiling grammars.
 *   node dist/bench/structured.js [--models tiny,100m] [--concurrency 1,16] [--tokens 64] [--runs 3]
 * Per model: aggregate decode tokens/s unconstrained (end-of-sequence ignored) against constrained by a
 * JSON schema and by a regex, at each concurrency (the target: constrained per-token cost at most
 * 1.3× unconstrained); the time to first token of a large schema cold (compiled at admission) and cached;
 * and the compile time (cold − cached). Writes bench/results/structured-<stamp>.json.
 */
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { parseFlags } from '../src/core/config.js'
import { ROOT_DIR, VERSION } from '../src/core/version.js'
import { makeTinyModel, type TinyModelOptions } from '../src/fixtures/tiny-model.js'
import { spread, startWeft, type Spread } from './util.js'

const { flags } = parseFlags(process.argv.slice(2))
const MODELS: Record<string, TinyModelOptions> = {
  tiny: {},
  '100m': { hidden: 768, layers: 16, heads: 12, kvHeads: 4, intermediate: 2048, seed: 100 },
}
const models = (flags.models ?? 'tiny,100m').split(',')
const levels = (flags.concurrency ?? '1,16').split(',').map(Number)
const TOKENS = Number(flags.tokens ?? 64)
const RUNS = Number(flags.runs ?? 3)
const KEY = 'bench-key'
const messages = [{ role: 'user', content: 'List some records as JSON.' }]

/** Long-running constraints: an unbounded array of records, and a regex of many short words. */
const CONSTRAINTS: Record<string, Record<string, unknown> | null> = {
  none: null,
  json: {
    json: {
      type: 'array',
      items: {
        type: 'object',
        properties: {
          id: { type: 'integer', minimum: 0, maximum: 99999 },
          name: { type: 'string', maxLength: 16 },
          ok: { type: 'boolean' },
        },
        required: ['id', 'name', 'ok'],
      },
    },
  },
  regex: { regex: '([a-z]{1,8}( |, |\\. )){1,400}' },
}

/** A schema large enough that compiling it shows. */
function largeSchema(salt: number): Record<string, unknown> {
  const props: Record<string, unknown> = {}
  for (let i = 0; i < 150; i++)
    props[`field_${salt}_${i}`] =
      i % 3 === 0
        ? { type: 'string', maxLength: 20 }
        : i % 3 === 1
          ? { type: 'integer', minimum: -i, maximum: i * 100 }
          : {
              type: 'object',
              properties: { a: { enum: ['x', 'y', 'z'] }, b: { type: 'array', items: { type: 'number' } } },
              required: ['a'],
            }
  return { type: 'object', properties: props, required: Object.keys(props).slice(0, 20) }
}

type Post = (body: Record<string, unknown>) => Promise<{ completion: number; ms: number }>

/** Aggregate decode tokens/s of `streams` requests at once. */
async function throughput(post: Post, so: Record<string, unknown> | null, streams: number): Promise<number> {
  const body = { messages, max_tokens: TOKENS, temperature: 1, ...(so ? { structured_outputs: so } : { ignore_eos: true }) }
  await post({ ...body, seed: 0 }) // compiles the grammar, warms the worker
  const t0 = performance.now()
  const done = await Promise.all(Array.from({ length: streams }, (_, i) => post({ ...body, seed: i + 1 })))
  return done.reduce((s, d) => s + d.completion, 0) / ((performance.now() - t0) / 1000)
}

async function benchModel(name: string, dir: string): Promise<Record<string, unknown>> {
  const modelDir = path.join(dir, name)
  await makeTinyModel(modelDir, MODELS[name]!)
  const server = await startWeft({
    root: ROOT_DIR,
    dataDir: path.join(dir, 'data-' + name),
    key: KEY,
    env: { WEFT_ACCESS_LOG: 'false', WEFT_MODEL: modelDir, WEFT_SERVED_MODEL_NAME: 'm', WEFT_MAX_NUM_SEQS: '64', WEFT_MODEL_REPLICAS: '1' },
  })
  const headers = { authorization: `Bearer ${KEY}`, 'content-type': 'application/json' }
  const post: Post = async (body) => {
    const t0 = performance.now()
    const r = await fetch(server.url + '/v1/chat/completions', { method: 'POST', headers, body: JSON.stringify({ model: 'm', ...body }) })
    const j = (await r.json()) as { usage?: { completion_tokens: number }; error?: unknown }
    if (!r.ok) throw new Error(JSON.stringify(j.error))
    return { completion: j.usage!.completion_tokens, ms: performance.now() - t0 }
  }
  try {
    const tps: Record<string, Record<number, Spread>> = {}
    for (const [kind, so] of Object.entries(CONSTRAINTS)) {
      tps[kind] = {}
      for (const streams of levels) {
        const xs: number[] = []
        for (let r = 0; r < RUNS; r++) xs.push(await throughput(post, so, streams))
        tps[kind]![streams] = spread(xs)
        console.log(`${name} ${kind} ×${streams}: ${tps[kind]![streams]!.median.toFixed(1)} tokens/s`)
      }
    }
    const cold: number[] = []
    const cached: number[] = []
    for (let r = 0; r < RUNS; r++) {
      const so = { json: largeSchema(r) }
      cold.push((await post({ messages, max_tokens: 1, structured_outputs: so })).ms)
      cached.push((await post({ messages, max_tokens: 1, structured_outputs: so })).ms)
    }
    const ttft = { cold_ms: spread(cold), cached_ms: spread(cached), compile_ms: spread(cold.map((c, i) => c - cached[i]!)) }
    console.log(
      `${name} first token, large schema: cold ${ttft.cold_ms.median.toFixed(0)} ms, cached ${ttft.cached_ms.median.toFixed(0)} ms`,
    )
    const ratio = Object.fromEntries(
      ['json', 'regex'].map((k) => [k, Object.fromEntries(levels.map((l) => [l, tps.none![l]!.median / tps[k]![l]!.median]))]),
    )
    return { tokens_per_s: tps, per_token_cost_ratio: ratio, first_token_large_schema: ttft }
  } finally {
    await server.stop()
  }
}

async function main(): Promise<void> {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'weft-bench-structured-'))
  const out: Record<string, unknown> = { version: VERSION, tokens: TOKENS, runs: RUNS, concurrency: levels, models: {} }
  try {
    for (const m of models) (out.models as Record<string, unknown>)[m] = await benchModel(m, dir)
  } finally {
    rmSync(dir, { recursive: true, force: true })
  }
  const results = path.join(ROOT_DIR, 'bench', 'results')
  mkdirSync(results, { recursive: true })
  const file = path.join(results, `structured-${new Date().toISOString().replace(/[:.]/g, '-')}.json`)
  writeFileSync(file, JSON.stringify(out, null, 2) + '\n')
  console.log(file)
}

main().catch((e) => {
  console.error(e)
  process.exit(1)
})
