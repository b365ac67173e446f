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

/**
 * Texts of ASCII bytes back to back in `text` (text i ends at `ends[i]`), the rows `rows` of them in that order:
 * each copied from the buffer into the vector, with no JavaScript string made of it. (Decoding a 10 MB chunk's
 * texts to strings cost the event loop ~30 ms, mostly first touches of the fresh string's pages, before the
 * appender copied them again.) Bytes under 0x80 are valid UTF-8, so DuckDB's check of each passes.
 */
export function asciiTexts(text: Uint8Array, ends: Int32Array, rows: readonly number[]): ColumnFill {
  return {
    length: rows.length,
    fill(chunk, column, at, size) {
      const v = bindings.data_chunk_get_vector(chunk.chunk, column)
      for (let k = 0; k < size; k++) {
        const r = rows[at + k]!
        bindings.vector_assign_string_element_len(v, k, text.subarray(r === 0 ? 0 : ends[r - 1]!, ends[r]!))
      }
    },
  }
}
