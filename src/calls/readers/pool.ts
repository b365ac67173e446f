import { MessageChannel } from 'node:worker_threads'
import { fileURLToPath } from 'node:url'
import { Piscina } from 'piscina'
import { DomainError } from '../../core/errors.js'
import type { ControlMessage, ReadDone, ReadMessage, ReadTask } from './protocol.js'
import { pooledWorkerOptions } from '../../core/worker-pool-options.js'

export interface ReaderPoolOptions {
  /** Worker threads, each with its own DuckDB (default 2). */
  threads?: number
  /** Reads waiting for a worker past which one is refused with 503 (default 64). */
  maxQueue?: number
  /** A wait for the worker's next message longer than this stops the read with 504. */
  timeoutMs: number
  /** Each worker's DuckDB memory limit in bytes (its part of the budget: see readerSplit). */
  memoryBytes: number
  /** Where workers spill past it (a directory each below this one). */
  spillDir: string
}

/** What a worker's DuckDB is held to (Piscina's workerData). */
export interface ReaderWorkerData {
  memoryBytes: number
  spillDir: string
}

/** Tests run the TypeScript sources; the worker is always the built one. */
const WORKER = new URL(
  import.meta.url.endsWith('.ts') ? '../../../dist/workers/readers.js' : '../../../workers/readers.js',
  import.meta.url,
)

/**
 * A pool of reader threads (Piscina), each holding an in-memory DuckDB that reads the segments' Parquet
 * files. A read's results come back on a message channel, a few messages ahead of the consumer
 * (protocol.ts CREDITS), so a slow client holds the worker back instead of filling memory.
 */
export class ReaderPool {
  private readonly pool: Piscina<Omit<ReadTask, 'port'> & { port: unknown }, ReadDone>
  private running = 0
  /** Reads taken up (for /admin/stats and tests). */
  private reads = 0
  /** Window statements the workers ran (exports read a window of start time at a time; 0 for reads whole). */
  private windows = 0

  constructor(private readonly opts: ReaderPoolOptions) {
    const threads = Math.max(1, opts.threads ?? 2)
    this.pool = new Piscina({
      filename: fileURLToPath(WORKER),
      minThreads: 0,
      maxThreads: threads,
      maxQueue: opts.maxQueue ?? 64,
      ...pooledWorkerOptions(),
      workerData: { memoryBytes: opts.memoryBytes, spillDir: opts.spillDir } satisfies ReaderWorkerData,
    })
  }

  /**
   * Starts a read; its messages are pulled from the returned generator. The first message is awaited
   * before this resolves, so a bad statement fails before any answer starts. Leaving the generator
   * early (a client gone) cancels the read in the worker.
   */
  async read(task: Omit<ReadTask, 'port'>): Promise<AsyncGenerator<ReadMessage>> {
    const { port1, port2 } = new MessageChannel()
    const inbox = new Inbox(port1)
    this.running++
    this.reads++
    const run = this.pool.run({ ...task, port: port2 }, { transferList: [port2] as never })
    const done = run.then(
      () => inbox.finish(null),
      (e: Error) => inbox.finish(poolError(e)),
    )
    void done.finally(() => this.running--)
    const first = await inbox.next(this.opts.timeoutMs).catch((e) => {
      inbox.cancel()
      inbox.close()
      throw e
    })
    return messages(inbox, first, this.opts.timeoutMs, (windows) => (this.windows += windows))
  }

  get stats() {
    return {
      threads: this.pool.threads.length,
      queued: this.pool.queueSize,
      running: this.running,
      reads: this.reads,
      completed: this.pool.completed,
      windows: this.windows,
      memory_limit_bytes_each: this.opts.memoryBytes,
    }
  }

  close(): Promise<void> {
    return this.pool.destroy()
  }
}

function poolError(e: Error): DomainError {
  if (e.message === 'Task queue is at limit') return new DomainError(503, 'Too many reads are waiting; retry shortly', { retryAfterS: 1 })
  return new DomainError(503, `A reader worker failed on this read: ${e.message}`, { retryAfterS: 1 })
}

/** A read's messages up to its end; `ended` hears the window statements it ran (counted as the read ends, not as its task settles). */
async function* messages(
  inbox: Inbox,
  first: ReadMessage,
  timeoutMs: number,
  ended: (windows: number) => void,
): AsyncGenerator<ReadMessage> {
  let done = false
  try {
    for (let m = first; ; m = await inbox.next(timeoutMs)) {
      if (m.type === 'error') throw new DomainError(m.status ?? 500, `The read failed: ${m.message}`)
      if (m.type === 'end') {
        done = true
        ended(m.windows)
        return
      }
      inbox.credit()
      yield m
    }
  } finally {
    if (!done) inbox.cancel()
    inbox.close()
  }
}

/** The main thread's end of a read's channel: messages in arrival order, credits and cancel out. */
class Inbox {
  private readonly queue: ReadMessage[] = []
  private waiter?: (m: ReadMessage | DomainError) => void
  private failure: DomainError | null = null
  private finished = false

  constructor(private readonly port: MessageChannel['port1']) {
    port.on('message', (m: ReadMessage) => this.push(m))
  }

  private push(m: ReadMessage | DomainError): void {
    if (this.waiter) {
      const w = this.waiter
      this.waiter = undefined
      w(m)
    } else if (!(m instanceof DomainError)) this.queue.push(m)
  }

  /**
   * The task settled. A pool error (queue full, worker died) fails the read; a clean return says nothing,
   * since the port's last message ('end' or 'error') may arrive after the task's result.
   */
  finish(e: DomainError | null): void {
    this.finished = true
    if (!e) return
    this.failure = e
    this.push(e)
  }

  async next(timeoutMs: number): Promise<ReadMessage> {
    const m = this.queue.shift()
    if (m) return m
    if (this.failure) throw this.failure
    const got = await new Promise<ReadMessage | DomainError>((resolve) => {
      const t = setTimeout(
        () => resolve(new DomainError(504, `Query took longer than ${timeoutMs} ms and was stopped; narrow the filter or page with limit`)),
        timeoutMs,
      )
      this.waiter = (v) => {
        clearTimeout(t)
        resolve(v)
      }
    })
    if (got instanceof DomainError) {
      this.waiter = undefined
      throw got
    }
    return got
  }

  credit(): void {
    this.port.postMessage({ type: 'credit' } satisfies ControlMessage)
  }

  cancel(): void {
    if (!this.finished) this.port.postMessage({ type: 'cancel' } satisfies ControlMessage)
  }

  close(): void {
    this.port.close()
  }
}
