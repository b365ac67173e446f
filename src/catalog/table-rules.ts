import { dumpsBoth, digestBytes } from './digest.js'
import type { StoredRow } from './table-chunks.js'
import { DomainError } from '../core/errors.js'
import type { TableRow, TableUpdateSpec } from '../schemas/tables.js'

/** Rows one create or update carries (the body limit bounds their bytes); the Python SDK sends ~10 MB chunks. */
export const MAX_REQUEST_ROWS = 100_000
/** Rows one table may hold: a dataset grows past one request by `/table/update` appends. */
export const MAX_TABLE_ROWS = 10_000_000

export function checkCount(n: number, max: number, what: string): void {
  if (n > max) throw new DomainError(413, `${n} ${what}; at most ${max}`)
}

/** A row as Weave digests it (docs/tables.md); only JSON objects are rows. */
export function toStored(row: unknown, where: string): StoredRow {
  if (row === null || typeof row !== 'object' || Array.isArray(row))
    throw new DomainError(
      400,
      `${where}: a table row must be a JSON object, got ${row === null ? 'null' : Array.isArray(row) ? 'an array' : typeof row}`,
    )
  const { python, compact } = dumpsBoth(row)
  return { digest: digestBytes(python), val_dump: compact }
}

export function checkExpected(expected: string | null | undefined, digest: string): void {
  if (expected && expected !== digest) throw new DomainError(409, `Digest mismatch: expected ${expected}, computed ${digest}`)
}

/** How update i's row is stored: digested here, or taken from a worker's digests (table-prepare.ts). */
export type RowOf = (row: unknown, where: string, i: number) => StoredRow

/** Applies the updates in order to a copy of the row list; answers the row each one touched. */
export function applyUpdates(list: string[], updates: TableUpdateSpec[], fresh: StoredRow[], rowOf: RowOf = toStored): string[] {
  const touched: string[] = []
  updates.forEach((u, i) => {
    if ('append' in u) {
      const s = rowOf(u.append.row, `updates[${i}].append.row`, i)
      fresh.push(s)
      list.push(s.digest)
      touched.push(s.digest)
    } else if ('pop' in u) {
      if (u.pop.index < 0 || u.pop.index >= list.length) throw new DomainError(400, `updates[${i}].pop: Index out of range`)
      touched.push(list.splice(u.pop.index, 1)[0]!)
    } else {
      if (u.insert.index < 0 || u.insert.index > list.length) throw new DomainError(400, `updates[${i}].insert: Index out of range`)
      const s = rowOf(u.insert.row, `updates[${i}].insert.row`, i)
      fresh.push(s)
      list.splice(u.insert.index, 0, s.digest)
      touched.push(s.digest)
    }
  })
  return touched
}

export const toRow = (digest: string, val_dump: string, original_index: number): TableRow => ({
  digest,
  val: JSON.parse(val_dump),
  original_index,
})
