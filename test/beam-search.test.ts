import t, { type Test } from 'tap'
import path from 'node:path'
import { spawnSync } from 'node:child_process'
import { readFileSync } from 'node:fs'
import { rm } from 'node:fs/promises'
import OpenAI from 'openai'
import * as tf from '@tensorflow/tfjs'
import { chatServer } from './helpers/openai.js'
import { ROOT, postJson, tempDir } from './helpers/server.js'
import { makeTinyModel } from '../src/fixtures/tiny-model.js'
import { Engine } from '../src/inference/engine.js'
import { loadModel } from '../src/inference/worker.js'
import type { GenerateRequest, WorkerEvent } from '../src/inference/protocol.js'

// Beam search (`use_beam_search`) on the built-in tiny model through the real server and the real openai
// SDK. Beams are checked against scripts/reference_llama.py's beam search (NumPy, written from vLLM's
// definition, sharing no code with the server) and against the ranking formula computed here from what
// the server returns: score = Σ logprobs / (prompt tokens + generated tokens) ^ length_penalty.
const chat = chatServer()
const REFERENCE = path.join(ROOT, 'scripts', 'reference_llama.py')
const hasNumpy = spawnSync('python3', ['-c', 'import numpy']).status === 0

type Extra = Record<string, unknown>
type Choice = OpenAI.ChatCompletion.Choice & { token_ids?: number[]; stop_reason?: string | number | null }
type Reply = Omit<OpenAI.ChatCompletion, 'choices'> & { choices: Choice[] }
const MSG = [{ role: 'user' as const, content: 'Tell me about the weather in Paris' }]

const create = (body: Extra) =>
  chat.client.chat.completions.create({
    model: 'weft-tiny',
    messages: MSG,
    use_beam_search: true,
    ...body,
  } as never) as unknown as Promise<Reply>

const cum = (c: Choice) => c.logprobs!.content!.reduce((s, x) => s + x.logprob, 0)
/** The score as the formula says, from the reply alone (no closing end-of-sequence is in token_ids by default). */
const score = (c: Choice, prompt: number, penalty: number) => cum(c) / (prompt + c.token_ids!.length) ** penalty

function nonIncreasing(t: Test, xs: number[], what: string) {
  for (let i = 1; i < xs.length; i++)
    t.ok(xs[i]! <= xs[i - 1]! + 1e-9, `${what}: #${i} (${xs[i]!.toFixed(4)}) ≤ #${i - 1} (${xs[i - 1]!.toFixed(4)})`)
}

t.test('n beams, best first by cumulative logprob over length^length_penalty', async (t) => {
  for (const penalty of [1, 0, 2.5]) {
    const r = await create({ n: 4, max_tokens: 8, length_penalty: penalty, logprobs: true, return_token_ids: true })
    t.equal(r.choices.length, 4, `${penalty}: four beams`)
    t.same(
      r.choices.map((c) => c.index),
      [0, 1, 2, 3],
    )
    const texts = r.choices.map((c) => JSON.stringify(c.token_ids))
    t.equal(new Set(texts).size, 4, `${penalty}: four different beams`)
    for (const c of r.choices) t.equal(c.logprobs!.content!.length, c.token_ids!.length, 'a logprob per token')
    nonIncreasing(
      t,
      r.choices.map((c) => score(c, r.usage!.prompt_tokens, penalty)),
      `length_penalty ${penalty}`,
    )
    t.equal(
      r.usage!.completion_tokens,
      r.choices.reduce((s, c) => s + c.token_ids!.length, 0),
      'completion tokens of all beams',
    )
  }
})

t.test('length_penalty changes the ranking of beams of different lengths as the formula says', async (t) => {
  // The best beam's third token as a stop token id ends beams at different lengths.
  const first = await create({ n: 4, max_tokens: 8, logprobs: true, return_token_ids: true })
  const stops = [first.choices[0]!.token_ids![2]!]
  const runs: Record<number, Reply> = {}
  for (const penalty of [0, 12]) {
    const r = (runs[penalty] = await create({
      n: 4,
      max_tokens: 8,
      length_penalty: penalty,
      stop_token_ids: stops,
      logprobs: true,
      return_token_ids: true,
    }))
    for (const c of r.choices)
      if (c.finish_reason === 'stop') t.ok(stops.includes(c.stop_reason as number), 'stopped on a stop token id, kept as the last token')
    nonIncreasing(
      t,
      r.choices.map((c) => score(c, r.usage!.prompt_tokens, penalty)),
      `length_penalty ${penalty}`,
    )
  }
  const [short, long] = [runs[0]!, runs[12]!]
  const lengths = (r: Reply) => r.choices.map((c) => c.token_ids!.length)
  t.ok(new Set(lengths(short)).size > 1, `penalty 0: beams of ${lengths(short).join(', ')} tokens`)
  t.ok(Math.max(...lengths(long)) > Math.max(...lengths(short)), `penalty 12 prefers longer beams: ${lengths(long).join(', ')}`)
  // Live beams all have one length, so which live on does not depend on the penalty: both runs rank the same
  // beams, and a beam one run returns and the other does not must score below all the other's under its penalty.
  const key = (c: Choice) => JSON.stringify(c.token_ids)
  for (const [mine, other, penalty] of [
    [short, long, 12],
    [long, short, 0],
  ] as const) {
    const kept = new Set(other.choices.map(key))
    const floor = Math.min(...other.choices.map((c) => score(c, other.usage!.prompt_tokens, penalty)))
    const dropped = mine.choices.filter((c) => !kept.has(key(c)))
    t.ok(dropped.length > 0, `penalty ${penalty} drops some beams the other penalty keeps`)
    for (const c of dropped)
      t.ok(score(c, mine.usage!.prompt_tokens, penalty) < floor, `under penalty ${penalty} ${key(c)} ranks below every beam returned`)
  }
})

t.test('one beam is greedy decoding', async (t) => {
  const beam = await create({ n: 1, max_tokens: 10, ignore_eos: true })
  const greedy = await chat.client.chat.completions.create({
    model: 'weft-tiny',
    messages: MSG,
    max_tokens: 10,
    temperature: 0,
    ignore_eos: true,
  } as never)
  t.equal(beam.choices[0]!.message.content, (greedy as OpenAI.ChatCompletion).choices[0]!.message.content)
  t.equal(beam.choices[0]!.finish_reason, 'length')
})

t.test('stop strings end beams, kept only with include_stop_str_in_output', async (t) => {
  const plain = await create({ n: 3, max_tokens: 10, ignore_eos: true })
  const text = plain.choices[0]!.message.content!
  t.ok(text.length >= 4, `best beam: ${JSON.stringify(text)}`)
  const stop = text.slice(2, 4)
  const cut = await create({ n: 3, max_tokens: 10, ignore_eos: true, stop: [stop] })
  const stopped = cut.choices.filter((c) => c.finish_reason === 'stop')
  t.ok(stopped.length > 0, 'some beam stopped on the string')
  for (const c of stopped) {
    t.equal(c.stop_reason, stop)
    t.notOk(c.message.content!.includes(stop), 'the stop string is cut off')
  }
  for (const c of cut.choices) t.notOk(c.message.content!.includes(stop), 'no beam runs past the stop string')
  const kept = await create({ n: 3, max_tokens: 10, ignore_eos: true, stop: [stop], include_stop_str_in_output: true })
  for (const c of kept.choices.filter((c) => c.finish_reason === 'stop')) t.ok(c.message.content!.endsWith(stop), 'kept at the end')
})

t.test('streamed: the whole answer of each beam in one piece, equal to the non-streamed one', async (t) => {
  const body = { n: 3, max_tokens: 8, ignore_eos: true }
  const whole = await create(body)
  const stream = (await create({ ...body, stream: true })) as unknown as AsyncIterable<OpenAI.ChatCompletionChunk>
  const texts = ['', '', '']
  const finishes: (string | null)[] = [null, null, null]
  for await (const ch of stream)
    for (const c of ch.choices) {
      texts[c.index] += c.delta.content ?? ''
      if (c.finish_reason) finishes[c.index] = c.finish_reason
    }
  t.same(
    texts,
    whole.choices.map((c) => c.message.content),
  )
  t.same(finishes, ['length', 'length', 'length'])
})

t.test('beam search at temperature 0 with n > 1 is allowed; with structured outputs it is a 400', async (t) => {
  const r = await create({ n: 2, temperature: 0, max_tokens: 3 })
  t.equal(r.choices.length, 2)
  const bad = await postJson(
    chat.s,
    '/v1/chat/completions',
    { messages: MSG, use_beam_search: true, n: 2, max_tokens: 3, response_format: { type: 'json_object' } },
    chat.s.bearer(),
  )
  t.equal(bad.status, 400)
})

t.test('legacy completions: echo with logprobs gives the prompt logprobs as sampling does', async (t) => {
  type Legacy = { choices: (OpenAI.CompletionChoice & { prompt_token_ids: number[] })[] }
  const body = { model: 'weft-tiny', prompt: 'Beams of light', echo: true, logprobs: 1, max_tokens: 3, return_token_ids: true }
  const beam = (await chat.client.completions.create({ ...body, use_beam_search: true, n: 2 } as never)) as unknown as Legacy
  const plain = (await chat.client.completions.create({ ...body, temperature: 0 } as never)) as unknown as Legacy
  const P = plain.choices[0]!.prompt_token_ids.length
  const prompt = (r: Legacy, i: number) => r.choices[i]!.logprobs!.token_logprobs!.slice(0, P)
  t.ok(P > 1)
  t.equal(prompt(plain, 0)[0], null, 'the first prompt token has none')
  t.ok(
    prompt(plain, 0)
      .slice(1)
      .every((x) => typeof x === 'number'),
  )
  for (const i of [0, 1]) {
    t.same(prompt(beam, i), prompt(plain, 0), `beam ${i}: the prompt's logprobs`)
    t.ok(beam.choices[i]!.text.startsWith('Beams of light'), 'echoed')
  }
})

t.test(
  'legacy completions: beams equal the NumPy reference beam search',
  { skip: hasNumpy ? false : 'python3 with numpy is not available' },
  async (t) => {
    const dir = path.join(chat.s.dataDir, 'models', 'weft-tiny')
    const gen = JSON.parse(readFileSync(path.join(dir, 'generation_config.json'), 'utf8')) as { eos_token_id: number[] }
    const cases = [
      { prompt: 'The weather in Paris today is', width: 2, maxTokens: 6, penalty: 1 },
      { prompt: 'Once upon a time', width: 3, maxTokens: 7, penalty: 0 },
      { prompt: 'Beams of light', width: 4, maxTokens: 5, penalty: 2 },
      // Beams of different lengths (a stop token id), where counting the prompt in the length decides the order.
      { prompt: 'Once upon a time', width: 4, maxTokens: 8, penalty: 1, stop: true },
      { prompt: 'The weather in Paris today is', width: 3, maxTokens: 8, penalty: 0.5, stop: true },
    ]
    type Reply = { choices: (OpenAI.CompletionChoice & { token_ids: number[]; prompt_token_ids: number[] })[] }
    const complete = (k: (typeof cases)[number], stops: number[]) =>
      chat.client.completions.create({
        model: 'weft-tiny',
        prompt: k.prompt,
        use_beam_search: true,
        n: k.width,
        max_tokens: k.maxTokens,
        length_penalty: k.penalty,
        stop_token_ids: stops,
        logprobs: 0,
        return_token_ids: true,
      } as never) as unknown as Promise<Reply>
    for (const k of cases) {
      const stops = k.stop ? [(await complete(k, [])).choices[0]!.token_ids[2]!] : []
      const r = await complete(k, stops)
      if (k.stop) t.ok(new Set(r.choices.map((c) => c.token_ids.length)).size > 1, 'beams of different lengths')
      const ref = spawnSync('python3', [REFERENCE, dir], {
        input: JSON.stringify({
          tokens: r.choices[0]!.prompt_token_ids,
          beam: { width: k.width, max_tokens: k.maxTokens, length_penalty: k.penalty, eos: gen.eos_token_id, stop_token_ids: stops },
        }),
        maxBuffer: 64 * 1024 * 1024,
      })
      t.equal(ref.status, 0, String(ref.stderr))
      const want = JSON.parse(ref.stdout.toString()).beams as { tokens: number[]; cum_logprob: number; finish: string }[]
      t.same(
        r.choices.map((c) => c.token_ids),
        want.map((b) => b.tokens),
        `width ${k.width}, penalty ${k.penalty}: same beams in the same order`,
      )
      for (const [i, c] of r.choices.entries()) {
        const got = c.logprobs!.token_logprobs!.reduce((s, x) => s + x!, 0)
        t.ok(
          Math.abs(got - want[i]!.cum_logprob) < 1e-3,
          `beam ${i}: cumulative logprob ${got.toFixed(5)} vs ${want[i]!.cum_logprob.toFixed(5)}`,
        )
        t.equal(c.finish_reason, want[i]!.finish)
      }
    }
  },
)

// The engine in this process: a beam search frees every tensor it makes.
t.test('in process: no tensors leak', async (t) => {
  await tf.setBackend('cpu')
  const dir = tempDir()
  t.teardown(() => rm(dir, { recursive: true, force: true }))
  await makeTinyModel(path.join(dir, 'm'))
  const m = await loadModel(path.join(dir, 'm'))
  t.teardown(() => m.model.dispose())
  const opts = { maxNumSeqs: 8, maxWaiting: 8, kvTokens: 4096, prefillChunk: 64, priority: false, maxLogprobs: 5, prefixCaching: false }
  const waiting = new Map<string, (e: WorkerEvent[]) => void>()
  const seen = new Map<string, WorkerEvent[]>()
  const engine = new Engine(m.model, m.tok, m.gen, opts, (e) => {
    if (!('id' in e)) return
    seen.set(e.id, [...(seen.get(e.id) ?? []), e])
    if (e.type === 'done' || e.type === 'error') waiting.get(e.id)?.(seen.get(e.id)!)
  })
  const running = engine.run()
  t.teardown(async () => {
    engine.stop()
    await running
    engine.dispose()
  })
  const run = (id: string, extra: Partial<GenerateRequest>) =>
    new Promise<WorkerEvent[]>((resolve) => {
      waiting.set(id, resolve)
      engine.submit(request(id, extra))
    })
  const before = tf.memory().numTensors
  const events = await run('b1', { n: 3, maxTokens: 9, beamSearch: { lengthPenalty: 1 } })
  t.equal(events.filter((e) => e.type === 'finish').length, 3, 'three beams')
  await run('b2', { n: 4, maxTokens: 5, stop: ['e'], beamSearch: { lengthPenalty: 0.5 } })
  t.equal(tf.memory().numTensors, before, 'every tensor freed')
  t.equal(engine.stats.kv_positions_used, 0)
  // A cancelled search (client gone) stops between steps, answers nothing and frees its beams.
  const cancelled = run('b3', { n: 3, maxTokens: 1000, beamSearch: { lengthPenalty: 1 } })
  for (let i = 0; i < 50 && engine.stats.running_sequences === 0; i++) await new Promise((r) => setTimeout(r, 20))
  t.equal(engine.stats.running_sequences, 3, 'three beams running')
  engine.cancel('b3')
  const late = await Promise.race([cancelled.then(() => 'answered'), new Promise((r) => setTimeout(() => r('silent'), 500))])
  t.equal(late, 'silent', 'no answer after cancelling')
  t.equal(engine.stats.running_requests, 0)
  t.equal(tf.memory().numTensors, before, 'every tensor freed after cancelling')
})

function request(id: string, extra: Partial<GenerateRequest>): GenerateRequest {
  return {
    id,
    messages: MSG,
    addGenerationPrompt: true,
    continueFinalMessage: false,
    addSpecialTokens: false,
    tools: null,
    documents: null,
    chatTemplate: null,
    chatTemplateKwargs: null,
    truncatePromptTokens: null,
    n: 1,
    maxTokens: 12,
    temperature: null,
    topP: null,
    topK: null,
    minP: null,
    repetitionPenalty: null,
    frequencyPenalty: null,
    presencePenalty: null,
    logitBias: null,
    minTokens: 0,
    allowedTokenIds: null,
    badWords: [],
    stop: [],
    stopTokenIds: [],
    includeStopStrInOutput: false,
    ignoreEos: false,
    skipSpecialTokens: true,
    spacesBetweenSpecialTokens: true,
    logprobs: null,
    returnTokensAsTokenIds: false,
    seed: null,
    priority: 0,
    stream: false,
    promptLogprobs: null,
    constraint: null,
    ...extra,
  }
}
