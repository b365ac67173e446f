import * as tf from '@tensorflow/tfjs-core'
import type { LlamaModel } from './llama.js'
import { Output } from './output.js'
import type { EngineStats, GenerateRequest, PrefixCacheStats, WorkerEvent } from './protocol.js'
import { BLOCK_TOKENS, PrefixCache, blockHashes, type Block } from './prefix-cache.js'
import {
  RequestError,
  now,
  prepare,
  promptIds,
  type Active,
  type Choice,
  type EngineOptions,
  type GenerationDefaults,
  type Preparer,
  type PromptRequest,
} from './request.js'
import { TemplateError, type ModelTokenizer } from './tokenizer.js'
import { applyTokenMask } from './logits-processors.js'
import { BeamRun, prepareBeam } from './beam.js'
import { GrammarError, type GrammarSource } from './structured/constraint.js'

/** Memory idle prefix-cache blocks may keep (running requests' caches are bounded by --kv-cache-tokens). */
const PREFIX_CACHE_BYTES = 1024 ** 3

/** One sequence's part of a step: the tokens it feeds, from which position, and what the step's logits are for. */
interface Work {
  choice: Choice
  active: Active
  tokens: number[]
  from: number
  /** The last prompt chunk or a decode step: a token is sampled from the last logits. */
  samples: boolean
  /** Prompt logprobs were asked for: logits of every position. */
  all: boolean
}

/**
 * The scheduler and generation loop of one model: requests wait in a bounded queue (FCFS or by
 * priority), join the running batch between decode steps while sequences and KV positions allow,
 * and are prefilled in chunks shared with the decode steps. Events go out through `emit`.
 */
export class Engine {
  private readonly waiting: Active[] = []
  private readonly running: Active[] = []
  /** Beam-search requests running (beam.ts): they step beside the batch, one step each per engine step. */
  private readonly beams: BeamRun[] = []
  private kvUsed = 0
  private wake: (() => void) | null = null
  private stopped = false
  private readonly out: Output
  private readonly preparer: Preparer
  /** Requests whose grammar is being compiled: not yet queued, but cancellable. */
  private readonly compiling = new Map<string, Active>()
  /** Cached prompt blocks; null with prefix caching off. */
  private readonly cache: PrefixCache | null
  /** The request whose `done` event is going out: it carries the request's cached tokens. */
  private closing: Active | null = null

  constructor(
    private readonly model: LlamaModel,
    private readonly tok: ModelTokenizer,
    private readonly defaults: GenerationDefaults,
    private readonly opts: EngineOptions,
    private readonly emit: (e: WorkerEvent) => void,
    /** Structured outputs for this model's vocabulary; null: requests with a constraint are refused. */
    private readonly grammars: GrammarSource | null = null,
  ) {
    this.out = new Output(tok, model.maxPositions, (e) =>
      emit(e.type === 'done' && this.closing?.req.id === e.id ? { ...e, cachedTokens: this.closing.cachedTokens } : e),
    )
    this.preparer = { model, tok, defaults, opts }
    // Idle cached blocks take at most PREFIX_CACHE_BYTES of keys and values (float32), within the KV budget.
    const bytesPerPosition = model.layerCount * 2 * model.kvHeads * model.headDim * 4
    const maxIdle = Math.min(opts.kvTokens, Math.floor(PREFIX_CACHE_BYTES / bytesPerPosition))
    this.cache = opts.prefixCaching === false ? null : new PrefixCache(model.layerCount, maxIdle)
  }

  get stats(): EngineStats {
    return {
      running_requests: this.running.length + this.beams.length,
      waiting_requests: this.waiting.length,
      running_sequences: this.running.reduce((s, a) => s + a.choices.filter((c) => !c.finished).length, 0) + this.beamSequences(),
      kv_positions_used:
        this.running.reduce((s, a) => s + a.choices.reduce((t, c) => t + c.cache.length, 0), 0) +
        this.beams.reduce((s, b) => s + b.positions, 0),
      kv_positions: this.opts.kvTokens,
      tensors: tf.memory().numTensors,
      prefix_cache: this.cacheStats(),
    }
  }

  private cacheStats(): PrefixCacheStats | null {
    if (!this.cache) return null
    const s = this.cache.stats()
    return {
      block_tokens: BLOCK_TOKENS,
      queried_tokens: s.queriedTokens,
      hit_tokens: s.hitTokens,
      hit_rate: s.queriedTokens ? s.hitTokens / s.queriedTokens : 0,
      blocks_in_use: s.blocksInUse,
      blocks_cached: s.blocksCached,
      blocks_total: Math.floor(this.opts.kvTokens / BLOCK_TOKENS),
      tensors: s.tensors,
    }
  }

  /**
   * Renders and tokenizes the request, checks it, and queues it; errors are emitted, not thrown. A
   * request with a constraint has its grammar compiled (or found in the cache) first, at admission,
   * in a grammar lane's thread: the running batch never waits for it, and a grammar xgrammar rejects
   * is a 400 before any output.
   */
  submit(req: GenerateRequest): void {
    try {
      const a = req.beamSearch ? prepareBeam(this.preparer, req) : prepare(this.preparer, req)
      if (this.cache) a.blockHashes = blockHashes(a.promptIds, req.cacheSalt ?? null, Math.floor(a.promptIds.length / BLOCK_TOKENS))
      if (!req.constraint) return this.enqueue(a)
      if (!this.grammars) throw new RequestError(400, 'Structured outputs are not available for this model.', 'structured_outputs')
      this.compiling.set(req.id, a)
      this.withGrammar(a, this.grammars).then(
        () => {
          this.compiling.delete(req.id)
          if (a.cancelled) this.disposeGrammars(a)
          else this.enqueue(a)
        },
        (e) => {
          this.compiling.delete(req.id)
          this.disposeGrammars(a)
          this.refuse(req.id, e)
        },
      )
    } catch (e) {
      this.refuse(req.id, e)
    }
  }

  private enqueue(a: Active): void {
    try {
      if (this.waiting.length >= this.opts.maxWaiting)
        throw new RequestError(429, `The server is at capacity: ${this.waiting.length} requests are waiting. Retry later.`)
    } catch (e) {
      this.disposeGrammars(a)
      return this.refuse(a.req.id, e)
    }
    this.waiting.push(a)
    if (this.opts.priority) this.waiting.sort((x, y) => x.req.priority - y.req.priority || x.arrived - y.arrived)
    this.emit({ type: 'accepted', id: a.req.id, promptTokens: a.promptIds.length, promptIds: a.promptIds, queuedMs: 0 })
    this.wake?.()
  }

  private refuse(id: string, e: unknown): void {
    const err =
      e instanceof RequestError
        ? e
        : e instanceof TemplateError
          ? new RequestError(400, e.message)
          : e instanceof GrammarError
            ? new RequestError(400, e.message, 'structured_outputs')
            : new RequestError(500, 'Internal server error')
    if (err.status === 500) console.error(e)
    this.emit({ type: 'error', id, status: err.status, message: err.message, param: err.param })
  }

  /** The compiled grammar of the request's constraint, and a matcher on it for each choice. */
  private async withGrammar(a: Active, grammars: GrammarSource): Promise<void> {
    const matchers = await grammars.open(a.req.constraint!, a.req.stopTokenIds, a.choices.length)
    for (const [i, c] of a.choices.entries()) c.grammar = matchers[i]!
  }

  private disposeGrammars(a: Active): void {
    for (const c of a.choices) {
      c.grammar?.dispose()
      c.grammar = null
    }
  }

  cancel(id: string): void {
    const compiling = this.compiling.get(id)
    if (compiling) {
      compiling.cancelled = true
      return
    }
    const w = this.waiting.findIndex((a) => a.req.id === id)
    if (w >= 0) {
      this.waiting.splice(w, 1)
      return
    }
    const a = this.running.find((x) => x.req.id === id) ?? this.beams.find((b) => b.a.req.id === id)?.a
    if (a) a.cancelled = true
  }

  /** The prompt token ids of a chat (for /tokenize and for submit). */
  promptIds(req: PromptRequest): number[] {
    return promptIds(this.tok, req)
  }

  /**
   * Moves waiting requests into the batch while sequences and KV positions allow. Idle cached blocks
   * count against the KV budget too: they are evicted (least recently used first) to make room.
   */
  private admit(): void {
    while (this.waiting.length) {
      const a = this.waiting[0]!
      const busy = this.running.length + this.beams.length > 0
      const seqs = this.running.reduce((s, r) => s + r.choices.length, 0) + this.beamSequences()
      if (busy && seqs + a.choices.length > this.opts.maxNumSeqs) break
      const hits = a.req.beamSearch ? [] : this.lookup(a)
      if (!this.makeRoom(a.reserved) && busy) {
        this.cache?.release(hits)
        break
      }
      this.waiting.shift()
      a.started = now()
      this.kvUsed += a.reserved
      if (a.req.beamSearch) {
        this.beams.push(new BeamRun(this.model, this.tok, a, this.emit, this.out))
        continue
      }
      this.running.push(a)
      this.startFrom(a, hits)
    }
  }

  /**
   * The cached blocks the prompt starts with, pinned. At least the last prompt token is always
   * computed (its logits give the first token); prompt logprobs need every position, so no hits.
   */
  private lookup(a: Active): Block[] {
    if (!this.cache || a.promptLogprobs) return []
    const hits = this.cache.match(a.blockHashes, Math.floor((a.promptIds.length - 1) / BLOCK_TOKENS))
    this.cache.acquire(hits)
    return hits
  }

  /** Evicts idle cached blocks until `need` more positions fit the budget; false if they cannot. */
  private makeRoom(need: number): boolean {
    while (this.kvUsed + need + (this.cache?.idleTokens ?? 0) > this.opts.kvTokens) if (!this.cache?.evictOne()) return false
    return true
  }

  /** An admitted request's first choice starts from its cached blocks: only the rest of the prompt is computed. */
  private startFrom(a: Active, hits: Block[]): void {
    if (!this.cache || a.promptLogprobs) return
    this.cache.count(a.promptIds.length, hits.length * BLOCK_TOKENS)
    if (!hits.length) return
    const first = a.choices[0]!
    this.cache.load(first.cache, hits)
    a.blocks = hits
    a.cachedTokens = first.pos = hits.length * BLOCK_TOKENS
  }

  /**
   * After its prefill, a request's full prompt blocks go to the cache (those another request stored
   * meanwhile are taken as they are), pinned by it until it ends.
   */
  private storePrompt(a: Active, c: Choice): void {
    if (!this.cache) return
    const full = a.blockHashes.length
    let from = a.blocks.length
    for (; from < full; from++) {
      const b = this.cache.get(a.blockHashes[from]!)
      if (!b) break
      this.cache.acquire([b])
      a.blocks.push(b)
    }
    a.blocks.push(...this.cache.store(c.cache, a.blockHashes, from, full))
  }

  /** Runs until stop(): one step at a time, yielding to the message loop between steps. */
  async run(): Promise<void> {
    while (!this.stopped) {
      this.reap()
      this.admit()
      if (!this.running.length && !this.beams.length) {
        await new Promise<void>((r) => (this.wake = r))
        this.wake = null
        continue
      }
      try {
        const work = this.schedule()
        const masks = this.masks(work)
        // Awaited inside step, after the forward pass; this only keeps an early failure from counting as unhandled.
        masks?.catch(() => {})
        await this.step(work, masks)
        this.stepBeams()
      } catch (e) {
        console.error(e)
        for (const a of this.running.splice(0)) this.fail(a, 'Internal server error')
        for (const b of this.beams.splice(0)) this.endBeam(b, 'Internal server error')
      }
      await new Promise((r) => setImmediate(r))
    }
  }

  stop(): void {
    this.stopped = true
    this.wake?.()
  }

  /** Frees what the engine holds once it has stopped: the cached blocks. */
  dispose(): void {
    for (const b of this.beams.splice(0)) b.dispose()
    this.cache?.dispose()
  }

  private beamSequences(): number {
    return this.beams.reduce((s, b) => s + b.sequences, 0)
  }

  /** One step of every beam search running; those that have answered leave. */
  private stepBeams(): void {
    for (let i = this.beams.length - 1; i >= 0; i--) {
      const b = this.beams[i]!
      if (!b.a.cancelled && !b.step()) continue
      this.beams.splice(i, 1)
      this.endBeam(b, null)
    }
  }

  /** Frees a beam search's caches and positions; with a message, fails it. */
  private endBeam(b: BeamRun, failure: string | null): void {
    b.dispose()
    this.kvUsed -= b.a.reserved
    if (failure !== null) this.emit({ type: 'error', id: b.a.req.id, status: 500, message: failure })
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
    this.cache?.release(a.blocks)
    a.blocks = []
    this.disposeGrammars(a)
    this.kvUsed -= a.reserved
  }

  private fail(a: Active, message: string): void {
    this.release(a)
    this.emit({ type: 'error', id: a.req.id, status: 500, message })
  }

  /**
   * The grammar masks of the sequences that sample this step, asked of their lanes now. A matcher's
   * state depends only on the tokens already taken, so the lanes compute them while this thread runs
   * the forward pass.
   */
  private masks(work: Work[]): Promise<Map<Choice, Int32Array>> | null {
    const asked: [Choice, Promise<Int32Array | null>][] = []
    for (const w of work) {
      if (!w.samples) continue
      for (const c of this.sampling(w)) if (c.grammar) asked.push([c, c.grammar.nextMask()])
    }
    if (!asked.length) return null
    return Promise.all(asked.map(([, p]) => p)).then((ms) => new Map(asked.map(([c], i) => [c, ms[i] ?? this.stopOnlyMask()])))
  }

  /** After the grammar is complete only end-of-sequence may follow (it reaches here only with ignore_eos). */
  private stopOnlyMask(): Int32Array {
    const mask = new Int32Array(Math.ceil(this.model.vocabSize / 32))
    for (const id of this.tok.eosIds) if (id < this.model.vocabSize) mask[id >> 5]! |= 1 << (id & 31)
    return mask
  }

  /** The choices that sample from a work item's logits: every choice still to start after the prompt, else its own. */
  private sampling(w: Work): Choice[] {
    return w.choice.output.length === 0 ? w.active.choices.filter((x) => x.output.length === 0 && !x.finished) : [w.choice]
  }

  /** One forward pass over the batch: prompt chunks and decode tokens together, then sampling and events. */
  private async step(work: Work[], asked: Promise<Map<Choice, Int32Array>> | null): Promise<void> {
    if (!work.length) return
    const logits = this.model.forward(work.map((w) => ({ tokens: w.tokens, cache: w.choice.cache, allLogits: w.all })))
    const masks = asked && (await asked)
    const t = now()
    for (const [i, w] of work.entries()) if (!w.active.cancelled && (w.samples || w.all)) this.take(w, logits[i]!, t, masks)
    for (let i = this.running.length - 1; i >= 0; i--) {
      const a = this.running[i]!
      if (a.choices.every((c) => c.finished)) {
        this.running.splice(i, 1)
        this.release(a)
        this.closing = a
        this.out.done(a)
        this.closing = null
      }
    }
  }

  /** This step's work: every running sequence's next token, and prompt chunks within the prefill budget. */
  private schedule(): Work[] {
    const work: Work[] = []
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
          work.push({
            choice: c,
            active: a,
            tokens: a.promptIds.slice(c.pos, c.pos + n),
            from: c.pos,
            samples: c.pos + n === P,
            all: a.promptLogprobs !== null,
          })
          c.pos += n
        } else work.push({ choice: c, active: a, tokens: [c.output[c.output.length - 1]!], from: c.pos, samples: true, all: false })
      }
    }
    return work
  }

  /** Uses one sequence's logits: prompt logprobs, then the next token of it (or, after the prompt, of every choice). */
  private take(w: Work, data: Float32Array, t: number, masks: Map<Choice, Int32Array> | null): void {
    const V = this.model.vocabSize
    if (w.all) this.out.promptLogprobs(w.active, data, w.from, w.tokens.length, V)
    if (!w.samples) return
    const row = data.subarray(data.length - V)
    if (!w.active.prefillDone) w.active.prefillDone = t
    const a = w.active
    if (w.choice.pos === a.promptIds.length && w.choice.output.length === 0) {
      this.storePrompt(a, w.choice)
      this.fork(a, w.choice)
    }
    // Every choice still to start samples its first token from the prompt's last logits.
    for (const c of this.sampling(w)) {
      const own = c === w.choice && a.choices.length === 1 ? row : row.slice()
      const mask = masks?.get(c)
      if (mask) applyTokenMask(own, mask)
      const s = c.sampler.sample(own, c.output)
      c.grammar?.accept(s.token)
      this.out.advance(a, c, s, t)
    }
  }

  /** After choice 0 prefilled the prompt: the other choices start from copies of its keys and values. */
  private fork(a: Active, first: Choice): void {
    for (const c of a.choices) {
      if (c === first) continue
      c.cache = first.cache.clone()
      c.pos = first.pos
    }
  }
}
