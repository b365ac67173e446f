import { DuckDBTypeId, JSDuckDBValueConverter, type DuckDBDataChunk, type DuckDBResult, type DuckDBType } from '@duckdb/node-api'
import { rawStrings } from '../arrow/raw-columns.js'
import type { CallRecord } from '../model.js'
import { toCall } from './to-call.js'

type Row = Record<string, unknown>

/**
 * A streaming result's rows as objects, a chunk at a time. Text columns are read from DuckDB's vectors in bulk
 * (arrow/raw-columns.ts) and decoded from one buffer; other columns convert as @duckdb/node-api's own row
 * conversion does (`JSDuckDBValueConverter`), so each row holds the same values as before. Reading each string
 * through its own native call took ~6 s and much of the 13 s of garbage collection of a 1M-call JSON-lines export.
 */
export async function* chunkRows(result: DuckDBResult): AsyncGenerator<Row[]> {
  const names = result.columnNames()
  const text = result.columnTypes().map((t) => t.typeId === DuckDBTypeId.VARCHAR)
  for await (const chunk of result) yield rowsOf(chunk, names, text)
}

/** The calls of column chunks (Reader.streamChunks, streamSeq), a chunk at a time, as the API returns them. */
export async function* callChunks(stream: {
  names: readonly string[]
  types: readonly DuckDBType[]
  chunks: AsyncIterable<DuckDBDataChunk>
}): AsyncGenerator<CallRecord[]> {
  const text = stream.types.map((t) => t.typeId === DuckDBTypeId.VARCHAR)
  for await (const chunk of stream.chunks) yield rowsOf(chunk, stream.names, text).map(toCall)
}

function rowsOf(chunk: DuckDBDataChunk, names: readonly string[], text: readonly boolean[]): Row[] {
  const n = chunk.rowCount
  const columns = names.map((_, c) => (text[c] ? rawStrings(chunk, c, n) : chunk.convertColumnValues(c, JSDuckDBValueConverter)))
  const out: Row[] = new Array(n)
  for (let i = 0; i < n; i++) {
    const o: Row = {}
    for (let c = 0; c < names.length; c++) o[names[c]!] = columns[c]![i]
    out[i] = o
  }
  return out
}
