import type { QueryOptions } from '../model.js'
import type { MessagePort } from 'node:worker_threads'

/**
 * What crosses between the main thread and a reader worker. A read is one query over a pinned set of segment
 * files (the worker's views `settled_parts`, `fresh_parts` and `all_parts`), with the ids of calls that have parts
 * in the tail left out (the main thread answers those calls whole; see export.ts). The worker builds its
 * statements from the query's options (statement.ts), one per window of start time when the compacted segments
 * allow it (read/windows.ts). Results come back on `port` as messages, at most CREDITS ahead of what the main
 * thread has taken.
 */
export interface ReadTask {
  /** Absolute paths of the compacted segment files (each call one merged row; pinned by the main thread for the read's whole life). */
  settled: string[]
  /** …and of the flushed ones (parts still to merge). */
  fresh: string[]
  /** Ids whose calls the worker leaves out (they have parts in the tail). */
  exclude: string[]
  project: string
  /** The query as the client sent it (plain JSON: it crosses by structured clone). */
  opts: QueryOptions
  /** The columns to read (the store's own SQL: arrow/calls.ts or SELECT_OUT). */
  select: string
  /** arrow: IPC record batches; json: each chunk's calls as a JSON array (calls/read/to-call.ts). */
  format: 'arrow' | 'json'
  /** Whether batches carry their sort keys: the main thread needs them only to merge calls from the tail. */
  withKeys: boolean
  port: MessagePort
}

/** What a worker's read returns when it ends: its rows and the window statements it ran (0: read whole). */
export interface ReadDone {
  rows: number
  windows: number
}

/** Worker → main. `bytes` is moved (transferred), never copied. */
export type ReadMessage =
  | { type: 'schema'; bytes: Uint8Array }
  | { type: 'batch'; bytes: Uint8Array; rows: number; keys: unknown[][] }
  | { type: 'end'; rows: number; windows: number }
  | { type: 'error'; message: string; status?: number }

/** Main → worker: one more message may be sent; or stop (timeout, the client went away). */
export type ControlMessage = { type: 'credit' } | { type: 'cancel' }

/** Messages a worker sends ahead of the main thread's taking them: bounds memory per read. */
export const CREDITS = 4
