import { defaultMemoryLimit } from '../../core/config.js'
import { BUDGET_SHARES } from '../../core/duckdb-memory.js'

export interface StoreOptions {
  /** Flush the in-memory tail to a Parquet segment once it holds this many parts. */
  flushRows?: number
  /** …or once its parts' encoded bytes pass this (bounds the tail's memory whatever the calls' size). */
  flushBytes?: number
  /** …or once its oldest part is this old (ms); 0 turns the timer off. */
  flushIntervalMs?: number
  /** Past this many segments, they are compacted into one. */
  maxSegments?: number
  /** A query waiting this long (ms) on DuckDB is interrupted: 504. */
  queryTimeoutMs?: number
  /** Parts per compacted segment (one id range each); bounds the memory a compaction takes. */
  compactParts?: number
  /** Bytes of acknowledged batches not yet in the tail table past which writes wait for it. */
  maxUnmovedBytes?: number
  /** The process's DuckDB memory budget in bytes (`--memory-limit`); the store's instance takes its share of it. */
  memoryLimit?: number
}

export function withDefaults(options: StoreOptions): Required<StoreOptions> {
  const memoryLimit = options.memoryLimit ?? defaultMemoryLimit()
  return {
    flushRows: options.flushRows ?? 200_000,
    // The tail is an in-memory table DuckDB cannot always evict while it grows (the row group being appended stays
    // in memory): it flushes at a quarter of the store's share of the budget, leaving the rest for page merges.
    flushBytes: options.flushBytes ?? Math.min(256 * 2 ** 20, Math.floor((memoryLimit * BUDGET_SHARES.calls) / 8)),
    flushIntervalMs: options.flushIntervalMs ?? 30_000,
    maxSegments: options.maxSegments ?? 8,
    queryTimeoutMs: options.queryTimeoutMs ?? 30_000,
    compactParts: options.compactParts ?? 2_000_000,
    maxUnmovedBytes: options.maxUnmovedBytes ?? 8 * 2 ** 20,
    memoryLimit,
  }
}
