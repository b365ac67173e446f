import { randomBytes } from 'node:crypto'
import type { LlamaModel, KVCache } from './llama.js'
import * as tf from '@tensorflow/tfjs'
import { GREEDY_BELOW, Rng, Sampler, logSoftmax, topK, type Sampled } from './sampler.js'
import { TemplateError, type ModelTokenizer } from './tokenizer.js'
import type { EngineStats, GenerateRequest, TokenLogprob, WorkerEvent } from './protocol.js'

export interface EngineOptions {
  /** Sequences (choices) decoded together at most. */
  maxNumSeqs: number
  /** Requests waiting to start at most; past it a request is refused (429). */
  maxWaiting: number
  /** KV-cache positions all running sequences may hold together. */
  kvTokens: number
  /** Prompt tokens prefilled per step, over all sequences: a long prompt goes in pieces between decode steps. */
  prefillChunk: number
  /** Priority scheduling (lower `priority` first); otherwise first come, first served. */
  priority: boolean
  maxLogprobs: number
}

/** Sampling defaults of the model's generation_config.json (vLLM's `--generation-config auto`). */
export interface GenerationDefaults {
  temperature?: number
  top_p?: number
  top_k?: number
  min_p?: number
  repetition_penalty?: number
  presence_penalty?: number
  frequency_penalty?: number
  max_new_tokens?: number
}

export class RequestError extends Error {
  constructor(
    readonly status: number,
    message: string,
    readonly param: string | null = null,
  ) {
    super(message)
  }
}

interface Choice {
  index: number
  sampler: Sampler
  cache: KVCache
  /** Prompt tokens prefilled so far. */
  pos: number
  output: number[]
  /** Decoded visible text (stop string handling applied once finished). */
  text: string
  /** Characters, token ids and logprobs already sent. */
  sentChars: number
  sentIds: number
  pendingLogprobs: TokenLogprob[]
  finished: boolean
  firstAt: number
  lastAt: number
  gaps: number
}

interface Active {
  req: GenerateRequest
  promptIds: number[]
  maxTokens: number
  choices: Choice[]
  arrived: number
  started: number
  prefillDone: number
  reserved: number
  holdBack: number
  cancelled: boolean
  /** One entry per prompt token (the first null), when prompt_logprobs were asked for. */
  promptLogprobs: (Record<string, { logprob: number; rank: number; decoded_token: string }> | null)[] | null
}

const now = () => performance.now()

/**
 * The scheduler and generation loop of one model: requests wait in a bounded queue (FCFS or by
 * priority), join the running batch between decode steps while sequences and KV positions allow,
 * and are prefilled in chunks shared with the decode steps. Events go out through `emit`.
 */
export class Engine {
  private readonly waiting: Active[] = []
  private readonly running: Active[] = []
  private kvUsed = 0
  private wake: (() => void) | null = null
  private stopped = false

  constructor(
    private readonly model: LlamaModel,
    private readonly tok: ModelTokenizer,
    private readonly defaults: GenerationDefaults,
    private readonly opts: EngineOptions,
    private readonly emit: (e: WorkerEvent) => void,
  ) {}

  get stats(): EngineStats {
    return {
      running_requests: this.running.length,
      waiting_requests: this.waiting.length,
      running_sequences: this.running.reduce((s, a) => s + a.choices.filter((c) => !c.finished).length, 0),
      kv_positions_used: this.running.reduce((s, a) => s + a.choices.reduce((t, c) => t + c.cache.length, 0), 0),
      kv_positions: this.opts.kvTokens,
    }
  }

  /** Renders and tokenizes the request, checks it, and queues it; errors are emitted, not thrown. */
  submit(req: GenerateRequest): void {
    try {
      const a = this.prepare(req)
      if (this.waiting.length >= this.opts.maxWaiting)
        throw new RequestError(429, `The server is at capacity: ${this.waiting.length} requests are waiting. Retry later.`)
      this.waiting.push(a)
      if (this.opts.priority) this.waiting.sort((x, y) => x.req.priority - y.req.priority || x.arrived - y.arrived)
      this.emit({ type: 'accepted', id: req.id, promptTokens: a.promptIds.length, promptIds: a.promptIds, queuedMs: 0 })
      this.wake?.()
    } catch (e) {
      const err =
        e instanceof RequestError
          ? e
          : e instanceof TemplateError
            ? new RequestError(400, e.message)
            : new RequestError(500, 'Internal server error')
      if (err.status === 500) console.error(e)
      this.emit({ type: 'error', id: req.id, status: err.status, message: err.message, param: err.param })
    }
  }

  cancel(id: string): void {
    const w = this.waiting.findIndex((a) => a.req.id === id)
    if (w >= 0) {
      this.waiting.splice(w, 1)
      return
    }
    const a = this.running.find((x) => x.req.id === id)
    if (a) a.cancelled = true
  }

  /** The prompt token ids of a chat (for /tokenize and for submit). */
  promptIds(
    req: Pick<
      GenerateRequest,
      | 'messages'
      | 'addGenerationPrompt'
      | 'continueFinalMessage'
      | 'addSpecialTokens'
      | 'tools'
      | 'documents'
      | 'chatTemplate'
      | 'chatTemplateKwargs'
    >,
  ): number[] {
    const text = this.tok.render(req.messages, {
      addGenerationPrompt: req.addGenerationPrompt,
      continueFinalMessage: req.continueFinalMessage,
      tools: req.tools,
      documents: req.documents,
      template: req.chatTemplate,
      kwargs: req.chatTemplateKwargs,
    })
    return this.tok.encode(text, req.addSpecialTokens)
  }

  private prepare(req: GenerateRequest): Active {
    const V = this.model.vocabSize
    const outOfVocab = (ids: number[], what: string) => {
      const bad = ids.filter((i) => i >= V)
      if (bad.length)
        throw new RequestError(
          400,
          `token_id(s) [${bad.join(', ')}] in ${what} contain out-of-vocab token ids. Vocabulary size: ${V}`,
          what,
        )
    }
    if (req.logprobs !== null && req.logprobs > this.opts.maxLogprobs)
      throw new RequestError(
        400,
        `Requested sample logprobs of ${req.logprobs}, which is greater than max allowed: ${this.opts.maxLogprobs}`,
        'top_logprobs',
      )
    if (req.promptLogprobs !== null && req.promptLogprobs > this.opts.maxLogprobs)
      throw new RequestError(
        400,
        `Requested prompt logprobs of ${req.promptLogprobs}, which is greater than max allowed: ${this.opts.maxLogprobs}`,
        'prompt_logprobs',
      )
    if (req.logitBias)
      outOfVocab(
        req.logitBias.map(([id]) => id),
        'logit_bias',
      )
    outOfVocab(req.stopTokenIds, 'stop_token_ids')
    if (req.allowedTokenIds) {
      if (req.allowedTokenIds.some((i) => i >= V))
        throw new RequestError(400, 'allowed_token_ids contains out-of-vocab token id!', 'allowed_token_ids')
    }
    let promptIds = this.promptIds(req)
    const L = this.model.maxPositions
    if (req.truncatePromptTokens !== null) {
      if (req.truncatePromptTokens > L)
        throw new RequestError(
          400,
          'truncate_prompt_tokens value is greater than max_model_len. Please, select a smaller truncation size.',
          'truncate_prompt_tokens',
        )
      const keep = req.truncatePromptTokens === -1 ? L - 1 : req.truncatePromptTokens
      if (promptIds.length > keep) promptIds = promptIds.slice(promptIds.length - keep)
    }
    const P = promptIds.length
    if (P >= L)
      throw new RequestError(
        400,
        `This model's maximum context length is ${L} tokens. However, your request has ${P} input tokens. Please reduce the length of the input messages.`,
        'input_tokens',
      )
    if (req.maxTokens !== null && P + req.maxTokens > L) {
      throw new RequestError(
        400,
        `This model's maximum context length is ${L} tokens. However, you requested ${req.maxTokens} output tokens and your prompt contains ${P} input tokens, for a total of ${P + req.maxTokens} tokens. Please reduce the length of the input prompt or the number of requested output tokens.`,
        'max_tokens',
      )
    }
    const maxTokens = Math.min(L - P, req.maxTokens ?? this.defaults.max_new_tokens ?? L - P)
    if (req.minTokens > maxTokens)
      throw new RequestError(400, `min_tokens must be less than or equal to max_tokens=${maxTokens}, got ${req.minTokens}.`, 'min_tokens')
    const reserved = req.n * (P + maxTokens)
    if (reserved > this.opts.kvTokens)
      throw new RequestError(
        400,
        `This request needs ${reserved} KV-cache positions (${req.n} × (${P} prompt + ${maxTokens} output)), more than the ${this.opts.kvTokens} the server holds. Lower n or max_tokens.`,
        'max_tokens',
      )
    const temperature = req.temperature ?? this.defaults.temperature ?? 1
    const greedy = temperature < GREEDY_BELOW
    if (greedy && req.n > 1) throw new RequestError(400, `n must be 1 when using greedy sampling, got ${req.n}.`, 'n')
    const stopIds = [...new Set([...(req.ignoreEos ? [] : this.tok.eosIds), ...req.stopTokenIds])]
    const badWords = this.badWordIds(req.badWords)
    const seedBase = req.seed !== null && req.seed !== -1 ? BigInt(req.seed) : randomBytes(8).readBigInt64LE()
    const choices: Choice[] = []
    for (let i = 0; i < req.n; i++) {
      const sampler = new Sampler(
        {
          temperature,
          topP: greedy ? 1 : (req.topP ?? this.defaults.top_p ?? 1),
          topK: greedy ? 0 : Math.max(0, req.topK ?? this.defaults.top_k ?? 0),
          minP: greedy ? 0 : (req.minP ?? this.defaults.min_p ?? 0),
          repetitionPenalty: req.repetitionPenalty ?? this.defaults.repetition_penalty ?? 1,
          frequencyPenalty: req.frequencyPenalty ?? this.defaults.frequency_penalty ?? 0,
          presencePenalty: req.presencePenalty ?? this.defaults.presence_penalty ?? 0,
          logitBias: req.logitBias ? new Map(req.logitBias.map(([id, b]) => [id, Math.max(-100, Math.min(100, b))])) : null,
          minTokens: req.minTokens,
          allowedTokenIds: req.allowedTokenIds ? new Set(req.allowedTokenIds) : null,
          badWords,
          stopIds,
          logprobs: req.logprobs,
          seed: req.seed,
        },
        promptIds,
        new Rng(seedBase + BigInt(i)),
      )
      choices.push({
        index: i,
        sampler,
        cache: this.model.newCache(),
        pos: 0,
        output: [],
        text: '',
        sentChars: 0,
        sentIds: 0,
        pendingLogprobs: [],
        finished: false,
        firstAt: 0,
        lastAt: 0,
        gaps: 0,
      })
    }
    const holdBack = req.stream && req.stop.length && !req.includeStopStrInOutput ? Math.max(...req.stop.map((s) => s.length)) - 1 : 0
    const promptLogprobs = req.promptLogprobs === null ? null : new Array(promptIds.length).fill(null)
    return {
      req,
      promptIds,
      maxTokens,
      choices,
      arrived: now(),
      started: 0,
      prefillDone: 0,
      reserved,
      holdBack,
      cancelled: false,
      promptLogprobs,
    }
  }

  /** bad_words as token sequences: each word as given and with a leading space (kept when it differs), as vLLM does. */
  private badWordIds(words: string[]): number[][] {
    const out: number[][] = []
    for (const w of words) {
      const plain = this.tok.encode(w.trimStart(), false)
      if (plain.length) out.push(plain)
      const spaced = this.tok.encode(' ' + w.trimStart(), false)
      if (spaced.length && spaced.length === plain.length && spaced[0] !== plain[0]) out.push(spaced)
    }
    return out
  }

  /** Moves waiting requests into the batch while sequences and KV positions allow. */
  private admit(): void {
    while (this.waiting.length) {
      const a = this.waiting[0]!
      const seqs = this.running.reduce((s, r) => s + r.choices.length, 0)
      if (this.running.length && (seqs + a.choices.length > this.opts.maxNumSeqs || this.kvUsed + a.reserved > this.opts.kvTokens)) break
      this.waiting.shift()
      a.started = now()
      this.kvUsed += a.reserved
      this.running.push(a)
    }
  }

  /** Runs until stop(): one step at a time, yielding to the message loop between steps. */
  async run(): Promise<void> {
    while (!this.stopped) {
      this.reap()
      this.admit()
      if (!this.running.length) {
        await new Promise<void>((r) => (this.wake = r))
        this.wake = null
        continue
      }
      try {
        this.step()
      } catch (e) {
        console.error(e)
        for (const a of this.running.splice(0)) this.fail(a, 'Internal server error')
      }
      await new Promise((r) => setImmediate(r))
    }
  }

  stop(): void {
    this.stopped = true
    this.wake?.()
  }

  /** Drops cancelled requests (client gone): their caches are freed. */
  private reap(): void {
    for (let i = this.running.length - 1; i >= 0; i--) {
      const a = this.running[i]!
      if (!a.cancelled) continue
      this.running.splice(i, 1)
      this.release(a)
    }
  }

  private release(a: Active): void {
    for (const c of a.choices) c.cache.dispose()
    this.kvUsed -= a.reserved
  }

  private fail(a: Active, message: string): void {
    this.release(a)
    this.emit({ type: 'error', id: a.req.id, status: 500, message })
  }

  private step(): void {
    const steps: { choice: Choice; active: Active; tokens: number[]; from: number; samples: boolean; all: boolean }[] = []
    let budget = this.opts.prefillChunk
    for (const a of this.running) {
      const P = a.promptIds.length
      for (const c of a.choices) {
        if (c.finished) continue
        if (c.pos < P) {
          // The prompt is prefilled once, by choice 0; the others take copies of its cache (see fork).
          if (c.index > 0 || budget <= 0) continue
          const n = Math.min(budget, P - c.pos)
          budget -= n
          steps.push({
            choice: c,
            active: a,
            tokens: a.promptIds.slice(c.pos, c.pos + n),
            from: c.pos,
            samples: c.pos + n === P,
            all: a.promptLogprobs !== null,
          })
          c.pos += n
        } else steps.push({ choice: c, active: a, tokens: [c.output[c.output.length - 1]!], from: c.pos, samples: true, all: false })
      }
    }
    if (!steps.length) return
    const logits = this.model.forward(steps.map((s) => ({ tokens: s.tokens, cache: s.choice.cache, allLogits: s.all })))
    const t = now()
    for (const [i, s] of steps.entries()) {
      const l = logits[i]!
      if (!s.active.cancelled && (s.samples || s.all)) {
        const data = l.dataSync() as Float32Array
        const V = this.model.vocabSize
        if (s.all) this.promptLogprobs(s.active, data, s.from, s.tokens.length)
        if (s.samples) {
          const row = data.subarray(data.length - V)
          if (!s.active.prefillDone) s.active.prefillDone = t
          const a = s.active
          if (s.choice.pos === a.promptIds.length && s.choice.output.length === 0) this.fork(a, s.choice)
          // Every choice still to start samples its first token from the prompt's last logits.
          for (const c of s.choice.output.length === 0 ? a.choices.filter((x) => x.output.length === 0 && !x.finished) : [s.choice]) {
            const own = c === s.choice && a.choices.length === 1 ? row : row.slice()
            this.advance(a, c, c.sampler.sample(own, c.output), t)
          }
        }
      }
      l.dispose()
    }
    for (let i = this.running.length - 1; i >= 0; i--) {
      const a = this.running[i]!
      if (a.choices.every((c) => c.finished)) {
        this.running.splice(i, 1)
        this.release(a)
        this.done(a)
      }
    }
  }

  /** After choice 0 prefilled the prompt: the other choices share its keys and values (clones share the data). */
  private fork(a: Active, first: Choice): void {
    for (const c of a.choices) {
      if (c === first) continue
      for (let l = 0; l < c.cache.keys.length; l++) {
        c.cache.keys[l] = tf.clone(first.cache.keys[l]!)
        c.cache.values[l] = tf.clone(first.cache.values[l]!)
      }
      c.cache.length = first.cache.length
      c.pos = first.pos
    }
  }

  /**
   * Log probabilities of the prompt tokens from a prefill chunk's logits (`rows` positions from
   * `from`): the row at position p predicts token p + 1. Raw model output, no sampling processing.
   */
  private promptLogprobs(a: Active, data: Float32Array, from: number, rows: number): void {
    const V = this.model.vocabSize
    const k = a.req.promptLogprobs ?? 0
    for (let r = 0; r < rows; r++) {
      const p = from + r + 1
      if (p >= a.promptIds.length) break
      const lp = logSoftmax(data.subarray(r * V, (r + 1) * V))
      const actual = a.promptIds[p]!
      const entry: Record<string, { logprob: number; rank: number; decoded_token: string }> = {}
      let rank = 1
      for (let i = 0; i < V; i++) if (lp[i]! > lp[actual]!) rank++
      entry[String(actual)] = { logprob: Math.max(lp[actual]!, -9999), rank, decoded_token: this.tok.piece(actual) }
      topK(lp, k).forEach(([id, v], j) => {
        if (!(String(id) in entry)) entry[String(id)] = { logprob: Math.max(v, -9999), rank: j + 1, decoded_token: this.tok.piece(id) }
      })
      a.promptLogprobs![p] = entry
    }
  }

  /** Takes a sampled token: stop checks, text, events. */
  private advance(a: Active, c: Choice, s: Sampled, t: number): void {
    const r = a.req
    c.output.push(s.token)
    if (c.firstAt === 0) c.firstAt = t
    else c.gaps += t - c.lastAt
    c.lastAt = t
    if (s.logprob !== undefined) c.pendingLogprobs.push(this.logprobEntry(s, r.returnTokensAsTokenIds))
    let finish: 'stop' | 'length' | null = null
    let stopReason: string | number | null = null
    if (!r.ignoreEos && this.tok.eosIds.has(s.token)) finish = 'stop'
    else if (r.stopTokenIds.includes(s.token)) {
      finish = 'stop'
      stopReason = s.token
    }
    let text = this.tok.decode(c.output, r.skipSpecialTokens, r.spacesBetweenSpecialTokens)
    // An unfinished UTF-8 sequence decodes to U+FFFD: held until its last byte arrives.
    const complete = finish !== null || c.output.length >= a.maxTokens
    if (!complete) while (text.endsWith('\uFFFD')) text = text.slice(0, -1)
    if (finish === null && r.stop.length && c.output.length >= r.minTokens) {
      const from = Math.max(0, c.text.length - Math.max(...r.stop.map((x) => x.length)))
      let best = -1
      let which = ''
      for (const x of r.stop) {
        const at = text.indexOf(x, from)
        if (at >= 0 && (best < 0 || at < best)) [best, which] = [at, x]
      }
      if (best >= 0) {
        finish = 'stop'
        stopReason = which
        text = text.slice(0, r.includeStopStrInOutput ? best + which.length : best)
      }
    }
    if (finish === null && (c.output.length >= a.maxTokens || c.cache.length + 1 >= this.model.maxPositions)) finish = 'length'
    c.text = text
    if (finish !== null) {
      c.finished = true
      const piece = r.stream ? text.slice(c.sentChars) : text
      this.emit({
        type: 'finish',
        id: r.id,
        choice: c.index,
        text: piece,
        tokenIds: r.stream ? c.output.slice(c.sentIds) : c.output,
        logprobs: s.logprob !== undefined ? this.takeLogprobs(c, r.stream) : null,
        completionTokens: c.output.length,
        finishReason: finish,
        stopReason,
      })
      return
    }
    if (!r.stream) return
    const visible = Math.max(c.sentChars, text.length - a.holdBack)
    this.emit({
      type: 'delta',
      id: r.id,
      choice: c.index,
      text: text.slice(c.sentChars, visible),
      tokenIds: c.output.slice(c.sentIds),
      logprobs: s.logprob !== undefined ? this.takeLogprobs(c, true) : null,
      completionTokens: c.output.length,
    })
    c.sentChars = visible
    c.sentIds = c.output.length
  }

  private takeLogprobs(c: Choice, stream: boolean): TokenLogprob[] {
    const out = stream ? c.pendingLogprobs.splice(0) : c.pendingLogprobs
    return out
  }

  private logprobEntry(s: Sampled, asIds: boolean): TokenLogprob {
    const entry = (id: number, lp: number) => {
      const token = asIds ? `token_id:${id}` : this.tok.piece(id)
      return { token, logprob: Math.max(lp, -9999), bytes: [...Buffer.from(asIds ? this.tok.piece(id) : token, 'utf8')] }
    }
    return { ...entry(s.token, s.logprob!), top_logprobs: (s.top ?? []).map(([id, lp]) => entry(id, lp)) }
  }

  private done(a: Active): void {
    const end = now()
    const completion = a.choices.reduce((s, c) => s + c.output.length, 0)
    const firsts = a.choices.map((c) => c.firstAt).filter((x) => x > 0)
    const gaps = a.choices.map((c) => (c.output.length > 1 ? c.gaps / (c.output.length - 1) : 0))
    this.emit({
      type: 'done',
      id: a.req.id,
      promptTokens: a.promptIds.length,
      completionTokens: completion,
      promptLogprobs: a.promptLogprobs,
      timings: {
        queued_ms: a.started - a.arrived,
        prefill_ms: (a.prefillDone || end) - a.started,
        time_to_first_token_ms: (firsts.length ? Math.min(...firsts) : end) - a.arrived,
        inter_token_ms: gaps.reduce((x, y) => x + y, 0) / gaps.length,
        total_ms: end - a.arrived,
      },
    })
  }
}
