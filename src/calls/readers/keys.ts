import type { DuckDBDataChunk, DuckDBValue } from '@duckdb/node-api'

/**
 * Sort keys of a merged answer (merge.ts compares them across the worker's and the tail's rows):
 * plain JS values ordered as DuckDB orders them. Timestamps become their microseconds; anything else
 * that is not a string, number, bigint or boolean becomes its text.
 */
export type Key = string | number | bigint | boolean | null

export function keyOf(v: DuckDBValue | undefined): Key {
  if (v === null || v === undefined) return null
  const t = typeof v
  if (t === 'string' || t === 'number' || t === 'bigint' || t === 'boolean') return v as Key
  if (typeof v === 'object' && 'micros' in v) return (v as { micros: bigint }).micros
  return String(v)
}

/** The key columns (from column `from` on) of a chunk, a column array each. */
export function chunkKeys(chunk: DuckDBDataChunk, from: number): Key[][] {
  const out: Key[][] = []
  // rowCount and columnCount ask the native chunk each time: read once.
  const [rows, columns] = [chunk.rowCount, chunk.columnCount]
  for (let c = from; c < columns; c++) {
    const v = chunk.getColumnVector(c)
    const col = new Array<Key>(rows)
    for (let i = 0; i < rows; i++) col[i] = keyOf(v.getItem(i))
    out.push(col)
  }
  return out
}

/** Rows (arrays) as objects of the given column names; columns past the names (sort keys) are left out. */
export function rowObjects(names: readonly string[], rows: readonly unknown[][]): Record<string, unknown>[] {
  const out = new Array<Record<string, unknown>>(rows.length)
  for (let i = 0; i < rows.length; i++) {
    const row = rows[i]!
    const o: Record<string, unknown> = {}
    for (let j = 0; j < names.length; j++) o[names[j]!] = row[j]
    out[i] = o
  }
  return out
}

const utf8 = (s: string) => Buffer.from(s, 'utf8')

/**
 * DuckDB's order of two non-null keys of one column: strings by their UTF-8 bytes (DuckDB compares
 * bytes; JavaScript compares UTF-16 units, which differs above U+FFFF), numbers and booleans by value.
 */
function compareValues(a: Exclude<Key, null>, b: Exclude<Key, null>): number {
  if (typeof a === 'string' && typeof b === 'string') {
    if (a === b) return 0
    // Plain ASCII/BMP-below-surrogate strings order the same either way; only then is the cheap compare exact.
    if (/^[\u0000-\ud7ff]*$/.test(a) && /^[\u0000-\ud7ff]*$/.test(b)) return a < b ? -1 : 1
    return Buffer.compare(utf8(a), utf8(b))
  }
  if (typeof a === 'boolean' || typeof b === 'boolean') return Number(a) - Number(b)
  return a < b ? -1 : a > b ? 1 : 0
}

/** One sort key: its direction; NULL sorts last either way (DuckDB's default). */
export interface KeyOrder {
  desc: boolean
}

/** Compares row i of keys a with row j of keys b under the orders. */
export function compareRows(orders: readonly KeyOrder[], a: readonly Key[][], i: number, b: readonly Key[][], j: number): number {
  for (let k = 0; k < orders.length; k++) {
    const x = a[k]![i]!
    const y = b[k]![j]!
    if (x === null || y === null) {
      if (x === y) continue
      return x === null ? 1 : -1
    }
    const c = compareValues(x, y)
    if (c !== 0) return orders[k]!.desc ? -c : c
  }
  return 0
}
