import { DuckDBListValue, listValue, type DuckDBValue } from '@duckdb/node-api'
import type { MessagePort } from 'node:worker_threads'

/**
 * What crosses between the main thread and a reader worker. A read is one statement over a pinned
 * set of segment files (the worker's view `all_parts`), with the ids of calls that have parts in the
 * tail left out (the main thread answers those calls whole; see export.ts). Results come back on
 * `port` as messages, at most CREDITS ahead of what the main thread has taken.
 */
export interface ReadTask {
  /** Absolute paths of the segment files (pinned by the main thread for the read's whole life). */
  files: string[]
  /** Ids whose calls the worker leaves out (they have parts in the tail). */
  exclude: string[]
  sql: string
  params: WireValue[]
  /** The last `keys` result columns are sort keys (see merge.ts); the others are the payload. */
  keys: number
  /** arrow: IPC record batches; json: each chunk's calls as a JSON array (calls/read/to-call.ts). */
  format: 'arrow' | 'json'
  port: MessagePort
}

/** Worker → main. `bytes` is moved (transferred), never copied. */
export type ReadMessage =
  | { type: 'schema'; bytes: Uint8Array }
  | { type: 'batch'; bytes: Uint8Array; rows: number; keys: unknown[][] }
  | { type: 'end'; rows: number }
  | { type: 'error'; message: string; status?: number }

/** Main → worker: one more message may be sent; or stop (timeout, the client went away). */
export type ControlMessage = { type: 'credit' } | { type: 'cancel' }

/** Messages a worker sends ahead of the main thread's taking them: bounds memory per read. */
export const CREDITS = 4

/** A bound parameter as structured clone carries it (DuckDB's value classes lose their prototype). */
export type WireValue = string | number | bigint | boolean | null | { list: WireValue[] }

/** Params as they cross to a worker; null when one has a type the wire does not carry (the caller reads in-process). */
export function toWire(values: readonly DuckDBValue[]): WireValue[] | null {
  const out: WireValue[] = []
  for (const v of values) {
    const w = wireOf(v)
    if (w === undefined) return null
    out.push(w)
  }
  return out
}

function wireOf(v: DuckDBValue): WireValue | undefined {
  if (v === null || ['string', 'number', 'bigint', 'boolean'].includes(typeof v)) return v as WireValue
  if (v instanceof DuckDBListValue) {
    const items = toWire(v.items)
    return items ? { list: items } : undefined
  }
  return undefined
}

export function fromWire(values: readonly WireValue[]): DuckDBValue[] {
  return values.map((v) => (v !== null && typeof v === 'object' ? listValue(fromWire(v.list)) : v))
}
