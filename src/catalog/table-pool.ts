import os from 'node:os'
import { fileURLToPath } from 'node:url'
import { Piscina } from 'piscina'
import { DomainError } from '../core/errors.js'
import { tableTaskError, unpackRows, type TableTask, type TableTaskResult } from './table-prepare.js'
import type { Rows } from './table-chunks.js'
import { pooledWorkerOptions } from '../core/worker-pool-options.js'

type Done = Extract<TableTaskResult, { ok: true }>
type Request = Omit<Extract<Done, { route: 'create' }>, 'texts' | 'packed'> | Omit<Extract<Done, { route: 'update' }>, 'texts' | 'packed'>
/**
 * A prepared request with its rows' texts as strings, or as the ASCII bytes the worker packed them in; for
 * `/table/create_from_digests`, the digests the table lists.
 */
export type PreparedTable = (Request & Rows) | Extract<Done, { route: 'digests' }>

/**
 * Worker threads that parse and digest table bodies (table-prepare.ts). The server makes one and closes it at
 * shutdown; its threads start with the first table write, not with the server: most servers never see a dataset.
 * Idle workers do not keep the process alive (Piscina unrefs them), and they end after a minute without work.
 */
export class TablePool {
  private pool: Piscina<TableTask, TableTaskResult> | null = null
  private closed = false

  constructor(private readonly opts: { threads?: number; maxQueue?: number } = {}) {}

  private started(): Piscina<TableTask, TableTaskResult> {
    if (this.closed) throw new DomainError(503, 'The server is shutting down; table writes are no longer taken', { retryAfterS: 1 })
    return (this.pool ??= new Piscina({
      filename: fileURLToPath(new URL('../../workers/tables.js', import.meta.url)),
      minThreads: 0,
      maxThreads: Math.max(1, this.opts.threads ?? os.availableParallelism()),
      // A queued task holds its body (up to the body limit): 16 of them bound what waits.
      maxQueue: this.opts.maxQueue ?? 16,
      ...pooledWorkerOptions(),
    }))
  }

  /** Whether a write has started the workers (and close() has not ended them). */
  get running(): boolean {
    return this.pool !== null
  }

  /**
   * The parsed, checked and digested request; a bad body throws its DomainError. A body that is the only view of
   * its memory moves to the worker instead of being copied (the caller must not read it afterwards).
   */
  async prepare(task: TableTask): Promise<PreparedTable> {
    const pool = this.started()
    const body = task.body
    const movable = body.byteLength >= 64 * 1024 && body.byteOffset === 0 && body.byteLength === body.buffer.byteLength
    let r: TableTaskResult
    try {
      r = await pool.run(task, movable ? { transferList: [body.buffer as ArrayBuffer] } : {})
    } catch (e) {
      const message = (e as Error).message
      if (message === 'Task queue is at limit')
        throw new DomainError(503, 'Too many table writes are waiting; retry shortly', { retryAfterS: 1 })
      // The worker died (out of memory, a crash): only this request fails; Piscina starts another.
      throw new DomainError(503, `The table worker failed on this request and nothing was written: ${message}`, { retryAfterS: 1 })
    }
    if (!r.ok) throw tableTaskError(r)
    if (r.route === 'digests') return r
    const { texts, packed, ...request } = r
    if (!packed) return { ...request, texts }
    // All ASCII (nearly every dataset): the bytes go to the appender as they are; else strings, decoded once.
    return packed.utf8 ? { ...request, texts: unpackRows(packed) } : { ...request, ascii: { text: packed.text, ends: packed.ends } }
  }

  /** Ends the workers (a task still running is cancelled; its request fails with 503). Safe to call twice. */
  async close(): Promise<void> {
    this.closed = true
    const pool = this.pool
    this.pool = null
    await pool?.destroy()
  }
}
