import { Worker } from 'node:worker_threads'
import { fileURLToPath } from 'node:url'
import { randomUUID } from 'node:crypto'
import type { Logger } from 'pino'
import { progress } from '../core/progress.js'
import { workerExecArgv } from '../core/worker-pool-options.js'
import type { EngineStats, GenerateRequest, ModelInfo, PrefixCacheStats, WorkerCommand, WorkerEvent } from './protocol.js'
import type { WorkerConfig } from './worker.js'

/** Events of one request, pulled by the HTTP side as it writes them. */
export class RequestEvents implements AsyncIterable<WorkerEvent> {
  private readonly queue: WorkerEvent[] = []
  private waiter: (() => void) | null = null
  ended = false

  constructor(private readonly onCancel: () => void) {}

  push(e: WorkerEvent): void {
    this.queue.push(e)
    if (e.type === 'done' || e.type === 'error') this.ended = true
    this.waiter?.()
  }

  /** The client went away: the engine drops the sequence and frees its cache. */
  cancel(): void {
    if (this.ended) return
    this.ended = true
    this.onCancel()
    this.waiter?.()
  }

  /** The next event (undefined once cancelled and drained). */
  async next(): Promise<WorkerEvent | undefined> {
    while (!this.queue.length) {
      if (this.ended) return undefined
      await new Promise<void>((r) => (this.waiter = r))
      this.waiter = null
    }
    return this.queue.shift()
  }

  async *[Symbol.asyncIterator](): AsyncIterator<WorkerEvent> {
    for (let e = await this.next(); e; e = await this.next()) yield e
  }
}

const DOWN = 'The model is restarting after its inference worker failed. Retry later.'

/**
 * One model served by a dedicated worker thread. A worker that dies fails the requests it held
 * and is started again.
 */
export class ModelServer {
  private worker!: Worker
  private readonly pending = new Map<string, RequestEvents>()
  private readonly replies = new Map<string, { resolve: (v: unknown) => void; reject: (e: Error & { status?: number }) => void }>()
  private closing = false
  /** Between restart attempts: no worker to send to. */
  private down = false
  /** Restart attempts so far (the worker's failpoints can tell a restart from the first start). */
  private restarts = 0
  info!: ModelInfo

  private constructor(
    private readonly config: WorkerConfig,
    private readonly log: Logger,
  ) {}

  static async start(config: WorkerConfig, log: Logger): Promise<ModelServer> {
    const s = new ModelServer(config, log)
    await s.spawn()
    return s
  }

  private spawn(): Promise<void> {
    return new Promise((resolve, reject) => {
      const workerData: WorkerConfig = { ...this.config, restart: this.restarts }
      const w = new Worker(fileURLToPath(new URL('../../workers/inference.js', import.meta.url)), {
        workerData,
        execArgv: workerExecArgv(),
      })
      this.worker = w
      let ready = false
      // Loading large weights takes minutes: /ready and /admin/stats show it (the worker reports no steps within it).
      const loading = progress.start(`model load ${this.config.servedName}`, { warming: true, fields: { dir: this.config.modelDir } })
      w.on('message', (e: WorkerEvent | { type: 'fatal'; message: string }) => {
        if (e.type === 'fatal') {
          if (!ready) loading.fail(e.message)
          if (!ready) reject(new Error(`model ${this.config.modelDir}: ${e.message}`))
          else this.log.error({ model: this.config.servedName, err: e.message }, 'inference worker failed')
          return
        }
        if (e.type === 'ready') {
          ready = true
          loading.finish()
          this.loaded(e.model)
          resolve()
          return
        }
        if (e.type === 'reply') {
          const r = this.replies.get(e.id)
          this.replies.delete(e.id)
          if (e.error) r?.reject(Object.assign(new Error(e.error.message), { status: e.error.status }))
          else r?.resolve(e.result)
          return
        }
        const q = this.pending.get(e.id)
        if (!q) return
        q.push(e)
        if (e.type === 'done' || e.type === 'error') this.pending.delete(e.id)
      })
      w.on('error', (err) => this.log.error({ err }, 'inference worker error'))
      w.on('exit', (code) => {
        // Whatever it held (also what came in while a restarted worker was loading) would wait forever.
        this.failHeld()
        if (!ready) {
          loading.fail(`exited (${code})`)
          reject(new Error(`model ${this.config.modelDir}: the inference worker exited (${code}) while loading`))
          // The first start's failure is the caller's; a restart's is retried (restart()).
          return
        }
        if (this.closing) return
        this.log.error({ model: this.config.servedName, code }, 'inference worker exited; starting it again')
        this.restart(0)
      })
    })
  }

  private loaded(m: ModelInfo): void {
    this.info = m
    const { name: model, backend, threads, architecture, parameters, maxModelLen: max_model_len } = m
    this.log.info({ model, backend, threads, architecture, parameters, max_model_len }, 'model loaded')
    if (m.threadsError) this.log.warn({ model, err: m.threadsError }, 'threaded wasm backend did not start: running on one thread')
  }

  private failHeld(): void {
    const message = 'The inference worker stopped before this request completed; it is being restarted.'
    for (const [id, q] of this.pending) q.push({ type: 'error', id, status: 500, message })
    this.pending.clear()
    for (const r of this.replies.values()) r.reject(Object.assign(new Error(message), { status: 500 }))
    this.replies.clear()
  }

  /**
   * Starts the worker again: at once after a crash (requests sent meanwhile wait in the new worker's
   * port until it has loaded), then with a growing pause while it keeps failing to load. Between
   * attempts the model is down: requests are refused (503) rather than sent to a dead thread.
   */
  private restart(delayMs: number): void {
    this.down = delayMs > 0
    const attempt = () => {
      if (this.closing) return
      this.down = false
      this.restarts++
      this.spawn().catch((err) => {
        if (this.closing) return
        this.log.error({ err, model: this.config.servedName }, 'inference worker did not restart; trying again')
        this.restart(Math.min(30_000, Math.max(1000, delayMs * 2)))
      })
    }
    if (delayMs === 0) attempt()
    else setTimeout(attempt, delayMs).unref()
  }

  private send(c: WorkerCommand): void {
    this.worker.postMessage(c)
  }

  /** Requests this worker holds now. */
  get load(): number {
    return this.pending.size
  }

  generate(req: GenerateRequest): RequestEvents {
    const q = new RequestEvents(() => {
      this.pending.delete(req.id)
      this.send({ type: 'cancel', id: req.id })
    })
    if (this.down) {
      q.push({ type: 'error', id: req.id, status: 503, message: DOWN })
      return q
    }
    this.pending.set(req.id, q)
    this.send({ type: 'generate', req })
    return q
  }

  private ask<T>(c: WorkerCommand & { id: string }): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      if (this.down) return reject(Object.assign(new Error(DOWN), { status: 503 }))
      this.replies.set(c.id, { resolve: resolve as (v: unknown) => void, reject })
      this.send(c)
    })
  }

  tokenize(c: Omit<Extract<WorkerCommand, { type: 'tokenize' }>, 'type' | 'id'>): Promise<{ ids: number[]; strs: string[] | null }> {
    return this.ask({ ...c, type: 'tokenize', id: randomUUID() })
  }

  stats(): Promise<EngineStats> {
    return this.ask({ type: 'stats', id: randomUUID() })
  }

  detokenize(tokens: number[]): Promise<string> {
    return this.ask({ type: 'detokenize', id: randomUUID(), tokens })
  }

  async close(): Promise<void> {
    this.closing = true
    for (const q of this.pending.values()) q.cancel()
    // Between restart attempts there is no live worker to stop.
    if (this.down) return
    this.send({ type: 'stop' })
    const exited = new Promise((r) => this.worker.once('exit', r))
    const timer = setTimeout(() => void this.worker.terminate(), 5000)
    await exited
    clearTimeout(timer)
  }
}

/**
 * A model served by one or more replicas (`--model-replicas`): each a worker with its own copy of
 * the weights and its own batch; a request goes to the replica holding the fewest. One TF.js wasm
 * worker computes on one core, so replicas are how a model uses several.
 */
export class ModelPool {
  private constructor(readonly replicas: ModelServer[]) {}

  static async start(config: WorkerConfig, log: Logger, replicas = 1): Promise<ModelPool> {
    const started: ModelServer[] = []
    try {
      for (let i = 0; i < replicas; i++) started.push(await ModelServer.start(config, log))
    } catch (e) {
      await Promise.all(started.map((s) => s.close().catch(() => {})))
      throw e
    }
    return new ModelPool(started)
  }

  get info(): ModelInfo {
    return this.replicas[0]!.info
  }

  generate(req: GenerateRequest): RequestEvents {
    let best = this.replicas[0]!
    for (const r of this.replicas) if (r.load < best.load) best = r
    return best.generate(req)
  }

  tokenize(c: Parameters<ModelServer['tokenize']>[0]): ReturnType<ModelServer['tokenize']> {
    return this.replicas[0]!.tokenize(c)
  }

  detokenize(tokens: number[]): Promise<string> {
    return this.replicas[0]!.detokenize(tokens)
  }

  /** The replicas' state added up (each replica has its own prefix cache). */
  async stats(): Promise<EngineStats & { replicas: number; threads: number }> {
    const all = await Promise.all(this.replicas.map((r) => r.stats()))
    const sum = (k: Exclude<keyof EngineStats, 'prefix_cache'>) => all.reduce((a, s) => a + s[k], 0)
    return {
      replicas: all.length,
      // Per replica: the threads each one's backend computes with.
      threads: this.replicas[0]!.info.threads,
      running_requests: sum('running_requests'),
      waiting_requests: sum('waiting_requests'),
      running_sequences: sum('running_sequences'),
      kv_positions_used: sum('kv_positions_used'),
      kv_positions: sum('kv_positions'),
      tensors: sum('tensors'),
      prefix_cache: sumCaches(all.map((s) => s.prefix_cache)),
    }
  }

  async close(): Promise<void> {
    await Promise.all(this.replicas.map((r) => r.close()))
  }
}

/** The replicas' prefix caches as one: counts added up, the hit rate over the sums. */
function sumCaches(caches: (PrefixCacheStats | null)[]): PrefixCacheStats | null {
  const on = caches.filter((c): c is PrefixCacheStats => c !== null)
  if (!on.length) return null
  const sum = (k: Exclude<keyof PrefixCacheStats, 'block_tokens' | 'hit_rate'>) => on.reduce((a, c) => a + c[k], 0)
  const queried = sum('queried_tokens')
  const hit = sum('hit_tokens')
  return {
    block_tokens: on[0]!.block_tokens,
    queried_tokens: queried,
    hit_tokens: hit,
    hit_rate: queried ? hit / queried : 0,
    blocks_in_use: sum('blocks_in_use'),
    blocks_cached: sum('blocks_cached'),
    blocks_total: sum('blocks_total'),
    tensors: sum('tensors'),
  }
}
