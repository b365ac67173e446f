import t from 'tap'
import path from 'node:path'
import { rm } from 'node:fs/promises'
import OpenAI from 'openai'
import * as tf from '@tensorflow/tfjs'
import { chatServer } from './helpers/openai.js'
import { tempDir } from './helpers/server.js'
import { makeTinyModel } from '../src/fixtures/tiny-model.js'
import { Engine } from '../src/inference/engine.js'
import { loadModel } from '../src/inference/worker.js'
import type { EngineOptions } from '../src/inference/request.js'
import type { GenerateRequest, WorkerEvent } from '../src/inference/protocol.js'

// Automatic prefix caching through the real server and the real openai SDK, on the built-in tiny model.
// Expected hit counts come from the prompts' token ids (/tokenize) and the rule: whole blocks of BLOCK
// tokens that the prompts share from their start, at most floor((P - 1) / BLOCK) of them (the last prompt
// token is always computed).
const BLOCK = 16
const SMALL_BUDGET = 400
const chat = chatServer()
const tight = chatServer({ args: ['--kv-cache-tokens', String(SMALL_BUDGET)] })

type Extra = Record<string, unknown>
type Msg = { role: 'system' | 'user'; content: string }
type Reply = OpenAI.ChatCompletion & { usage: { prompt_tokens_details?: { cached_tokens: number } | null } }

/** Deterministic filler text: `words` words, varied so the tokens differ along the prompt. */
function text(seed: number, words: number): string {
  const out: string[] = []
  let x = seed
  for (let i = 0; i < words; i++) {
    x = (x * 1103515245 + 12345) % 2147483648
    out.push(['alpha', 'beta', 'gamma', 'delta', 'omega', 'sigma', 'kappa', 'theta', 'zeta', 'lambda'][x % 10]! + (x % 7))
  }
  return out.join(' ')
}

const convo = (seed: number, words = 60, tail = ''): Msg[] => [
  // The seed first: prompts of different seeds share no block (the template's opening is shorter than one).
  { role: 'system', content: `${seed} ${seed * 7919}: you answer in one line.` },
  { role: 'user', content: text(seed, words) + tail },
]

async function create(c: OpenAI, messages: Msg[], body: Extra = {}): Promise<Reply> {
  return (await c.chat.completions.create({
    model: 'weft-tiny',
    messages,
    max_tokens: 24,
    temperature: 0,
    ignore_eos: true,
    ...body,
  } as never)) as unknown as Reply
}

async function promptIds(s: { url: string; bearer: () => Record<string, string> }, messages: Msg[]): Promise<number[]> {
  const r = await fetch(s.url + '/tokenize', {
    method: 'POST',
    headers: { ...s.bearer(), 'content-type': 'application/json' },
    body: JSON.stringify({ messages }),
  })
  return ((await r.json()) as { tokens: number[] }).tokens
}

/** Tokens a request for `ids` should find cached after a request for `earlier` (same salt). */
function expectedHit(ids: number[], earlier: number[]): number {
  let common = 0
  while (common < ids.length && common < earlier.length && ids[common] === earlier[common]) common++
  const sharedBlocks = Math.floor(common / BLOCK)
  return Math.min(sharedBlocks, Math.floor((ids.length - 1) / BLOCK)) * BLOCK
}

async function stats(s: { url: string; bearer: () => Record<string, string> }): Promise<any> {
  return (await fetch(s.url + '/admin/stats', { headers: s.bearer() }).then((x) => x.json() as Promise<any>)).inference['weft-tiny']
}

const cached = (r: Reply) => r.usage.prompt_tokens_details?.cached_tokens
const content = (r: Reply) => r.choices.map((c) => c.message.content)

t.test('an identical long prompt: the second request starts from the cache, same greedy reply', async (t) => {
  const m = convo(1)
  const ids = await promptIds(chat.s, m)
  t.ok(ids.length > 4 * BLOCK, `a prompt of several blocks (${ids.length} tokens)`)
  const want = Math.floor((ids.length - 1) / BLOCK) * BLOCK
  const before = await stats(chat.s)
  const first = await create(chat.client, m, { logprobs: true, top_logprobs: 3 })
  t.equal(first.usage.prompt_tokens, ids.length)
  t.equal(cached(first), 0, 'nothing cached the first time')
  const second = await create(chat.client, m, { logprobs: true, top_logprobs: 3 })
  t.equal(cached(second), want, `the full blocks but the last token's: floor((${ids.length} - 1) / ${BLOCK}) × ${BLOCK}`)
  t.same(content(second), content(first), 'the same greedy reply with and without a hit')
  // Not only the same argmax: the same distributions, to rounding.
  const lps = (r: Reply) => r.choices[0]!.logprobs!.content!.flatMap((c) => c.top_logprobs.map((x) => [x.token, x.logprob]))
  const [a, b] = [lps(first), lps(second)]
  t.equal(a.length, 24 * 3)
  t.ok(
    a.every(([tok, lp], i) => tok === b[i]![0] && Math.abs((lp as number) - (b[i]![1] as number)) < 1e-4),
    'the same top logprobs at every step',
  )
  const after = await stats(chat.s)
  t.equal(after.prefix_cache.block_tokens, BLOCK)
  t.equal(after.prefix_cache.queried_tokens - before.prefix_cache.queried_tokens, 2 * ids.length, 'queried: both prompts')
  t.equal(after.prefix_cache.hit_tokens - before.prefix_cache.hit_tokens, want, 'hit: the second one')
  t.equal(after.prefix_cache.hit_rate, after.prefix_cache.hit_tokens / after.prefix_cache.queried_tokens)
  t.equal(after.prefix_cache.blocks_in_use, 0, 'no request holds blocks when idle')
  t.ok(after.prefix_cache.blocks_cached >= Math.floor(ids.length / BLOCK), 'the prompt blocks stay cached')
  t.equal(after.prefix_cache.blocks_total, Math.floor(after.kv_positions / BLOCK))
})

t.test('a prompt that shares only its beginning hits only the shared blocks, same reply as uncached', async (t) => {
  const base = convo(2, 80)
  const other = convo(2, 40, ' and then something else entirely different at the end')
  const [baseIds, otherIds] = [await promptIds(chat.s, base), await promptIds(chat.s, other)]
  const want = expectedHit(otherIds, baseIds)
  t.ok(want > 0 && want < Math.floor((otherIds.length - 1) / BLOCK) * BLOCK, `a partial hit (${want} of ${otherIds.length} tokens)`)
  await create(chat.client, base)
  const hit = await create(chat.client, other)
  t.equal(cached(hit), want, 'the blocks the prompts share from the start')
  const fresh = await create(chat.client, other, { cache_salt: 'partial-fresh' })
  t.equal(cached(fresh), 0, 'a new salt: computed in full')
  t.same(content(hit), content(fresh), 'the same greedy reply with a partial hit and without')
})

t.test('cache_salt: different salts never share, nor salted with unsalted; the same salt does', async (t) => {
  const m = convo(3)
  const ids = await promptIds(chat.s, m)
  const want = Math.floor((ids.length - 1) / BLOCK) * BLOCK
  const plain = await create(chat.client, m)
  const a1 = await create(chat.client, m, { cache_salt: 'tenant-a' })
  t.equal(cached(a1), 0, 'salted after unsalted: no hit')
  const b1 = await create(chat.client, m, { cache_salt: 'tenant-b' })
  t.equal(cached(b1), 0, 'another salt: no hit')
  const a2 = await create(chat.client, m, { cache_salt: 'tenant-a' })
  t.equal(cached(a2), want, 'the same salt: hit')
  const again = await create(chat.client, m)
  t.equal(cached(again), want, 'unsalted again: its own blocks')
  for (const r of [a1, b1, a2, again]) t.same(content(r), content(plain), 'every reply the same')
})

t.test('the n choices of a request share the cached prompt: the same choices as without a hit', async (t) => {
  const m = convo(4)
  const ids = await promptIds(chat.s, m)
  const body = { n: 3, temperature: 1, seed: 7 }
  const miss = await create(chat.client, m, body)
  const hit = await create(chat.client, m, body)
  t.equal(cached(miss), 0)
  t.equal(cached(hit), Math.floor((ids.length - 1) / BLOCK) * BLOCK)
  t.same(content(hit), content(miss), 'each choice as before')
  t.equal(new Set(content(hit)).size, 3, 'three different choices')
})

t.test('tensors do not leak: live tensors beside the cached blocks stay the same over many requests', async (t) => {
  const m = convo(5)
  await create(chat.client, m)
  const before = await stats(chat.s)
  for (let i = 0; i < 6; i++) {
    await create(chat.client, i % 2 ? m : convo(50 + i, 30), i % 3 ? {} : { n: 2, temperature: 1, seed: i })
    await create(chat.client, m, { stream: true, stream_options: { include_usage: true } } as Extra).then(async (s) => {
      for await (const _ of s as unknown as AsyncIterable<unknown>);
    })
  }
  const after = await stats(chat.s)
  t.ok(after.prefix_cache.blocks_cached > before.prefix_cache.blocks_cached, 'more blocks cached')
  t.equal(after.tensors - after.prefix_cache.tensors, before.tensors - before.prefix_cache.tensors, 'the rest is as before')
})

t.test('a bad cache_salt is a 400', async (t) => {
  const m = convo(6, 5)
  for (const salt of ['', 'x'.repeat(129), 'a/b', 'a@b', 'a\\b', 'a\u0000b', 7]) {
    const e = await create(chat.client, m, { cache_salt: salt, max_tokens: 1 }).catch((x: unknown) => x)
    t.ok(e instanceof OpenAI.BadRequestError, `${JSON.stringify(salt)} refused`)
    t.equal((e as { status?: number }).status, 400)
  }
  const ok = await create(chat.client, m, { cache_salt: 'y'.repeat(128) + 'é', max_tokens: 1 }).catch((x: unknown) => x)
  t.ok(ok instanceof OpenAI.BadRequestError, '129 characters refused')
  const fine = await create(chat.client, m, { cache_salt: 'ÿ'.repeat(128), max_tokens: 1 })
  t.equal(fine.choices.length, 1, '128 characters of any other kind accepted')
})

t.test('a small KV budget: idle blocks are evicted, least recently used first, and replies stay right', async (t) => {
  const prompts = [convo(10, 20), convo(11, 20), convo(12, 20)]
  const ids = await Promise.all(prompts.map((m) => promptIds(tight.s, m)))
  for (const x of ids) t.ok(x.length + 24 <= SMALL_BUDGET && x.length > 5 * BLOCK, 'each fits the budget alone')
  const first: (string | null)[][] = []
  for (const m of prompts) first.push(content(await create(tight.client, m)))
  let s = await stats(tight.s)
  t.ok(s.prefix_cache.blocks_cached * BLOCK <= SMALL_BUDGET, 'the cache keeps within --kv-cache-tokens')
  t.equal(s.prefix_cache.blocks_total, SMALL_BUDGET / BLOCK)
  // The oldest prompt lost (at least) its tail to make room; the newest is whole.
  const again0 = await create(tight.client, prompts[0]!)
  t.ok(cached(again0)! < Math.floor((ids[0]!.length - 1) / BLOCK) * BLOCK, `the oldest partly evicted (${cached(again0)} cached)`)
  t.same(content(again0), first[0], 'its reply unchanged')
  for (let round = 0; round < 2; round++)
    for (const [i, m] of prompts.entries()) t.same(content(await create(tight.client, m)), first[i], `prompt ${i} again: same reply`)
  s = await stats(tight.s)
  t.ok(s.prefix_cache.blocks_cached * BLOCK <= SMALL_BUDGET, 'still within the budget')
  t.equal(s.prefix_cache.blocks_in_use, 0)
  t.equal(s.kv_positions_used, 0)
})

// The engine in this process, on the tiny model, with prefix caching on and off: same outputs, no hits
// when off, and every tensor a request makes is freed (tf.memory() of this very process).
t.test('in process: prefix caching off gives no hits and the same outputs; tensors are freed', async (t) => {
  await tf.setBackend('cpu')
  const dir = tempDir()
  t.teardown(() => rm(dir, { recursive: true, force: true }))
  await makeTinyModel(path.join(dir, 'm'))
  const m = await loadModel(path.join(dir, 'm'))
  t.teardown(() => m.model.dispose())
  const opts: EngineOptions = { maxNumSeqs: 8, maxWaiting: 8, kvTokens: 4096, prefillChunk: 64, priority: false, maxLogprobs: 5 }
  const engines = [true, false].map((on) => {
    const done = new Map<string, (e: WorkerEvent[]) => void>()
    const seen = new Map<string, WorkerEvent[]>()
    const emit = (e: WorkerEvent) => {
      if (!('id' in e)) return
      seen.set(e.id, [...(seen.get(e.id) ?? []), e])
      if (e.type === 'done' || e.type === 'error') done.get(e.id)?.(seen.get(e.id)!)
    }
    const engine = new Engine(m.model, m.tok, m.gen, { ...opts, prefixCaching: on }, emit)
    const running = engine.run()
    t.teardown(async () => {
      engine.stop()
      await running
      engine.dispose()
    })
    let k = 0
    const run = (content: string, extra: Partial<GenerateRequest> = {}) =>
      new Promise<{ text: string[]; cached: number | undefined }>((resolve) => {
        const id = `r${k++}`
        done.set(id, (events) => {
          const text = events.filter((e) => e.type === 'finish').map((e) => (e as { text: string }).text)
          const last = events[events.length - 1]!
          resolve({ text, cached: last.type === 'done' ? last.cachedTokens : -1 })
        })
        engine.submit(request(id, content, extra))
      })
    return { engine, run }
  })
  const [on, off] = engines as [(typeof engines)[0], (typeof engines)[0]]
  const long = text(20, 60)
  const tensorsBefore = tf.memory().numTensors
  const a1 = await on.run(long)
  const a2 = await on.run(long)
  const a3 = await on.run(long, { n: 2, temperature: 1, seed: 3 })
  const b1 = await off.run(long)
  const b2 = await off.run(long)
  const b3 = await off.run(long, { n: 2, temperature: 1, seed: 3 })
  t.equal(a1.cached, 0)
  t.ok(a2.cached! > 0, 'on: a hit')
  t.equal(a3.cached, a2.cached, 'on: n choices from the cached prompt')
  t.same([b1.cached, b2.cached, b3.cached], [0, 0, 0], 'off: never a hit')
  t.same(a2.text, a1.text, 'greedy: as without a hit')
  t.same(b2.text, a1.text, 'greedy: as with the cache off')
  t.same(a3.text, b3.text, 'seeded n choices: as with the cache off')
  t.equal(on.engine.stats.prefix_cache!.blocks_in_use, 0)
  t.equal(off.engine.stats.prefix_cache, null, 'off: no cache in the stats')
  t.equal(tf.memory().numTensors - tensorsBefore, on.engine.stats.prefix_cache!.tensors, 'the only tensors left are the cached blocks')
})

function request(id: string, content: string, extra: Partial<GenerateRequest>): GenerateRequest {
  return {
    id,
    messages: [{ role: 'user', content }],
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
    temperature: 0,
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
    ignoreEos: true,
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
