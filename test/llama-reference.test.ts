import t from 'tap'
import { spawnSync } from 'node:child_process'
import { rm } from 'node:fs/promises'
import path from 'node:path'
import OpenAI from 'openai'
import { ROOT, startServer, tempDir } from './helpers/server.js'
import { makeTinyModel, type TinyModelOptions } from '../src/fixtures/tiny-model.js'
import { LlamaModel, type LlamaConfig } from '../src/inference/llama.js'
import { readModelWeights } from '../src/inference/safetensors.js'
import { chooseBackend } from '../src/inference/worker.js'
import { readFileSync, writeFileSync } from 'node:fs'

// The TF.js model against an independent reference of the same architecture on the same weights:
// scripts/reference_llama.py, NumPy in float64, sharing no code with it.
const REFERENCE = path.join(ROOT, 'scripts', 'reference_llama.py')

function reference(dir: string, tokens: number[], generate: number): { logits: number[][]; generated: number[] } {
  const r = spawnSync('python3', [REFERENCE, dir], { input: JSON.stringify({ tokens, generate }), maxBuffer: 256 * 1024 * 1024 })
  if (r.status !== 0) throw new Error(`reference failed: ${r.stderr}`)
  return JSON.parse(r.stdout.toString())
}

const VARIANTS: [string, TinyModelOptions][] = [
  ['llama (GQA 4/2, tied head)', {}],
  ['qwen2 (q/k/v biases)', { arch: 'qwen2', seed: 7 }],
  [
    'llama3 rope scaling, one kv head, separate head, 3 layers',
    {
      seed: 11,
      kvHeads: 1,
      layers: 3,
      tieEmbeddings: false,
      ropeScaling: { rope_type: 'llama3', factor: 8, low_freq_factor: 1, high_freq_factor: 4, original_max_position_embeddings: 32 },
    },
  ],
  ['linear rope scaling', { seed: 13, ropeScaling: { type: 'linear', factor: 4 } }],
  ['dynamic (NTK) rope scaling', { seed: 17, ropeScaling: { type: 'dynamic', factor: 2 } }],
  [
    'yarn rope scaling (attention factor on cos/sin)',
    { seed: 19, ropeScaling: { rope_type: 'yarn', factor: 4, original_max_position_embeddings: 64 } },
  ],
]

const PROMPT = Array.from({ length: 48 }, (_, i) => (i * 37 + 11) % 360)

t.before(async () => {
  await chooseBackend('wasm')
})

for (const [name, opts] of VARIANTS) {
  t.test(`${name}: logits within float32 tolerance, greedy tokens identical`, async (t) => {
    const dir = tempDir('weft-model-')
    t.teardown(() => rm(dir, { recursive: true, force: true }))
    await makeTinyModel(dir, opts)
    const config = JSON.parse(readFileSync(path.join(dir, 'config.json'), 'utf8')) as LlamaConfig
    const model = LlamaModel.fromWeights(config, await readModelWeights(dir))
    t.teardown(() => model.dispose())
    const want = reference(dir, PROMPT, 16)

    const cache = model.newCache()
    const [all] = model.forward([{ tokens: PROMPT, cache, allLogits: true }])
    const V = config.vocab_size
    const got = Array.from({ length: PROMPT.length }, (_, i) => Array.from(all!.subarray(i * V, (i + 1) * V)))
    let worst = 0
    let scale = 0
    for (let i = 0; i < got.length; i++)
      for (let j = 0; j < got[i]!.length; j++) {
        worst = Math.max(worst, Math.abs(got[i]![j]! - want.logits[i]![j]!))
        scale = Math.max(scale, Math.abs(want.logits[i]![j]!))
      }
    t.ok(
      worst < 1e-4 * Math.max(1, scale),
      `max |Δlogit| ${worst.toExponential(2)} over ${got.length}×${got[0]!.length} logits (largest ${scale.toFixed(2)})`,
    )

    // Greedy decoding through the KV cache, one token a step, against the reference's recomputation.
    const ids: number[] = []
    let next = argmax(got[got.length - 1]!)
    for (let i = 0; i < 16; i++) {
      ids.push(next)
      const [l] = model.forward([{ tokens: [next], cache }])
      next = argmax(l!)
    }
    cache.dispose()
    t.same(ids, want.generated, 'greedy tokens')
  })
}

t.test(
  'the served model (qwen2 variant from --model, prompts prefilled 5 tokens a step) generates what the reference generates',
  async (t) => {
    const dir = tempDir('weft-model-')
    await makeTinyModel(dir, { arch: 'qwen2', seed: 7 })
    // Sampling defaults come from generation_config.json: here greedy.
    const gen = JSON.parse(readFileSync(path.join(dir, 'generation_config.json'), 'utf8'))
    writeFileSync(path.join(dir, 'generation_config.json'), JSON.stringify({ ...gen, temperature: 0 }))
    const s = await startServer({ args: ['--model', dir, '--served-model-name', 'tiny-qwen', '--prefill-chunk', '5'] })
    t.teardown(async () => {
      await s.stop()
      await rm(dir, { recursive: true, force: true })
    })
    const client = new OpenAI({ apiKey: s.key, baseURL: s.url + '/v1', maxRetries: 0 })
    const messages = [{ role: 'user' as const, content: 'Tell me about looms.' }]
    const r = (await client.chat.completions.create({
      model: 'tiny-qwen',
      messages,
      temperature: 0,
      max_tokens: 12,
      ignore_eos: true,
      return_token_ids: true,
    } as never)) as unknown as OpenAI.ChatCompletion & { prompt_token_ids: number[]; choices: { token_ids: number[] }[] }
    const want = reference(dir, r.prompt_token_ids, 12)
    t.same(r.choices[0]!.token_ids, want.generated)
    const byDefault = (await client.chat.completions.create({
      model: 'tiny-qwen',
      messages,
      max_tokens: 12,
      ignore_eos: true,
      return_token_ids: true,
    } as never)) as unknown as { choices: { token_ids: number[] }[] }
    t.same(byDefault.choices[0]!.token_ids, want.generated, 'no temperature given: the model default (greedy)')
    // prompt_logprobs: the model's own log-probabilities of each prompt token, as the reference computes them.
    const p = (await client.chat.completions.create({
      model: 'tiny-qwen',
      messages,
      max_tokens: 1,
      prompt_logprobs: 2,
    } as never)) as unknown as { prompt_logprobs: (Record<string, { logprob: number; rank: number }> | null)[] }
    t.equal(p.prompt_logprobs.length, r.prompt_token_ids.length)
    t.equal(p.prompt_logprobs[0], null, 'the first prompt token has none')
    let worst = 0
    for (let i = 1; i < r.prompt_token_ids.length; i++) {
      const row = want.logits[i - 1]!
      const max = Math.max(...row)
      const lse = max + Math.log(row.reduce((a, x) => a + Math.exp(x - max), 0))
      const id = r.prompt_token_ids[i]!
      const e = p.prompt_logprobs[i]![String(id)]!
      worst = Math.max(worst, Math.abs(e.logprob - (row[id]! - lse)))
      t.equal(e.rank, 1 + row.filter((x) => x > row[id]!).length, `rank of prompt token ${i}`)
    }
    t.ok(worst < 1e-4, `prompt logprobs within ${worst.toExponential(2)} of the reference`)
    t.same(
      (await client.models.list()).data.map((m) => m.id),
      ['tiny-qwen'],
    )
  },
)

function argmax(xs: ArrayLike<number>): number {
  let best = 0
  for (let i = 1; i < xs.length; i++) if (xs[i]! > xs[best]!) best = i
  return best
}
