import type { DuckDBValue } from '@duckdb/node-api'
import { rowsBySeq, type Reader, type StoredRow } from './table-chunks.js'
import type { TableQueryReq } from '../schemas/tables.js'

/** Positions kept by all cached sort orders together (12 bytes each): bounds the cache's memory at ~48 MB (+ heads). */
export const MAX_CACHED_POSITIONS = 4_000_000

/**
 * Every entry of one stored table as rows: position `i` (0-based), row digest `d`, row `seq` `s`. Binds $1
 * (project) and $2 (table digest).
 */
export const ENTRIES = `(SELECT cs + j - 1 AS i, d, s FROM (
    SELECT c.cs, unnest(string_split(k.row_digests, ',')) AS d, unnest(string_split(k.row_seqs, ',')::BIGINT[]) AS s,
      generate_subscripts(string_split(k.row_seqs, ','), 1) AS j
    FROM (SELECT unnest(chunk_digests) AS cd, unnest(chunk_starts) AS cs FROM table_lists WHERE project_id = $1 AND digest = $2) c
    JOIN table_chunks k ON k.project_id = $1 AND k.digest = c.cd))`

/**
 * `SELECT <cols>` from `<from>` (which must name the row `r` and a position `i`), in the calls' mixed-type order
 * for JSON fields: numbers before strings, missing last, in either direction; ties in table order. Each field is
 * extracted once, in a subquery: json_extract_string parses the row's whole JSON text, and with it written in each
 * of the four sort keys the extraction was most of a sort's time.
 */
export function sortedSelect(cols: string, from: string, sort: TableQueryReq['sort_by'], params: DuckDBValue[]): string {
  const fields: string[] = []
  const keys: string[] = []
  ;(sort ?? []).forEach((s, k) => {
    // The JSON path is a bound parameter, never SQL text; the schema keeps segments to [A-Za-z0-9_-] (no quotes).
    params.push(
      '$' +
        s.field
          .split('.')
          .map((seg) => `."${seg}"`)
          .join(''),
    )
    fields.push(`, json_extract_string(r.val_dump, $${params.length}) AS x${k}`)
    const dir = s.direction === 'desc' ? 'DESC' : 'ASC'
    keys.push(`x${k} IS NULL ASC`, `TRY_CAST(x${k} AS DOUBLE) IS NULL ASC`, `TRY_CAST(x${k} AS DOUBLE) ${dir}`, `x${k} ${dir}`)
  })
  return `SELECT ${cols} FROM (SELECT *${fields.join('')} FROM ${from}) ORDER BY ${[...keys, 'i ASC'].join(', ')}`
}

/** Rows of the head of an order kept with it, and at most this many bytes of them (per order). */
const HEAD_ROWS = 1000
const HEAD_BYTES = 256 * 1024
/** Orders kept at once, whatever their size: with HEAD_BYTES, bounds the heads' memory at 32 MB. */
const MAX_ORDERS = 128
/**
 * A request whose rows all lie among the first this many of an order sorts only them (DuckDB's top-N, `ORDER BY …
 * LIMIT`): the first pages are the ones read most, and a full order is computed only when a later page is asked.
 */
export const TOP_ROWS = HEAD_ROWS

/**
 * A table's positions (and row seqs) in one sort order, and the values of its first rows: the first pages of a
 * sorted table are the ones read most, and its rows lie scattered over the project's storage, where reading one
 * means decoding its neighbours too. A partial order (`complete` false) holds only the first rows of the order.
 */
export interface SortOrder {
  positions: Int32Array
  seqs: Float64Array
  head: StoredRow[]
  complete: boolean
}

type Sort = NonNullable<TableQueryReq['sort_by']>

async function computeOrder(q: Reader, project: string, table: string, n: number, sort: Sort, top?: number): Promise<SortOrder> {
  const params: DuckDBValue[] = [project, table]
  let sql = sortedSelect('i, s', `${ENTRIES} u JOIN table_rows r ON r.project_id = $1 AND r.seq = u.s`, sort, params)
  if (top !== undefined) sql += ` LIMIT $${params.push(top)}`
  const rows = await q.all<{ i: bigint; s: bigint }>(sql, params)
  const out: SortOrder = {
    positions: new Int32Array(rows.length),
    seqs: new Float64Array(rows.length),
    head: [],
    complete: rows.length >= n,
  }
  rows.forEach((r, k) => {
    out.positions[k] = Number(r.i)
    out.seqs[k] = Number(r.s)
  })
  const first = [...out.seqs.subarray(0, HEAD_ROWS)]
  const values = await rowsBySeq(q, project, first)
  let bytes = 0
  for (const seq of first) {
    const r = values.get(seq)!
    if ((bytes += r.val_dump.length) > HEAD_BYTES) break
    out.head.push(r)
  }
  return out
}

/**
 * Sort orders of tables, computed once per (project, table, sort) and kept while they fit: a stored table
 * never changes, so an order never goes stale. Least recently used orders leave first. A request within the
 * first TOP_ROWS of an order computes (and keeps) only those; one past them computes the whole order.
 */
export class SortOrderCache {
  private readonly orders = new Map<string, Promise<SortOrder>>()
  private readonly sizes = new Map<string, number>()
  private held = 0

  constructor(private readonly maxPositions = MAX_CACHED_POSITIONS) {}

  /** An order holding at least positions [0, upTo) of the sorted table (of n rows). */
  async get(q: Reader, project: string, table: string, n: number, sort: Sort, upTo: number): Promise<SortOrder> {
    const key = JSON.stringify([project, table, sort.map((s) => [s.field, s.direction])])
    const hit = this.orders.get(key)
    if (hit) {
      this.orders.delete(key)
      this.orders.set(key, hit)
      const order = await hit
      if (order.complete || upTo <= order.positions.length) return order
    }
    const top = upTo <= TOP_ROWS && n > TOP_ROWS ? TOP_ROWS : undefined
    const p = computeOrder(q, project, table, n, sort, top)
    const size = top ?? n
    if (size > this.maxPositions) return p
    this.drop(key)
    this.orders.set(key, p)
    this.sizes.set(key, size)
    this.held += size
    p.catch(() => {
      if (this.orders.get(key) === p) this.drop(key)
    })
    while (this.held > this.maxPositions || this.orders.size > MAX_ORDERS) this.drop(this.orders.keys().next().value!)
    return p
  }

  private drop(key: string): void {
    if (!this.orders.delete(key)) return
    this.held -= this.sizes.get(key) ?? 0
    this.sizes.delete(key)
  }
}
