import { Params } from '../../query/expr.js'
import type { QueryOptions } from '../model.js'
import { matching, type Extra } from '../read/merged.js'
import { orderSql, sortKeys, type SortKey } from './order-keys.js'

/** A pooled read's statement: the calls' columns (`select`), then the sort keys as columns `__weft_k<i>`, in order. */
export interface Statement {
  sql: string
  params: Params
  keys: SortKey[]
}

/**
 * The statement both sides of a pooled read run, each reading offset + limit rows (the window is cut after the
 * merge). The main thread reads the tail's calls with it as it is; a worker reads the segments' with `extra`
 * (the settled split and a window of start time: read/merged.ts), which changes which rows it reads, not their
 * columns or order. Built on each side from the same options: the bound values never cross between threads.
 */
export function exportStatement(project: string, opts: QueryOptions, select: string, extra: Extra = {}): Statement {
  const params = new Params()
  const keys = sortKeys(opts.sort_by, params)
  const order = orderSql(keys)
  const keyCols = keys.map((k, i) => `, ${k.sql} AS __weft_k${i}`).join('')
  const whole = { ...opts, limit: undefined, offset: undefined }
  let sql = `SELECT ${select}${keyCols} FROM ${matching(project, whole, params, false, order, extra)} ${order}`
  if (opts.limit !== undefined && opts.limit !== null) sql += ` LIMIT ${params.add(opts.limit + (opts.offset ?? 0))}`
  return { sql, params, keys }
}
