import os from 'node:os'
import { fileURLToPath } from 'node:url'
import { Piscina } from 'piscina'
import { DomainError } from '../../core/errors.js'
import { ingestError, type IngestResult, type IngestTask } from './prepare.js'
import { pooledWorkerOptions } from '../../core/worker-pool-options.js'

export interface IngestPoolOptions {
  /** Worker threads; default: one per core. */
  threads?: number
  /** Tasks waiting for a worker past which a request is refused with 503. */
  maxQueue?: number
  /** Log records as Arrow batches where they can be (IngestTask.arrow): the embedded store's; not ClickHouse's. */
  arrowRecords?: boolean
}

/** The worker pool that turns ingest bodies into encoded call parts (see prepare.ts). */
export class IngestPool {
  private readonly pool: Piscina<IngestTask, IngestResult>
  private readonly arrow: boolean

  constructor(opts: IngestPoolOptions = {}) {
    this.arrow = opts.arrowRecords ?? false
    const threads = Math.max(1, opts.threads ?? os.availableParallelism())
    this.pool = new Piscina({
      filename: fileURLToPath(new URL('../../../workers/ingest.js', import.meta.url)),
      minThreads: threads,
      maxThreads: threads,
      maxQueue: opts.maxQueue ?? 256,
      ...pooledWorkerOptions(),
    })
  }

  /**
   * The encoded parts of a request body (a log record) and the reply for it; a bad body throws its
   * DomainError. A large body that is the only view of its memory moves to the worker instead of being
   * copied (the caller must not read it afterwards); results move back the same way.
   */
  async prepare(task: IngestTask): Promise<{ record: Buffer; count: number; reply: unknown; replyJson?: Buffer }> {
    let r: IngestResult
    const body = task.body
    const movable = body.byteLength >= 64 * 1024 && body.byteOffset === 0 && body.byteLength === body.buffer.byteLength
    try {
      r = await this.pool.run(this.arrow ? { ...task, arrow: true } : task, movable ? { transferList: [body.buffer as ArrayBuffer] } : {})
    } catch (e) {
      const message = (e as Error).message
      if (message === 'Task queue is at limit') {
        throw new DomainError(503, 'Too many ingest requests are waiting; retry shortly', { retryAfterS: 1 })
      }
      // The worker died (out of memory, a crash): only this request fails; Piscina starts another.
      throw new DomainError(503, `The ingest worker failed on this request and nothing was written: ${message}`, { retryAfterS: 1 })
    }
    if (!r.ok) throw ingestError(r)
    const buf = (u: Uint8Array) => Buffer.from(u.buffer, u.byteOffset, u.byteLength)
    return { record: buf(r.record), count: r.count, reply: r.reply, ...(r.replyJson ? { replyJson: buf(r.replyJson) } : {}) }
  }

  get stats() {
    return { threads: this.pool.threads.length, queued: this.pool.queueSize, completed: this.pool.completed }
  }

  close(): Promise<void> {
    return this.pool.destroy()
  }
}
