import * as tf from '@tensorflow/tfjs'
import type { LlamaModel } from './llama.js'
import { Output } from './output.js'
import type { EngineStats, GenerateRequest, WorkerEvent } from './protocol.js'
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
  private kvUsed = 0
  private wake: (() => void) | null = null
  private stopped = false
  private readonly out: Output
  private readonly preparer: Preparer

  constructor(
    private readonly model: LlamaModel,
    private readonly tok: ModelTokenizer,
    private readonly defaults: GenerationDefaults,
    private readonly opts: EngineOptions,
    private readonly emit: (e: WorkerEvent) => void,
  ) {
    this.out = new Output(tok, model.maxPositions, emit)
    this.preparer = { model, tok, defaults, opts }
  }

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
      const a = prepare(this.preparer, req)
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
  promptIds(req: PromptRequest): number[] {
    return promptIds(this.tok, req)
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

  /** One forward pass over the batch: prompt chunks and decode tokens together, then sampling and events. */
  private step(): void {
    const work = this.schedule()
    if (!work.length) return
    const logits = this.model.forward(work.map((w) => ({ tokens: w.tokens, cache: w.choice.cache, allLogits: w.all })))
    const t = now()
    for (const [i, w] of work.entries()) {
      const l = logits[i]!
      if (!w.active.cancelled && (w.samples || w.all)) this.take(w, l.dataSync() as Float32Array, t)
      l.dispose()
    }
    for (let i = this.running.length - 1; i >= 0; i--) {
      const a = this.running[i]!
      if (a.choices.every((c) => c.finished)) {
        this.running.splice(i, 1)
        this.release(a)
        this.out.done(a)
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
  private take(w: Work, data: Float32Array, t: number): void {
    const V = this.model.vocabSize
    if (w.all) this.out.promptLogprobs(w.active, data, w.from, w.tokens.length, V)
    if (!w.samples) return
    const row = data.subarray(data.length - V)
    if (!w.active.prefillDone) w.active.prefillDone = t
    const a = w.active
    if (w.choice.pos === a.promptIds.length && w.choice.output.length === 0) this.fork(a, w.choice)
    // Every choice still to start samples its first token from the prompt's last logits.
    for (const c of w.choice.output.length === 0 ? a.choices.filter((x) => x.output.length === 0 && !x.finished) : [w.choice]) {
      const own = c === w.choice && a.choices.length === 1 ? row : row.slice()
      this.out.advance(a, c, c.sampler.sample(own, c.output), t)
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
}
