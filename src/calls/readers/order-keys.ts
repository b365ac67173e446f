import { fieldSql, type Params } from '../../query/expr.js'
import type { QueryOptions } from '../model.js'
import type { KeyOrder } from './keys.js'

/** One sort key of a merged answer: its SQL over the merged call `m`, and its direction. */
export interface SortKey extends KeyOrder {
  sql: string
}

/**
 * The order of a query (as calls/read/order.ts orderBy states it) as separate keys, so both sides
 * of a pooled read can select them as columns and the main thread can merge their rows (merge.ts).
 * Empty: the query asked for no order.
 */
export function sortKeys(sort: QueryOptions['sort_by'], params: Params): SortKey[] {
  if (sort === undefined || sort === null) return [key('m.started_at'), key('m.id')]
  if (sort.length === 0) return []
  const keys: SortKey[] = []
  for (const s of sort) {
    const desc = s.direction === 'desc'
    const f = fieldSql(s.field, params, sort)
    if (f.raw || f.type === 'string') {
      // Numbers before strings, missing last, in either direction (docs/calls-and-storage.md, mixed-type rule).
      const v = f.raw ?? f.sql
      keys.push(key(`(${v}) IS NULL`), key(`TRY_CAST(${v} AS DOUBLE) IS NULL`), key(`TRY_CAST(${v} AS DOUBLE)`, desc), key(`(${v})`, desc))
    } else keys.push(key(`(${f.sql})`, desc))
  }
  keys.push(key('m.id'))
  return keys
}

const key = (sql: string, desc = false): SortKey => ({ sql, desc })

/** `ORDER BY` of the keys (NULLs last in both directions, as compareRows has them). */
export function orderSql(keys: readonly SortKey[]): string {
  if (keys.length === 0) return ''
  return 'ORDER BY ' + keys.map((k) => `${k.sql} ${k.desc ? 'DESC' : 'ASC'} NULLS LAST`).join(', ')
}
