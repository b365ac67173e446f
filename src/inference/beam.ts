/**
 * Beam search as vLLM runs it (`use_beam_search`): `n` live beams; each step every live beam is
 * extended by its 2·n most likely next tokens (raw log-probabilities: temperature and the sampling
 * processors play no part), a candidate ending in end-of-sequence, a stop token id or a stop string
 * is set aside as finished, and the n best of the rest live on. After max_tokens steps the finished
 * and the live beams are ranked together and the n best returned, best first. A beam's score is its
 * cumulative log-probability over (prompt + generated tokens, the closing end-of-sequence not
 * counted) ^ length_penalty — vLLM counts the prompt in the length.
 *
 * The prompt is prefilled once; a beam kept by more than one child is forked by cloning its KV
 * cache (TF.js clones share the data; each child's next step concatenates onto its own copy).
 */
import type { KVCache } from './kv-cache.js'
import type { LlamaModel } from './llama.js'
import type { GenerateRequest, TokenLogprob, WorkerEvent } from './protocol.js'
import { RequestError, now, prepare, type Active, type Preparer } from './request.js'
import { largest, logSoftmax } from './sampler.js'
import type { ModelTokenizer } from './tokenizer.js'
import type { Output } from './output.js'

/** A step's record for logprobs: the chosen token, its log-probability and the step's most likely tokens. */
interface StepLogprob {
  token: number
  logprob: number
  top: [number, number][]
}

export interface Beam {
  /** Generated tokens (a closing end-of-sequence only with include_stop_str_in_output). */
  tokens: number[]
  cum: number
  /** Tokens the length penalty counts besides the prompt: the closing end-of-sequence is not one. */
  length: number
  steps: StepLogprob[]
  finish: 'stop' | 'length' | null
  stopReason: string | number | null
  /** The text, when a stop string cut it; else decoded at the end. */
  text: string | null
  /** Live beams only. */
  cache: KVCache | null
}

/** vLLM's beam score: cumulative log-probability over length^penalty, the length counting the prompt. */
export function beamScore(cum: number, length: number, lengthPenalty: number): number {
  return cum / length ** lengthPenalty
}

/** A live candidate: a parent beam and one more token. */
type Candidate = Beam & { parent: Beam }

export class BeamRun {
  private live: Beam[] = []
  private finished: Beam[] = []
  private rows: Float32Array[] | null = null
  private readonly width: number
  private readonly penalty: number
  private readonly maxStop: number
  private firstAt = 0

  constructor(
    private readonly model: LlamaModel,
    private readonly tok: ModelTokenizer,
    readonly a: Active,
    private readonly emit: (e: WorkerEvent) => void,
    /** Computes prompt logprobs from the prefill's logits, when asked for. */
    private readonly out: Output,
  ) {
    this.width = a.req.n
    this.penalty = a.req.beamSearch?.lengthPenalty ?? 1
    this.maxStop = Math.max(0, ...a.req.stop.map((s) => s.length))
  }

  /** Sequences it runs (for the batch's sequence limit). */
  get sequences(): number {
    return this.width
  }

  /** KV positions its live beams hold. */
  get positions(): number {
    return this.live.reduce((s, b) => s + (b.cache?.length ?? 0), 0)
  }

  /** One step: the prompt's prefill first, then one token for every live beam. True once it has answered. */
  step(): boolean {
    if (!this.rows) {
      const root: Beam = { tokens: [], cum: 0, length: 0, steps: [], finish: null, stopReason: null, text: null, cache: null }
      root.cache = this.model.newCache()
      this.live = [root]
      this.rows = [this.prefill(root.cache)]
      this.a.prefillDone = now()
    }
    this.live = this.select(this.expand())
    if (!this.firstAt) this.firstAt = now()
    const generated = this.live[0]?.tokens.length ?? 0
    if (generated >= this.a.maxTokens || !this.live.length) {
      this.answer()
      return true
    }
    this.rows = this.forward(this.live.map((b) => [b.tokens[b.tokens.length - 1]!]))
    return false
  }

  /** The prompt through a new cache: the last position's log-probabilities (and the prompt's logprobs, if asked). */
  private prefill(cache: KVCache): Float32Array {
    const V = this.model.vocabSize
    const all = this.a.promptLogprobs !== null
    const [data] = this.model.forward([{ tokens: this.a.promptIds, cache, allLogits: all }]) as [Float32Array]
    if (all) this.out.promptLogprobs(this.a, data, 0, this.a.promptIds.length, V)
    return logSoftmax(data.subarray(data.length - V))
  }

  /** The last-position log-probabilities of each live beam after feeding it `tokens`. */
  private forward(tokens: number[][]): Float32Array[] {
    const V = this.model.vocabSize
    const logits = this.model.forward(this.live.map((b, i) => ({ tokens: tokens[i]!, cache: b.cache! })))
    return logits.map((data) => logSoftmax(data.subarray(data.length - V)))
  }

  /** Every live beam's 2·width most likely continuations: finished ones set aside, the rest returned. */
  private expand(): Candidate[] {
    const r = this.a.req
    const out: Candidate[] = []
    const k = Math.max(2 * this.width, r.logprobs ?? 0)
    for (const [i, parent] of this.live.entries()) {
      const top = largest(this.rows![i]!, k)
      const shown = r.logprobs === null ? [] : top.slice(0, r.logprobs)
      for (const [token, lp] of top.slice(0, 2 * this.width)) {
        const c: Candidate = {
          parent,
          tokens: [...parent.tokens, token],
          cum: parent.cum + lp,
          length: parent.length + 1,
          steps: r.logprobs === null ? [] : [...parent.steps, { token, logprob: lp, top: shown }],
          finish: null,
          stopReason: null,
          text: null,
          cache: null,
        }
        if (this.ends(c, token)) this.keepFinished(c)
        else out.push(c)
      }
    }
    return out
  }

  /** End-of-sequence, a stop token id or a stop string closes the candidate (marked so). */
  private ends(c: Beam, token: number): boolean {
    const r = this.a.req
    if (!r.ignoreEos && this.tok.eosIds.has(token)) {
      c.length -= 1
      if (!r.includeStopStrInOutput) c.tokens.pop()
      c.finish = 'stop'
      c.stopReason = token
      return true
    }
    if (r.stopTokenIds.includes(token)) {
      ;[c.finish, c.stopReason] = ['stop', token]
      return true
    }
    if (!r.stop.length) return false
    const text = this.decode(c.tokens)
    const before = this.decode(c.tokens.slice(0, -1))
    const from = Math.max(0, before.length - this.maxStop)
    let at = -1
    let which = ''
    for (const s of r.stop) {
      const i = text.indexOf(s, from)
      if (i >= 0 && (at < 0 || i < at)) [at, which] = [i, s]
    }
    if (at < 0) return false
    c.text = text.slice(0, r.includeStopStrInOutput ? at + which.length : at)
    ;[c.finish, c.stopReason] = ['stop', which]
    return true
  }

  /** Only the best `width` finished beams can make the answer: their scores never change. */
  private keepFinished(c: Beam): void {
    this.finished.push(c)
    this.finished.sort((x, y) => this.score(y) - this.score(x))
    if (this.finished.length > this.width) this.finished.length = this.width
  }

  private score(b: Beam): number {
    return beamScore(b.cum, this.a.promptIds.length + b.length, this.penalty)
  }

  /**
   * The `width` best candidates live on; each takes its parent's cache — the first child the cache
   * itself, the others clones — and parents with no child left free theirs.
   */
  private select(cands: Candidate[]): Beam[] {
    const kept = [...cands].sort((x, y) => this.score(y) - this.score(x)).slice(0, this.width)
    const taken = new Set<Beam>()
    for (const c of kept) {
      const from = c.parent.cache!
      if (!taken.has(c.parent)) {
        taken.add(c.parent)
        c.cache = from
      } else c.cache = from.clone()
    }
    for (const b of this.live) if (!taken.has(b)) b.cache?.dispose()
    return kept.map(({ parent: _parent, ...b }) => b)
  }

  /** The best `width` beams of the finished and the live ones, best first, as finish events, then done. */
  private answer(): void {
    for (const b of this.live) b.finish = 'length'
    const best = [...this.finished, ...this.live].sort((x, y) => this.score(y) - this.score(x)).slice(0, this.width)
    const r = this.a.req
    let completion = 0
    for (const [i, b] of best.entries()) {
      completion += b.tokens.length
      this.emit({
        type: 'finish',
        id: r.id,
        choice: i,
        text: b.text ?? this.decode(b.tokens.filter((t, j) => j < b.length || !this.tok.eosIds.has(t))),
        tokenIds: b.tokens,
        logprobs: r.logprobs === null ? null : b.steps.map((s) => this.entry(s)),
        completionTokens: b.tokens.length,
        finishReason: b.finish ?? 'length',
        stopReason: b.stopReason,
      })
    }
    this.dispose()
    this.emitDone(completion)
  }

  private emitDone(completion: number): void {
    const a = this.a
    const end = now()
    this.emit({
      type: 'done',
      id: a.req.id,
      promptTokens: a.promptIds.length,
      completionTokens: completion,
      cachedTokens: 0,
      promptLogprobs: a.promptLogprobs,
      timings: {
        queued_ms: a.started - a.arrived,
        prefill_ms: (a.prefillDone || end) - a.started,
        time_to_first_token_ms: end - a.arrived,
        inter_token_ms: 0,
        total_ms: end - a.arrived,
      },
    })
  }

  private decode(ids: number[]): string {
    return this.tok.decode(ids, this.a.req.skipSpecialTokens, this.a.req.spacesBetweenSpecialTokens)
  }

  private entry(s: StepLogprob): TokenLogprob {
    const asIds = this.a.req.returnTokensAsTokenIds
    const one = (id: number, lp: number) => {
      const token = asIds ? `token_id:${id}` : this.tok.piece(id)
      return { token, logprob: Math.max(lp, -9999), bytes: [...Buffer.from(asIds ? this.tok.piece(id) : token, 'utf8')] }
    }
    return { ...one(s.token, s.logprob), top_logprobs: s.top.map(([id, lp]) => one(id, lp)) }
  }

  /** Frees the live beams' caches (after the answer, or when the request is cancelled or fails). */
  dispose(): void {
    for (const b of this.live) b.cache?.dispose()
    this.live = []
  }
}

/** A beam-search request made ready: checked and tokenized like any other, without a sampler's checks. */
export function prepareBeam(x: Preparer, req: GenerateRequest): Active {
  if (req.constraint) throw new RequestError(400, 'Structured outputs cannot be combined with beam search.', 'structured_outputs')
  // Beam search draws no samples, so vLLM's "n must be 1 when greedy" does not apply.
  const a = prepare(x, { ...req, temperature: 1 })
  a.req = req
  return a
}
