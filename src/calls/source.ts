import type { DuckDBConnection } from '@duckdb/node-api'
import type { Params } from '../query/expr.js'
import type { QueryOptions } from './model.js'
import type { Extra } from './read/merged.js'

/**
 * What statistics read of the calls store, and nothing more. The store keeps every part in one DuckDB
 * database (Parquet segments plus the in-memory tail, as the view `all_parts`); statistics keep their
 * rollup tables beside it and join them with merged calls, so what they get is SQL over that database:
 * relations of merged calls, a connection to it, and the store's flush/compaction events.
 */
export interface CallSource {
  /** The data directory the store lives in; statistics keep their files beside its `calls/`. */
  readonly dataDir: string
  /** The highest seq held in segments: every part at or below it is in Parquet and never changes. */
  readonly flushedSeq: number
  /** The highest seq given to a part so far. */
  readonly lastSeq: number
  /** Parts held in segments. */
  readonly segmentRows: number
  /** The merged, live calls of a project matching a filter and query, as a relation `(...) m WHERE ...` with the light columns plus `extra.columns`. */
  relation(project: string, opts: QueryOptions, params: Params, extra?: Extra): string
  /** `SELECT project_id, id, <latest of each column>, deleted_at[, refs] FROM all_parts` — to be followed by WHERE … GROUP BY project_id, id. */
  mergedSql(columns: readonly string[], refs?: boolean): string
  /** Runs a read (after every acknowledged write is visible, with the store's query timeout). */
  rows(sql: string, params: Params): Promise<Record<string, unknown>[]>
  /** A new connection to the store's database (the caller closes it), for tables kept beside `all_parts`. */
  connect(): Promise<DuckDBConnection>
  /** Up to n - 1 ids splitting the segments into n ranges of similar size. */
  idRanges(n: number): Promise<string[]>
  /** Runs `hook` after every flush and compaction, in turn with them. */
  onSegments(hook: (event: 'flush' | 'compact') => Promise<void>): void
  /** Runs fn in turn with flushes and compactions. */
  exclusive<T>(fn: () => Promise<T>): Promise<T>
}
