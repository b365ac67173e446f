import type { BlockFileWriter } from './block-file-writer.js'
import type { DuckDBConnection } from '@duckdb/node-api'
import type { StoreOptions } from './options.js'
import type { SegmentPins } from './pins.js'
import type { Manifest } from './segments.js'
import type { Tail } from './tail.js'
import type { Wal } from './wal.js'

/** What a flush and a compaction work on: the calls directory, its manifest and log, and the tail. */
export interface StorageState {
  readonly dir: string
  manifest: Manifest
  /** The log taking appends (a flush switches it). */
  wal: Wal
  /** The connection flushes, compactions and view changes run on (a compaction folds on one of its own: see connect). */
  readonly maint: DuckDBConnection
  /** A new connection to the store's database (a compaction's fold runs on one beside flushes). */
  connect(): Promise<DuckDBConnection>
  readonly tail: Tail
  readonly opts: Required<StoreOptions>
  readonly closed: boolean
  /** Segment files held by pooled reads (a compaction retires the files it replaced through it). */
  readonly pins: SegmentPins
  /** Writes compacted segments' block files on a worker thread (block-file-writer.ts). */
  readonly blockFiles: BlockFileWriter
  /** Compactions that ran out of memory and were run again in smaller ranges (compact.ts). */
  compactionResplits: number
  /** DuckDB threads the last fold ran with (compact.ts foldInstance). */
  foldThreads: number | null
  /** Lends part of the instance's memory limit to a fold (0: given back); see Storage.lendMemory. */
  lendMemory(bytes: number): Promise<void>
}

export function walNumber(name: string): number {
  return Number(/^wal-(\d{6})\.log$/.exec(name)![1])
}
