import type { ChParams } from './params.js'

/**
 * A JSON column and a path as the arguments of ClickHouse's JSON functions (`JSONExtractRaw(col, k1, k2)`),
 * each key bound: an array index as a 1-based Int64, which is how ClickHouse's JSON functions count.
 */
export function chJsonArgs(column: string, segs: string[], params: ChParams): string {
  const keys = segs.map((s) => (/^(0|[1-9]\d{0,8})$/.test(s) ? params.add(Number(s) + 1, 'Int64') : params.add(s, 'String')))
  return [`coalesce(${column}, '')`, ...keys].join(', ')
}
