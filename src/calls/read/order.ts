import { listValue } from '@duckdb/node-api'
import { Params, fieldSql } from '../../query/expr.js'
import type { QueryOptions } from '../model.js'
import { rangeOf } from '../../query/list-filters.js'
import { MERGED, SELECT_OUT, matching } from './merged.js'
import { indexPageIds, nthNewestSql, pageNewer, type PageIds } from './page-index.js'
import type { Window } from './windows.js'

type ReadAll = (sql: string, params: Params) => Promise<Record<string, unknown>[]>

/** Pages up to this many calls (limit + offset) are found by id first (see pageSql). */
const PAGE_IDS = 10_000
/** Pages up to this many ids fetch their calls with an IN list (see pageSql). */
const IN_LIST = 1_000

export function orderBy(sort: QueryOptions['sort_by'], params: Params): string {
  if (sort === undefined || sort === null) return 'ORDER BY m.started_at ASC, m.id ASC'
  if (sort.length === 0) return ''
  const keys: string[] = []
  for (const s of sort) {
    const dir = s.direction === 'desc' ? 'DESC' : 'ASC'
    // Values bound to the sort list (feedback fields) are found by the list itself.
    const f = fieldSql(s.field, params, sort)
    if (f.raw || f.type === 'string') {
      // Numbers before strings, missing last, in either direction (docs/calls-and-storage.md, mixed-type rule).
      const v = f.raw ?? f.sql
      keys.push(`(${v}) IS NULL ASC`, `TRY_CAST(${v} AS DOUBLE) IS NULL ASC`, `TRY_CAST(${v} AS DOUBLE) ${dir}`, `(${v}) ${dir}`)
    } else keys.push(`(${f.sql}) ${dir} NULLS LAST`)
  }
  return `ORDER BY ${keys.join(', ')}, m.id ASC`
}

/** The matching calls, whole, in order, with limit and offset: one statement (of those in `window`, when given). */
export function selectSql(project: string, opts: QueryOptions, params: Params, select = SELECT_OUT, window?: Window): string {
  const order = orderBy(opts.sort_by, params)
  let sql = `SELECT ${select} FROM ${matching(project, opts, params, false, order, { settled: true, started: window })} ${order}`
  if (opts.limit !== undefined && opts.limit !== null) sql += ` LIMIT ${params.add(opts.limit)}`
  if (opts.offset) sql += ` OFFSET ${params.add(opts.offset)}`
  return sql
}

/**
 * A page (limit + offset up to PAGE_IDS) is found in two steps: the ids of the page from a merge of
 * the light columns only (run with `readAll`), then the whole calls for those ids. The large JSON
 * columns of a project are then merged for a page, not for every matching call. Null: not a page.
 */
export async function pageSql(
  project: string,
  opts: QueryOptions,
  readAll: ReadAll,
  select = SELECT_OUT,
): Promise<{ sql: string; params: Params } | null> {
  const plan = await pagePlan(project, opts, readAll)
  return plan && fetchSql(project, plan.ids, select)
}

/** The first step of a page (see pageSql): its ids, from the page index when it can, else the merge. Null: not a page. */
export async function pagePlan(project: string, opts: QueryOptions, readAll: ReadAll): Promise<PageIds | null> {
  if (opts.limit === undefined || opts.limit === null || opts.limit + (opts.offset ?? 0) > PAGE_IDS) return null
  return (await indexPageIds(project, opts, readAll)) ?? { ids: await mergedPageIds(project, opts, readAll), located: [] }
}

/** The second step of a page: the live calls of these ids, whole (`select`), merged, in the ids' order. */
export function fetchSql(project: string, ids: readonly string[], select = SELECT_OUT): { sql: string; params: Params } {
  // An empty list has no element type for DuckDB to bind; an empty page needs no second step.
  if (ids.length === 0) return { sql: 'SELECT 1 WHERE false', params: new Params() }
  const out = new Params()
  const p = out.add(project)
  const l = out.add(listValue([...ids]))
  // The ids' range reaches the Parquet scan as a filter that skips row groups (segments are sorted by id): an IN
  // list of parameters does not (DuckDB joins it after reading every row: 10 ids over 3 flushed segments of 120,000
  // parts read them all, 35 ms; with the range 18). A list parameter is matched only after the whole row is read.
  const match =
    (ids.length <= IN_LIST ? `id IN (${ids.map((id) => out.add(id)).join(', ')})` : `list_contains(${l}, id)`) +
    rangeOf([...ids], 'id', out)
  return {
    sql: `SELECT ${select} FROM (${MERGED} WHERE project_id = ${p} AND ${match} GROUP BY project_id, id) m
        WHERE m.deleted_at IS NULL ORDER BY list_position(${l}, m.id)`,
    params: out,
  }
}

/**
 * The ids of a page from a merge of the light columns of the project's parts. Newest first, only the calls started
 * since the rows-th newest start part are merged (rows: as for the parts newer than the page index, page-index.ts),
 * eight times more while that window holds too few: every call outside it started earlier, so a window holding the
 * page holds the page of all calls. Merging every part of a tail of 76,000 for each page took 80-140 ms.
 */
async function mergedPageIds(project: string, opts: QueryOptions, readAll: ReadAll): Promise<string[]> {
  const need = opts.limit! + (opts.offset ?? 0)
  const sort = opts.sort_by
  const newestFirst = sort?.length === 1 && sort[0]!.field === 'started_at' && sort[0]!.direction === 'desc'
  for (let rows = Math.max(pageNewer.firstRows, need * pageNewer.perCall); newestFirst && pageNewer.windowed; rows *= 8) {
    const from = await nthNewestStart(project, rows, readAll)
    if (from === null) break
    mergedPagePaths.windows++
    const ids = await mergedIds(project, opts, readAll, { lo: from, hi: null })
    if (ids.length >= need) return ids.slice(opts.offset ?? 0)
  }
  mergedPagePaths.whole++
  return mergedIds(project, opts, readAll)
}

/** Merges of a page's ids: windows merged (see mergedPageIds) and merges of every part (tests). */
export const mergedPagePaths = { windows: 0, whole: 0 }

/** The merge's ids, newest first: the page's (with its offset), or the first `limit + offset` of a window's. */
async function mergedIds(project: string, opts: QueryOptions, readAll: ReadAll, window?: Window): Promise<string[]> {
  const params = new Params()
  const order = orderBy(opts.sort_by, params)
  const limit = window ? opts.limit! + (opts.offset ?? 0) : opts.limit!
  let sql = `SELECT m.id FROM ${matching(project, opts, params, true, order, { started: window })} ${order} LIMIT ${params.add(limit)}`
  if (opts.offset && !window) sql += ` OFFSET ${params.add(opts.offset)}`
  return (await readAll(sql, params)).map((r) => String(r.id))
}

/**
 * A `started_at` (epoch µs) from which the project has at least `rows` start parts: the rows-th newest in the tail
 * (under ingest the newest calls are there: 6-8 ms for a tail of 20,000 parts against 19-25 ms over it and three
 * flushed segments), else in all its parts; null when it has fewer.
 */
async function nthNewestStart(project: string, rows: number, readAll: ReadAll): Promise<bigint | null> {
  for (const from of ['tail_parts', 'all_parts']) {
    const params = new Params()
    const found = await readAll(`SELECT (${nthNewestSql(from, params.add(project), params.add(rows))}) AS t`, params)
    if (found[0]?.t !== null && found[0]?.t !== undefined) return found[0].t as bigint
  }
  return null
}

/** The statement of a query: by page when it is one (see pageSql), else whole. */
export async function querySql(
  project: string,
  opts: QueryOptions,
  readAll: (sql: string, params: Params) => Promise<Record<string, unknown>[]>,
  select = SELECT_OUT,
): Promise<{ sql: string; params: Params }> {
  const page = await pageSql(project, opts, readAll, select)
  if (page) return page
  const params = new Params()
  return { sql: selectSql(project, opts, params, select), params }
}
