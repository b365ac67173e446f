import { tooLarge } from './app.js'

/** The transport's throttle: stop and restart reading the request from the socket. */
export interface Flow {
  pause(): void
  resume(): void
}

/**
 * A megabyte queued and not yet taken by the handler pauses the socket; it resumes once the queue is down to a
 * quarter of that. The kernel's socket buffers then hold the client back, so a slow disk never turns into memory.
 */
const HIGH_WATER = 1 << 20
const LOW_WATER = 256 << 10

/**
 * A request body as an async iterable of chunks, fed by the transport as data arrives and read by one handler.
 * Iterating throws a 413 DomainError once more than `limit` bytes came, or the transport's error (the client left).
 */
export class BodyStream implements AsyncIterable<Buffer> {
  private readonly queue: Buffer[] = []
  private queued = 0
  private received = 0
  private paused = false
  private ended = false
  private discarding = false
  private failure: Error | null = null
  private wake: (() => void) | null = null

  constructor(
    private readonly limit: number,
    private readonly flow: Flow,
  ) {}

  /** The whole body has come off the socket (whether or not anyone read it). */
  get complete(): boolean {
    return this.ended
  }

  /** One chunk from the transport, in arrival order. The transport may reuse `chunk`'s memory, so it is copied. */
  push(chunk: ArrayBuffer, isLast: boolean): void {
    if (isLast) this.ended = true
    if (!this.failure && !this.discarding) {
      this.received += chunk.byteLength
      if (this.received > this.limit) return this.fail(tooLarge(this.limit))
      if (chunk.byteLength > 0) {
        this.queue.push(Buffer.from(chunk.slice(0)))
        this.queued += chunk.byteLength
      }
      if (!this.ended && !this.paused && this.queued >= HIGH_WATER) {
        this.paused = true
        this.flow.pause()
      }
    }
    this.signal()
  }

  /** The reader's next step throws `e`; what was queued is dropped. */
  fail(e: Error): void {
    if (!this.failure) {
      this.failure = e
      this.drop()
    }
    this.signal()
  }

  /** Nobody will read the rest: drop what is queued and let the remainder flow in, to be dropped as it comes. */
  discard(): void {
    this.discarding = true
    this.drop()
    this.unpause()
  }

  async *[Symbol.asyncIterator](): AsyncGenerator<Buffer> {
    try {
      for (;;) {
        if (this.failure) throw this.failure
        const next = this.queue.shift()
        if (next) {
          this.queued -= next.byteLength
          if (this.queued <= LOW_WATER) this.unpause()
          yield next
          continue
        }
        if (this.ended) return
        await new Promise<void>((resolve) => (this.wake = resolve))
      }
    } finally {
      // The reader stopped early (or failed): the rest of the body must not pile up, nor stall the socket paused.
      if (!this.ended || this.failure) this.discard()
    }
  }

  private drop(): void {
    this.queue.length = 0
    this.queued = 0
  }

  private unpause(): void {
    if (!this.paused) return
    this.paused = false
    this.flow.resume()
  }

  private signal(): void {
    const w = this.wake
    this.wake = null
    w?.()
  }
}
