import { listValue, type DuckDBConnection, type DuckDBDataChunk, type DuckDBType } from '@duckdb/node-api'
import type { Params } from '../../query/expr.js'
import type { Storage } from '../storage/storage.js'
import { interruptAfter } from '../read/reader.js'

/**
 * The main thread's share of a pooled read: the same statement over the store's own database, for the
 * calls with parts in the tail only (their ids bound to a temporary table). The statement names
 * `all_parts`; here it reads `scoped_parts`, a view of it limited to those calls (a temporary view
 * cannot shadow the view it reads). The text is the store's own SQL: every user value is a parameter.
 */
export async function tailChunks(
  storage: Storage,
  ids: readonly string[],
  sql: string,
  params: Params,
): Promise<{ names: string[]; types: DuckDBType[]; chunks: AsyncGenerator<DuckDBDataChunk> }> {
  const conn = await storage.connect()
  const guard = interruptAfter(conn, storage.opts.queryTimeoutMs)
  try {
    await conn.run('CREATE TEMP TABLE scope_ids AS SELECT DISTINCT unnest($1::VARCHAR[]) AS id', [listValue([...ids])])
    await conn.run('CREATE TEMP VIEW scoped_parts AS SELECT * FROM main.all_parts WHERE id IN (SELECT id FROM scope_ids)')
    const result = await guard(() => conn.stream(sql.replace(/\ball_parts\b/g, 'scoped_parts'), params.values))
    const first = await guard(() => result.fetchChunk())
    async function* chunks() {
      try {
        for (let c = first; c && c.rowCount > 0; c = await guard(() => result.fetchChunk())) yield c
      } finally {
        conn.closeSync()
      }
    }
    return { names: result.columnNames(), types: result.columnTypes(), chunks: chunks() }
  } catch (e) {
    conn.closeSync()
    throw e
  }
}
