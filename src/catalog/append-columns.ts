import bindings from '@duckdb/node-bindings'
import type { ColumnFill } from './db.js'

/**
 * Appender columns written straight into DuckDB's vectors (db.ts `ColumnFill`) rather than value by value: the
 * project of every stored table row is one constant vector per data chunk, and the rows' seqs one copy of a typed
 * array (setting the project 10,000 times cost ~15 ms of the event loop per 10,000-row chunk; load ~6). The C API
 * calls are the ones @duckdb/node-api itself makes (`vector_reference_value`, `copy_data_to_vector`), from the
 * binding it pins: package.json names the same version, and the two move together.
 */

/** The same text in every row: one constant vector per data chunk instead of one string per row. */
export function constantText(value: string, length: number): ColumnFill {
  const v = bindings.create_varchar(value)
  return {
    length,
    fill: (chunk, column) => bindings.vector_reference_value(bindings.data_chunk_get_vector(chunk.chunk, column), v),
  }
}

/** BIGINTs from a typed array: one copy per data chunk. */
export function bigints(values: BigInt64Array): ColumnFill {
  return {
    length: values.length,
    fill(chunk, column, at, size) {
      const v = bindings.data_chunk_get_vector(chunk.chunk, column)
      bindings.copy_data_to_vector(v, 0, values.buffer as ArrayBuffer, values.byteOffset + at * 8, size * 8)
    },
  }
}
