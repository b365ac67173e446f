import os from 'node:os'
import path from 'node:path'
import { threadId, workerData } from 'node:worker_threads'
import { DuckDBInstance, JSDuckDBValueConverter, listValue, type DuckDBConnection, type DuckDBDataChunk } from '@duckdb/node-api'
import { memoryLimitSetting } from '../../core/duckdb-memory.js'
import { arrowPlan, chunkToBatch } from '../arrow/convert.js'
import { ipcEncoder } from '../arrow/ipc.js'
import { PART_COLUMNS } from '../model.js'
import { toCall } from '../read/to-call.js'
import { sqlPath } from '../storage/parquet.js'
import { chunkKeys, rowObjects } from './keys.js'
import type { ReaderWorkerData } from './pool.js'
import { CREDITS, fromWire, type ControlMessage, type ReadMessage, type ReadTask } from './protocol.js'

/**
 * A reader worker's side of a read (workers/readers.ts): its own in-memory DuckDB, a view `all_parts`
 * over the read's segment files (less the excluded calls), the statement streamed a chunk (~2,048
 * rows) at a time, each chunk sent as Arrow IPC bytes or a JSON array, moved rather than copied.
 */
let db: Promise<DuckDBInstance> | undefined

/**
 * Fault injection for tests: with WEFT_FAILPOINTS=reader-worker-exit, a read whose bound values hold
 * this marker ends its worker thread right after its first batch, as a crash mid-export would.
 */
const EXIT_MARKER = 'weft-failpoint:reader-worker-exit'
const exitFailpoint = (process.env.WEFT_FAILPOINTS ?? '').split(',').includes('reader-worker-exit')
const doomed = (task: ReadTask) => exitFailpoint && JSON.stringify(task.params).includes(EXIT_MARKER)

function instance(): Promise<DuckDBInstance> {
  // Each worker's DuckDB gets a share of the cores: the pool, the store's own DuckDB and the event loop share them.
  const threads = Math.max(1, Number(process.env.WEFT_READER_DUCKDB_THREADS ?? Math.ceil(os.availableParallelism() / 2)))
  // Its part of the process's budget (see readerSplit); past it a large export's sort spills instead of failing.
  const { memoryBytes, spillDir } = workerData as ReaderWorkerData
  db ??= DuckDBInstance.create(':memory:', {
    threads: String(threads),
    memory_limit: memoryLimitSetting(memoryBytes),
    temp_directory: path.join(spillDir, String(threadId)),
  })
  return db
}

/** The read's `all_parts`: the segments with the excluded calls left out, shaped as the store's view (an empty tail supplies every column). */
async function scope(conn: DuckDBConnection, task: ReadTask): Promise<void> {
  await conn.run(`CREATE TEMP TABLE no_parts (${PART_COLUMNS})`)
  let source = 'SELECT * FROM no_parts'
  if (task.files.length) {
    const files = task.files.map(sqlPath).join(', ')
    source = `SELECT * FROM read_parquet([${files}], union_by_name = true) UNION ALL BY NAME ${source}`
  }
  if (task.exclude.length) {
    await conn.run('CREATE TEMP TABLE excluded AS SELECT DISTINCT unnest($1::VARCHAR[]) AS id', [listValue(task.exclude)])
    source = `SELECT * FROM (${source}) WHERE id NOT IN (SELECT id FROM excluded)`
  }
  await conn.run(`CREATE TEMP VIEW all_parts AS ${source}`)
}

/** Waits for credit to send; false once the main thread cancelled. */
class Flow {
  private credits = CREDITS
  private wake?: () => void
  cancelled = false

  constructor(
    readonly task: ReadTask,
    private readonly conn: DuckDBConnection,
  ) {
    task.port.on('message', (m: ControlMessage) => {
      if (m.type === 'credit') this.credits++
      else this.cancel()
      this.wake?.()
    })
    // The main thread closed its end (it gave up on the read before this worker took it up).
    task.port.on('close', () => {
      this.cancel()
      this.wake?.()
    })
  }

  private cancel(): void {
    this.cancelled = true
    this.conn.interrupt()
  }

  /** Payload messages take a credit; the final one does not. */
  async send(m: ReadMessage): Promise<boolean> {
    const paid = m.type === 'schema' || m.type === 'batch'
    while (paid && this.credits <= 0 && !this.cancelled) await new Promise<void>((r) => (this.wake = r))
    if (this.cancelled) return false
    if (paid) this.credits--
    this.task.port.postMessage(m, 'bytes' in m ? [m.bytes.buffer as ArrayBuffer] : [])
    return true
  }
}

/** One chunk as the message the main thread merges (payload bytes plus the sort keys). */
type Encode = (chunk: DuckDBDataChunk) => Uint8Array

function encoder(task: ReadTask, names: string[], types: Parameters<typeof arrowPlan>[1]): { schema?: Uint8Array; encode: Encode } {
  const n = names.length - task.keys
  if (task.format === 'json') {
    const payload = names.slice(0, n)
    return {
      encode: (chunk) => {
        const calls = rowObjects(payload, chunk.convertRows(JSDuckDBValueConverter)).map(toCall)
        return new Uint8Array(Buffer.from(JSON.stringify(calls)))
      },
    }
  }
  const plan = arrowPlan(names.slice(0, n), types.slice(0, n))
  const ipc = ipcEncoder(plan.schema)
  return { schema: ipc.schema, encode: (chunk) => ipc.batch(chunkToBatch(plan, chunk)) }
}

/** Runs a read to its end (or cancellation), sending its messages on the task's port. */
export async function runRead(task: ReadTask): Promise<{ rows: number }> {
  const conn = await (await instance()).connect()
  const flow = new Flow(task, conn)
  let rows = 0
  try {
    await scope(conn, task)
    const result = await conn.stream(task.sql, fromWire(task.params))
    const names = result.columnNames()
    const payload = names.length - task.keys
    const { schema, encode } = encoder(task, names, result.columnTypes())
    if (schema && !(await flow.send({ type: 'schema', bytes: schema }))) return { rows }
    for (let chunk = await result.fetchChunk(); chunk && chunk.rowCount > 0; chunk = await result.fetchChunk()) {
      rows += chunk.rowCount
      const msg = { type: 'batch' as const, bytes: encode(chunk), rows: chunk.rowCount, keys: chunkKeys(chunk, payload) }
      if (!(await flow.send(msg))) return { rows }
      if (doomed(task)) process.exit(70)
    }
    await flow.send({ type: 'end', rows })
  } catch (e) {
    if (!flow.cancelled) task.port.postMessage({ type: 'error', message: (e as Error).message } satisfies ReadMessage)
  } finally {
    // The main thread closes the channel once it has the last message; this side only stops listening.
    task.port.removeAllListeners('message')
    task.port.removeAllListeners('close')
    conn.closeSync()
  }
  return { rows }
}
