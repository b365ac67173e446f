import { fileURLToPath } from 'node:url'
import { threadId } from 'node:worker_threads'
import { DuckDBInstance } from '@duckdb/node-api'
import { Piscina } from 'piscina'
import { BUDGET_SHARES, memoryLimitSetting } from '../../core/duckdb-memory.js'
import { pooledWorkerOptions } from '../../core/worker-pool-options.js'
import { pageBlocksLayout, writeBlockFile } from './page-blocks.js'

/** One block file to write (see writeBlockFile): the compacted segment it is made from and where it goes. */
export interface BlockFileTask {
  segmentPath: string
  file: string
  perBlock: number
  /** The worker's DuckDB memory limit and spill directory (set by the first task: one instance a thread). */
  memoryBytes: number
  spillDir: string
}

/**
 * Writes compacted segments' block files on a worker thread of its own, which reads the segment's Parquet in a
 * DuckDB of its own (one thread): the rows' JSON, the blocks' deflation and the writes never touch the event loop.
 * On it, in slices of 8 blocks, it was the loop's main work during a compaction: under sustained ingest at 500
 * calls a batch the seconds with an event-loop p99 of 20 ms or more fell inside compactions, the main thread
 * busy ~400 ms of each of them against ~250 in the others (bench/README, 2026-12-07). One thread: compactions
 * write one segment at a time. It starts with the first block file and ends after a minute without one.
 */
export class BlockFileWriter {
  private pool: Piscina<BlockFileTask, number> | null = null
  /** Block files written, and the thread that wrote the last (its worker_threads id; the main thread's is 0). */
  readonly stats = { written: 0, last_thread_id: null as number | null }

  constructor(private readonly opts: { memoryLimit: number; spillDir: string }) {}

  async write(segmentPath: string, file: string): Promise<void> {
    this.pool ??= new Piscina({
      filename: fileURLToPath(new URL('../../../workers/blocks.js', import.meta.url)),
      minThreads: 0,
      maxThreads: 1,
      ...pooledWorkerOptions(),
    })
    this.stats.last_thread_id = await this.pool.run({
      segmentPath,
      file,
      perBlock: pageBlocksLayout.perBlock,
      memoryBytes: blockWriterMemory(this.opts.memoryLimit),
      spillDir: this.opts.spillDir,
    })
    this.stats.written++
  }

  async close(): Promise<void> {
    const pool = this.pool
    this.pool = null
    await pool?.destroy()
  }
}

/**
 * The worker's DuckDB limit: an eighth of the store's share, at least 64 MiB. Its query streams (no sort, no
 * aggregate), so it holds a few row groups' column chunks at a time; it runs only during a compaction.
 */
export function blockWriterMemory(memoryLimit: number): number {
  return Math.max(64 * 2 ** 20, Math.floor((memoryLimit * BUDGET_SHARES.calls) / 8))
}

let db: Promise<DuckDBInstance> | undefined

/** The worker's side (workers/blocks.ts); the id of the thread it ran on. */
export async function writeBlockFileTask(task: BlockFileTask): Promise<number> {
  db ??= DuckDBInstance.create(':memory:', {
    threads: '1',
    memory_limit: memoryLimitSetting(task.memoryBytes),
    temp_directory: task.spillDir,
  })
  const conn = await (await db).connect()
  try {
    await writeBlockFile(conn, task.segmentPath, task.file, task.perBlock)
    return threadId
  } finally {
    conn.closeSync()
  }
}
