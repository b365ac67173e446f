import t from 'tap'
import {
  LOGITS_PROCESSORS,
  allowedTokenIds,
  argmax,
  badWords,
  frequencyPresencePenalties,
  logitBias,
  minTokens,
  repetitionPenalty,
  type SamplingContext,
} from '../src/inference/logits-processors.js'
import { draw, drawToken, minP, rank, temperature, topK, topP, total, weigh } from '../src/inference/random-sampling.js'
import { Rng } from '../src/inference/rng.js'
import { Sampler } from '../src/inference/sampler.js'
import type { SamplingParams } from '../src/inference/sampling-params.js'

// Every expected value below is worked out by hand from the definition, not by the code under test.

const params = (p: Partial<SamplingParams> = {}): SamplingParams => ({
  temperature: 1,
  topP: 1,
  topK: 0,
  minP: 0,
  repetitionPenalty: 1,
  frequencyPenalty: 0,
  presencePenalty: 0,
  logitBias: null,
  minTokens: 0,
  allowedTokenIds: null,
  badWords: [],
  stopIds: [],
  logprobs: null,
  seed: null,
  ...p,
})

const ctx = (p: Partial<SamplingParams>, more: Partial<SamplingContext> = {}): SamplingContext => ({
  params: params(p),
  output: [],
  seen: new Set(),
  counts: new Map(),
  ...more,
})

const run = (f: (l: Float32Array, c: SamplingContext) => void, logits: number[], c: SamplingContext) => {
  const l = Float32Array.from(logits)
  f(l, c)
  return [...l]
}

t.test('allowed_token_ids: every other token becomes impossible', async (t) => {
  t.same(run(allowedTokenIds, [1, 2, 3, 4], ctx({ allowedTokenIds: new Set([1, 3]) })), [-Infinity, 2, -Infinity, 4])
  t.same(run(allowedTokenIds, [1, 2], ctx({})), [1, 2], 'off when not given')
})

t.test('bad_words: the last token of a word is blocked when the output ends with the rest', async (t) => {
  const words = [[5], [1, 2], [0, 1, 3]]
  // [5] always; [1, 2] because the output ends with 1; [0, 1, 3] not (the output ends 4, 1).
  t.same(run(badWords, [0, 0, 0, 0, 0, 0], ctx({ badWords: words }, { output: [4, 1] })), [0, 0, -Infinity, 0, 0, -Infinity])
  t.same(run(badWords, [0, 0, 0, 0, 0, 0], ctx({ badWords: words }, { output: [0, 1] })), [0, 0, -Infinity, -Infinity, 0, -Infinity])
  t.same(run(badWords, [0, 0, 0, 0, 0, 0], ctx({ badWords: [[0, 1, 3]] }, { output: [1] })), [0, 0, 0, 0, 0, 0], 'longer than the output')
})

t.test('min_tokens: stop ids are blocked until the output is long enough', async (t) => {
  const p = { minTokens: 2, stopIds: [0, 9] }
  t.same(run(minTokens, [1, 1, 1], ctx(p, { output: [2] })), [-Infinity, 1, 1], 'ids past the vocabulary are ignored')
  t.same(run(minTokens, [1, 1, 1], ctx(p, { output: [2, 2] })), [1, 1, 1])
})

t.test('logit_bias: added to the named tokens', async (t) => {
  t.same(
    run(
      logitBias,
      [1, 1, 1],
      ctx({
        logitBias: new Map([
          [1, 2.5],
          [7, 1],
        ]),
      }),
    ),
    [1, 3.5, 1],
  )
})

t.test('repetition_penalty: seen tokens divided (positive) or multiplied (negative)', async (t) => {
  t.same(run(repetitionPenalty, [4, -3, 5], ctx({ repetitionPenalty: 2 }, { seen: new Set([0, 1, 8]) })), [2, -6, 5])
})

t.test('frequency and presence penalties: frequency × count + presence off each generated token', async (t) => {
  const c = ctx(
    { frequencyPenalty: 0.5, presencePenalty: 1 },
    {
      counts: new Map([
        [0, 2],
        [2, 1],
      ]),
    },
  )
  t.same(run(frequencyPresencePenalties, [4, 0, 3], c), [2, 0, 1.5])
})

t.test('argmax: the first largest', async (t) => {
  t.equal(argmax(Float32Array.from([1, 3, 3, 2])), 1)
})

t.test('temperature: logits divided by it (at least 0.01); the largest returned', async (t) => {
  const l = Float32Array.from([2, -4, 1])
  t.equal(temperature(l, 0.5), 4)
  t.same([...l], [4, -8, 2])
  const tiny = Float32Array.from([2])
  t.equal(temperature(tiny, 0.001), 200)
})

t.test('min_p: tokens under min_p × the top probability are dropped', async (t) => {
  // floor = 0 + ln 0.2 ≈ -1.609: -1 stays, -3 goes.
  const l = Float32Array.from([0, -1, -3])
  minP(l, 0, 0.2)
  t.same([...l], [0, -1, -Infinity])
})

t.test('rank: possible tokens, largest logit first, ties by id', async (t) => {
  t.same(rank(Float32Array.from([1, -Infinity, 3, 1])), [2, 0, 3])
})

t.test('top_k: keeps k, and the ties of the k-th', async (t) => {
  const l = Float32Array.from([3, 2, 2, 1])
  t.equal(topK(l, [0, 1, 2, 3], 2), 3)
  t.equal(topK(l, [0, 1, 2, 3], 1), 1)
  t.equal(topK(l, [0, 1, 2, 3], 0), 4, '0: off')
})

t.test('weigh and total: exp(logit - max) of the kept, and their sum', async (t) => {
  const probs = weigh(Float32Array.from([0, Math.log(0.5), -5]), [0, 1, 2], 2, 0)
  t.equal(probs.length, 2)
  t.equal(probs[0], 1)
  t.ok(Math.abs(probs[1]! - 0.5) < 1e-7)
  t.ok(Math.abs(total(probs, 2) - 1.5) < 1e-7)
})

t.test('top_p: the smallest top set reaching the mass', async (t) => {
  const probs = Float64Array.from([0.5, 0.3, 0.2])
  t.equal(topP(probs, 1, 0.7), 2, '0.5 < 0.7 ≤ 0.8')
  t.equal(topP(probs, 1, 0.5), 1)
  t.equal(topP(probs, 1, 1), 3, '1: off')
  t.equal(topP(probs, 1, 0), 1, 'the most likely token always stays')
})

t.test('draw: walks the cumulative weights with u × sum', async (t) => {
  const probs = Float64Array.from([1, 3])
  t.equal(draw([7, 3], probs, 2, 4, 0.2), 7, '0.8 < 1')
  t.equal(draw([7, 3], probs, 2, 4, 0.5), 3, '2 ≥ 1')
  t.equal(draw([7, 3], probs, 1, 1, 0.99), 7, 'only the kept')
})

t.test('the chain: processors in vLLM order', async (t) => {
  t.same(
    LOGITS_PROCESSORS.map((f) => f.name),
    ['allowedTokenIds', 'badWords', 'minTokens', 'logitBias', 'repetitionPenalty', 'frequencyPresencePenalties'],
  )
  // logit_bias before the repetition penalty: (1 + 1) / 2 = 1, not 1 / 2 + 1 = 1.5.
  const l = Float32Array.from([1, 0])
  const c = ctx({ logitBias: new Map([[0, 1]]), repetitionPenalty: 2 }, { seen: new Set([0]) })
  for (const f of LOGITS_PROCESSORS) f(l, c)
  t.same([...l], [1, 0])
})

t.test('random sampling: temperature before min_p', async (t) => {
  // At temperature 2 the logits are [0, -0.5]; ln 0.6 ≈ -0.51 keeps both (min_p first would drop -1).
  // Weights 1 and e^-0.5 ≈ 0.607: u = 0.99 lands on the second.
  const p = params({ temperature: 2, minP: 0.6 })
  t.equal(drawToken(Float32Array.from([0, -1]), p, { next: () => 0.99 }), 1)
  t.equal(drawToken(Float32Array.from([-Infinity, -Infinity]), p, { next: () => 0.5 }), 0, 'nothing possible: token 0')
})

t.test('Sampler: raw logprobs before processing, then processors, then argmax or the draw', async (t) => {
  const s = new Sampler(params({ temperature: 0, logitBias: new Map([[1, 5]]), logprobs: 1 }), [], new Rng(1n))
  const r = s.sample(Float32Array.from([2, 0]), [])
  t.equal(r.token, 1, 'the bias makes token 1 the argmax')
  // Raw: log(e^0 / (e^2 + e^0)) = -ln(1 + e^2) ≈ -2.1269; token 0 is more likely, so rank 2.
  t.ok(Math.abs(r.logprob! + 2.126928) < 1e-5)
  t.equal(r.rank, 2)
  t.equal(r.top!.length, 1)
  t.equal(r.top![0]![0], 0)
  // The token now counts for the penalties: with presence 10 token 1 drops below token 0.
  const q = new Sampler(params({ temperature: 0, presencePenalty: 10 }), [], new Rng(1n))
  t.equal(q.sample(Float32Array.from([0, 1]), []).token, 1)
  t.equal(q.sample(Float32Array.from([0, 1]), [1]).token, 0)
})
