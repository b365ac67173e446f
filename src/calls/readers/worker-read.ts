import os from 'node:os'
import path from 'node:path'
import { threadId, workerData } from 'node:worker_threads'
import {
  DuckDBInstance,
  JSDuckDBValueConverter,
  listValue,
  type DuckDBConnection,
  type DuckDBDataChunk,
  type DuckDBResult,
} from '@duckdb/node-api'
import { memoryLimitSetting } from '../../core/duckdb-memory.js'
import { arrowPlan, chunkToBatch } from '../arrow/convert.js'
import { ipcEncoder } from '../arrow/ipc.js'
import { PART_COLUMNS } from '../model.js'
import { toCall } from '../read/to-call.js'
import { exportWindows } from '../read/windows.js'
import { partsOver, sqlPath } from '../storage/parquet.js'
import type { Params } from '../../query/expr.js'
import { chunkKeys, rowObjects } from './keys.js'
import type { ReaderWorkerData } from './pool.js'
import { CREDITS, type ControlMessage, type ReadDone, type ReadMessage, type ReadTask } from './protocol.js'
import { exportStatement, type Statement } from './statement.js'

/**
 * A reader worker's side of a read (workers/readers.ts): its own in-memory DuckDB, the store's views over the
 * read's segment files (less the excluded calls), the statements streamed a chunk (~2,048 rows) at a time, each
 * chunk sent as Arrow IPC bytes or a JSON array, moved rather than copied. An export in start-time order over
 * compacted segments is read a window of start time at a time, as the in-process path reads it (read/windows.ts):
 * read whole, DuckDB sorted the whole answer before its first row and held it while a slow client read.
 */
let db: Promise<DuckDBInstance> | undefined

/**
 * Fault injection for tests: with WEFT_FAILPOINTS=reader-worker-exit, a read whose query holds
 * this marker ends its worker thread right after its first batch, as a crash mid-export would.
 */
const EXIT_MARKER = 'weft-failpoint:reader-worker-exit'
const exitFailpoint = (process.env.WEFT_FAILPOINTS ?? '').split(',').includes('reader-worker-exit')
const doomed = (task: ReadTask) => exitFailpoint && JSON.stringify(task.opts).includes(EXIT_MARKER)

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

/**
 * The read's views, shaped as the store's (storage/parquet.ts refreshView; an empty table supplies every column):
 * `settled_parts` the compacted files, `fresh_parts` the flushed ones, `all_parts` both, each less the excluded calls.
 */
async function scope(conn: DuckDBConnection, task: ReadTask): Promise<void> {
  await conn.run(`CREATE TEMP TABLE no_parts (${PART_COLUMNS})`)
  let kept = ''
  if (task.exclude.length) {
    await conn.run('CREATE TEMP TABLE excluded AS SELECT DISTINCT unnest($1::VARCHAR[]) AS id', [listValue(task.exclude)])
    kept = ' WHERE id NOT IN (SELECT id FROM excluded)'
  }
  const over = (files: readonly string[]) =>
    files.length ? `SELECT * FROM (${partsOver(files.map(sqlPath), 'SELECT * FROM no_parts')})${kept}` : 'SELECT * FROM no_parts'
  await conn.run(`CREATE TEMP VIEW settled_parts AS ${over(task.settled)}`)
  await conn.run(`CREATE TEMP VIEW fresh_parts AS ${over(task.fresh)}`)
  await conn.run('CREATE TEMP VIEW all_parts AS SELECT * FROM settled_parts UNION ALL BY NAME SELECT * FROM fresh_parts')
}

/** Waits for credit to send; false once the main thread cancelled. */
class Flow {
  private credits = CREDITS
  private wake?: () => void
  cancelled = false

  constructor(
    readonly task: ReadTask,
    private readonly conns: readonly DuckDBConnection[],
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
    for (const c of this.conns) c.interrupt()
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

function encoder(
  task: ReadTask,
  names: string[],
  types: Parameters<typeof arrowPlan>[1],
  keys: number,
): { schema?: Uint8Array; encode: Encode } {
  const n = names.length - keys
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

type Step = Statement & { done?: (rows: number) => void }

/**
 * The read's statements, one after another (null after the last): a window of start time each, or the whole query
 * as one. The windows' sizes follow what the windows before answered (read/windows.ts), so each is asked for as the
 * one before starts to be read.
 */
async function statements(conn: DuckDBConnection, task: ReadTask): Promise<() => Step | null> {
  const readAll = async (sql: string, params: Params) => (await conn.runAndReadAll(sql, params.values)).getRowObjectsJS()
  const windows = await exportWindows(readAll, task.settled, task.project, task.opts).catch(() => null)
  if (!windows) {
    const steps: Step[] = [exportStatement(task.project, task.opts, task.select, { settled: true })]
    return () => steps.shift() ?? null
  }
  return () => {
    const w = windows.next()
    if (!w) return null
    const st = exportStatement(task.project, task.opts, task.select, { settled: true, started: w.window })
    return { ...st, done: (rows) => windows.done(w.calls, rows) }
  }
}

/** A statement started, up to its first chunk (for a window, DuckDB has sorted it by then). */
interface Opened {
  step: Step
  result: DuckDBResult
  first: DuckDBDataChunk | null
}

async function open(conn: DuckDBConnection, step: Step): Promise<Opened> {
  const result = await conn.stream(step.sql, step.params.values)
  return { step, result, first: await result.fetchChunk() }
}

/**
 * Runs a read to its end (or cancellation), sending its messages on the task's port. Two connections take turns:
 * the next statement runs in DuckDB while this thread converts and sends the one before (as Reader.streamSeq does
 * in-process); one after another, a 1M-call export took twice as long.
 */
export async function runRead(task: ReadTask): Promise<ReadDone> {
  const db = await instance()
  const conns = [await db.connect(), await db.connect()]
  const flow = new Flow(task, conns)
  const done: ReadDone = { rows: 0, windows: 0 }
  let ahead: Promise<Opened> | null = null
  try {
    for (const c of conns) await scope(c, task)
    const next = await statements(conns[0]!, task)
    const first = next()
    let current: Opened | null = first && (await open(conns[0]!, first))
    let encode: Encode | undefined
    for (let turn = 1; current; turn++) {
      const following = next()
      ahead = following && open(conns[turn % 2]!, following)
      // Awaited below; until then a failure must not count as unhandled.
      ahead?.catch(() => {})
      if (current.step.done) done.windows++
      if (!encode) {
        const e = encoder(task, current.result.columnNames(), current.result.columnTypes(), current.step.keys.length)
        if (e.schema && !(await flow.send({ type: 'schema', bytes: e.schema }))) return done
        encode = e.encode
      }
      const rows = await sendChunks(flow, task, current, encode)
      if (rows === null) return done
      done.rows += rows
      current.step.done?.(rows)
      current = ahead && (await ahead)
      ahead = null
    }
    await flow.send({ type: 'end', rows: done.rows, windows: done.windows })
  } catch (e) {
    if (!flow.cancelled) task.port.postMessage({ type: 'error', message: (e as Error).message } satisfies ReadMessage)
  } finally {
    // The main thread closes the channel once it has the last message; this side only stops listening.
    task.port.removeAllListeners('message')
    task.port.removeAllListeners('close')
    await ahead?.catch(() => {})
    for (const c of conns) c.closeSync()
  }
  return done
}

/** One statement's chunks sent as they come; its rows, or null once the main thread cancelled. */
async function sendChunks(flow: Flow, task: ReadTask, opened: Opened, encode: Encode): Promise<number | null> {
  const payload = opened.result.columnCount - opened.step.keys.length
  let rows = 0
  for (let chunk = opened.first; chunk; chunk = await opened.result.fetchChunk()) {
    const n = chunk.rowCount
    if (n === 0) break
    rows += n
    const msg = { type: 'batch' as const, bytes: encode(chunk), rows: n, keys: task.withKeys ? chunkKeys(chunk, payload) : [] }
    if (!(await flow.send(msg))) return null
    if (doomed(task)) process.exit(70)
  }
  return rows
}
