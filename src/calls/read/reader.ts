import type { DuckDBConnection, DuckDBDataChunk, DuckDBType } from '@duckdb/node-api'
import { Durations } from '../../core/durations.js'
import { DomainError } from '../../core/errors.js'
import type { Params } from '../../query/expr.js'
import { chunkRows } from './chunk-rows.js'

type Row = Record<string, unknown>

/**
 * Runs reads against the store's database: each on a fresh connection (a streaming result holds its
 * connection), after every acknowledged write is visible, with the store's query timeout.
 */
export class Reader {
  /** From a read's connection to its first rows (or all of them), after any wait for visibility. */
  readonly queries = new Durations()

  constructor(
    private readonly connect: () => Promise<DuckDBConnection>,
    /** Waits for the acknowledged writes (those up to a mark, when given: see Tail.visible). */
    private readonly visible: (mark?: number) => Promise<void>,
    private readonly timeoutMs: number,
    /** Told of each statement that took `slow.ms` or more to its first rows (the slow-read log; off when absent). */
    private readonly slow?: { ms: number; report: (ms: number, sql: string) => void },
  ) {}

  /** Times a statement up to its first rows (or all of them) into `queries`, and reports it when slow. */
  private async timed<T>(sql: string, p: Promise<T>): Promise<T> {
    const t0 = performance.now()
    try {
      return await p
    } finally {
      const ms = performance.now() - t0
      this.queries.add(ms)
      if (this.slow && ms >= this.slow.ms) this.slow.report(ms, sql)
    }
  }

  /** A fresh connection for one read and its timeout guard. */
  private async readConn(mark?: number): Promise<{ conn: DuckDBConnection; guarded: <T>(p: () => Promise<T>) => Promise<T> }> {
    await this.visible(mark)
    const conn = await this.connect()
    return { conn, guarded: interruptAfter(conn, this.timeoutMs) }
  }

  /** All the rows; `mark`: the request's (see Tail.visible), for reads that follow another of the same request. */
  async readAll(sql: string, params: Params, mark?: number): Promise<Row[]> {
    const { conn, guarded } = await this.readConn(mark)
    try {
      const reader = await this.timed(
        sql,
        guarded(() => conn.runAndReadAll(sql, params.values)),
      )
      return objects(reader.columnNames(), reader.getRowsJS())
    } finally {
      conn.closeSync()
    }
  }

  /**
   * The rows a chunk (~2048) at a time, pulled as the consumer asks, each chunk through `shape`. The
   * first chunk is fetched before this resolves, so a bad query fails before any response is sent.
   */
  async stream<T>(sql: string, params: Params, shape: (r: Row) => T, mark?: number): Promise<AsyncGenerator<T[]>> {
    const { conn, guarded } = await this.readConn(mark)
    try {
      const { chunks, first } = await this.timed(
        sql,
        (async () => {
          const result = await guarded(() => conn.stream(sql, params.values))
          const chunks = chunkRows(result)
          return { chunks, first: await guarded(() => chunks.next()) }
        })(),
      )
      return (async function* () {
        try {
          for (let next = first; !next.done; next = await guarded(() => chunks.next())) yield next.value.map(shape)
        } finally {
          conn.closeSync()
        }
      })()
    } catch (e) {
      conn.closeSync()
      throw e
    }
  }

  /** As stream, but DuckDB's column chunks themselves, unconverted. */
  async streamChunks(sql: string, params: Params): Promise<ChunkStream> {
    const { conn, guarded } = await this.readConn()
    try {
      const { result, first } = await this.timed(
        sql,
        (async () => {
          const result = await guarded(() => conn.stream(sql, params.values))
          return { result, first: await guarded(() => result.fetchChunk()) }
        })(),
      )
      let open = true
      const close = () => {
        if (open) conn.closeSync()
        open = false
      }
      const chunks = pull(first, () => guarded(() => result.fetchChunk()), close)
      return { names: result.columnNames(), types: result.columnTypes(), chunks, close }
    } catch (e) {
      conn.closeSync()
      throw e
    }
  }

  /**
   * As streamChunks, over statements of the same columns read one after another (an export's windows:
   * windows.ts), each asked of `next` as the one before starts to be read: DuckDB runs a statement while the
   * one before is sent, and at most two are held. A statement's `done` hears how many rows it answered.
   */
  async streamSeq(next: () => Statement | null): Promise<ChunkStream> {
    const open = (s: Statement) => this.streamChunks(s.sql, s.params)
    let statement = next()
    if (!statement) throw new Error('streamSeq: no statement')
    const first = await open(statement)
    let current: ChunkStream | null = first
    let ahead: Promise<ChunkStream> | null = null
    const close = () => {
      current?.close()
      // A statement started ahead and never read holds its connection until closed here.
      void ahead?.then((s) => s.close()).catch(() => {})
    }
    async function* chunks() {
      try {
        while (current && statement) {
          const following = next()
          ahead = following && open(following)
          // Awaited below; until then a failure must not count as unhandled.
          ahead?.catch(() => {})
          let rows = 0
          for await (const chunk of current.chunks) {
            rows += chunk.rowCount
            yield chunk
          }
          statement.done?.(rows)
          statement = following
          current = ahead && (await ahead)
          ahead = null
        }
      } finally {
        close()
      }
    }
    return { names: first.names, types: first.types, chunks: chunks(), close }
  }
}

/** One of a sequence of statements (Reader.streamSeq). */
export interface Statement {
  sql: string
  params: Params
  done?: (rows: number) => void
}

/** A streaming result as DuckDB's own column chunks, for callers that convert columns (Arrow answers). */
export interface ChunkStream {
  names: string[]
  types: DuckDBType[]
  /** Each chunk is valid until the next is asked for. */
  chunks: AsyncGenerator<DuckDBDataChunk>
  /** Ends the read without reading on (reading to the end, or returning the generator, closes it too). */
  close: () => void
}

/** The chunks of a result as the consumer pulls them; the first already fetched, the connection closed at the end. */
async function* pull(first: DuckDBDataChunk | null, next: () => Promise<DuckDBDataChunk | null>, close: () => void) {
  try {
    for (let c = first; c && c.rowCount > 0; c = await next()) yield c
  } finally {
    close()
  }
}

/**
 * Wraps each wait on DuckDB so that one running past `ms` is interrupted and answers 504. An
 * interrupted streaming query does not always fail: its next fetch may simply find no more rows.
 * So the flag, not the outcome, decides — a timed-out read never passes for a complete one.
 */
export function interruptAfter(conn: DuckDBConnection, ms: number) {
  let timedOut = false
  const fail = () => new DomainError(504, `Query took longer than ${ms} ms and was stopped; narrow the filter or page with limit`)
  return async <T>(p: () => Promise<T>): Promise<T> => {
    if (timedOut) throw fail()
    const t = setTimeout(() => {
      timedOut = true
      conn.interrupt()
    }, ms)
    try {
      const out = await p()
      if (timedOut) throw fail()
      return out
    } catch (e) {
      if (timedOut) throw fail()
      throw e
    } finally {
      clearTimeout(t)
    }
  }
}

/**
 * Rows as objects. DuckDB's own row-object conversion costs several times more than its row arrays
 * (150 ms against 20 for 10,000 calls with usage lists), so objects are built here.
 */
function objects(names: string[], rows: unknown[][]): Row[] {
  const out: Row[] = new Array(rows.length)
  for (let i = 0; i < rows.length; i++) {
    const row = rows[i]!
    const o: Row = {}
    for (let j = 0; j < names.length; j++) o[names[j]!] = row[j]
    out[i] = o
  }
  return out
}
