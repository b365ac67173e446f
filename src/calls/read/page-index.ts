import { listValue } from '@duckdb/node-api'
import { compileQuery, Params } from '../../query/expr.js'
import { latest, type QueryOptions } from '../model.js'
import type { BlockLocator } from '../storage/page-blocks.js'
import { BLOCK_COLUMNS, INDEX_COLUMNS, INDEX_FOLDED, pageIndexEnabled } from '../storage/page-index.js'
import { filterSql } from './filter.js'

type ReadAll = (sql: string, params: Params) => Promise<Record<string, unknown>[]>

/** Rows the first window of a page covers (then eight times more each time it falls short); tests make it small. */
export const pageWindow = { firstRows: 65_536 }
const INDEXED = new Set(INDEX_COLUMNS)

/** A row group of the page index (storage/page-index.ts, `page_index_groups`). */
interface Group {
  /** The index file (as `page_index`'s `filename` names it). */
  file: string
  rows: number
  t_min: bigint | null
  t_max: bigint | null
}

/**
 * Parts newer than the index (flushed segments, the tail) are windowed too: the page's window starts no earlier than
 * the `started_at` of the newest `rows` start parts there (rows: at least this, and 16 per call the page needs, eight
 * times more each time the window falls short), and only calls with a newer part in the window, or an index row in it,
 * are merged. Under ingest the newer parts hold ~a million parts, and merging all of them for every page took
 * seconds. `WEFT_PAGE_NEWER_WINDOW=off` merges them all, as before (A/B benches).
 */
export const pageNewer = { windowed: process.env.WEFT_PAGE_NEWER_WINDOW !== 'off', firstRows: 4_096, perCall: 16 }

/** Pages whose ids came from the index alone (the project had no newer part) or merged with newer parts (tests, benches). */
export const pageIdsPaths = { index: 0, merged: 0 }

/**
 * The ids of a newest-first page from the page index (with the block locators of calls read from it
 * alone), or null when the page cannot take it (another
 * order, a condition on a column the index lacks, no index). Calls with parts newer than the index
 * (in flushed segments or the tail) are merged from their index row and those parts, the rest are
 * read as indexed: the answer is the merged view's. The page is looked for among the newest calls
 * first (a `started_at` window the index's row-group statistics prune to), widened until it holds
 * the page or covers everything.
 */
export async function indexPageIds(project: string, opts: QueryOptions, readAll: ReadAll): Promise<PageIds | null> {
  const sort = opts.sort_by
  if (!pageIndexEnabled || !sort || sort.length !== 1 || sort[0]!.field !== 'started_at' || sort[0]!.direction !== 'desc') return null
  const need = opts.limit! + (opts.offset ?? 0)
  let newerRows = Math.max(pageNewer.firstRows, need * pageNewer.perCall)
  // The first window's newer start comes with the groups (one statement fewer: each costs ~5-15 ms of planning).
  const { groups, newer, start } = await projectGroups(project, newerRows, readAll)
  if (groups.length === 0) return null
  let windowed = newer && pageNewer.windowed
  let indexRows = pageWindow.firstRows
  for (let round = 0; ; round++) {
    let from = windowStart(groups, indexRows)
    // Whether the window covers every call: the index's groups all, and fewer newer start parts than asked for.
    let all = from === null
    if (windowed) {
      const t = round === 0 && start !== null ? start : await newerStart(project, newerRows, readAll)
      if (t !== null) {
        from = from === null || t > from ? t : from
        all = false
      }
    }
    const q = pageIdsSql(project, opts, need, from, newer, windowed, olderFiles(groups, from))
    if (!q) return null
    const found = await readAll(q.sql, q.params)
    if (found.length < need && !all) {
      // Wider by what the page still lacks (twice the calls the window held per call found, at least 8x): a
      // filter that keeps one call in a thousand gets there in two windows rather than four. A windowed round that
      // found nothing means a filter rarer than one newer call in thousands: the newer parts are merged whole.
      if (windowed && found.length === 0) windowed = false
      else {
        const grow = found.length > 0 ? Math.max(8, Math.ceil((2 * need) / found.length)) : 8
        indexRows *= grow
        newerRows *= grow
      }
      continue
    }
    pageIdsPaths[newer ? 'merged' : 'index']++
    return pageIds(found.slice(opts.offset ?? 0))
  }
}

/** A page's ids in order, and where the block files hold those read from the index alone (no newer part). */
export interface PageIds {
  ids: string[]
  located: BlockLocator[]
}

function pageIds(rows: Record<string, unknown>[]): PageIds {
  const located: BlockLocator[] = []
  for (const r of rows)
    if (r.blk_file !== null && r.blk_file !== undefined)
      located.push({ id: String(r.id), file: String(r.blk_file), row: Number(r.blk_row) })
  return { ids: rows.map((r) => String(r.id)), located }
}

/**
 * The index row groups that may hold the project, newest first, and whether the project has parts newer
 * than the index (in flushed segments or the tail). Asked in one statement after every acknowledged write
 * is visible (the reader waits for that first), so a write acknowledged before the page was asked for is
 * seen here: its part is in `newer_parts` until a compaction has put it in the index, and both views change
 * in one transaction. Without newer parts the page is the index's alone (pageIdsSql). With them, also the first
 * window's newer start from the tail (newerStartSql, for `newerRows`) in the same statement.
 */
async function projectGroups(
  project: string,
  newerRows: number,
  readAll: ReadAll,
): Promise<{ groups: Group[]; newer: boolean; start: bigint | null }> {
  const params = new Params()
  const p = params.add(project)
  const rows = await readAll(
    `SELECT file_name, rows, epoch_us(t_min) AS t_min, epoch_us(t_max) AS t_max,
        EXISTS (SELECT 1 FROM newer_parts WHERE project_id = ${p}) AS newer, (${newerStartSql(p, params.add(newerRows))}) AS start
      FROM page_index_groups WHERE project_min <= ${p} AND project_max >= ${p} ORDER BY t_max DESC NULLS LAST`,
    params,
  )
  const groups = rows.map((r) => ({
    file: String(r.file_name),
    rows: Number(r.rows),
    t_min: r.t_min as bigint | null,
    t_max: r.t_max as bigint | null,
  }))
  return { groups, newer: rows.some((r) => r.newer === true), start: (rows[0]?.start ?? null) as bigint | null }
}

/**
 * The `started_at` of the rows-th newest start part newer than the index, or null when there are fewer. From there
 * on the newer parts hold at least `rows` start parts, so a window starting there holds calls enough to try.
 */
async function newerStart(project: string, rows: number, readAll: ReadAll): Promise<bigint | null> {
  const params = new Params()
  const p = params.add(project)
  const found = await readAll(`SELECT (${nthNewestSql('newer_parts', p, params.add(rows))}) AS t`, params)
  return (found[0]?.t ?? null) as bigint | null
}

/**
 * The first window's newer start as a scalar subquery ($p: the project, $rows: rows), from the tail alone: null when
 * the tail holds fewer than `rows` start parts (newerStart then reads all the newer parts). The tail's rows-th newest
 * start is no later than the newer parts' (it is among them), so its window holds at least as many calls; under
 * ingest the newest calls are in the tail, and reading only it left the flushed segments unread: in a soak, the
 * statement that also asks for the index's groups took 36 ms (median) with every newer part read.
 */
const newerStartSql = (p: string, rows: string) => nthNewestSql('tail_parts', p, rows)

/**
 * The epoch µs of the rows-th newest `started_at` of a project's parts in `from`, or NULL when it has fewer, as a
 * statement. DuckDB's `max(x, n)` keeps the n greatest in an aggregate: over 240,000 newer parts 20-22 ms, where
 * `ORDER BY started_at DESC LIMIT 1 OFFSET n - 1` (a top-n sort) took 47-52 for the same value.
 */
export const nthNewestSql = (from: string, p: string, rows: string) =>
  `SELECT epoch_us(CASE WHEN count(*) >= ${rows} THEN list_last(max(started_at, ${rows})) END) FROM ${from}
      WHERE project_id = ${p} AND started_at IS NOT NULL`

/**
 * The earliest `started_at` of the newest groups holding about `rows` rows, or null when they are all
 * of them. Any value gives the right page (the caller widens the window while it holds too few calls);
 * a good one reads only the groups the page needs.
 */
function windowStart(groups: Group[], rows: number): bigint | null {
  let sum = 0
  let from: bigint | null = null
  for (let i = 0; i < groups.length; i++) {
    const g = groups[i]!
    if (g.t_min === null) return null
    from = from === null || g.t_min < from ? g.t_min : from
    sum += g.rows
    if (sum >= rows) return i === groups.length - 1 ? null : from
  }
  return null
}

/**
 * The index files whose rows of the project all started before `from`: the window leaves them out by name, so that
 * DuckDB does not open them (a compacted store has a file per id range; with time-ordered ids the newest calls are in
 * one). Leaving a file out changes no answer: the window's own condition keeps none of its rows, and a file a
 * compaction swapped in since the groups were read is not named. At 10M calls (10 files): 22 -> 9.5 ms a window.
 */
function olderFiles(groups: readonly Group[], from: bigint | null): string[] {
  if (from === null) return []
  const older = new Map<string, boolean>()
  for (const g of groups) older.set(g.file, (older.get(g.file) ?? true) && g.t_max !== null && g.t_max < from)
  return [...older].filter(([, o]) => o).map(([f]) => f)
}

/**
 * The statement of one window: index rows of calls with no newer part, plus calls with newer parts
 * merged (latest non-null value per field by seq, as merged.ts), filtered as the merged view is,
 * newest first; the former with their block locators, the latter without (their answer is not the index's). Null when the query names a column the index lacks.
 * A project with no newer part (`newer` false) reads the index alone: the merge's anti-join and its second
 * scan of the index cost a third of the statement on the 1M bench store (bench/README.md, `bench/query`).
 */
function pageIdsSql(
  project: string,
  opts: QueryOptions,
  need: number,
  from: bigint | null,
  newer: boolean,
  windowed: boolean,
  older: readonly string[],
): { sql: string; params: Params } | null {
  const params = new Params()
  const p = params.add(project)
  const where = ['m.started_at IS NOT NULL', 'm.deleted_at IS NULL', ...filterSql(opts.filter, params).where]
  if (opts.query) where.push(`coalesce(${compileQuery(opts.query, params)}, false)`)
  const named = [...where.join(' ').matchAll(/\bm\.(\w+)/g)].map((x) => x[1]!)
  if (named.some((c) => !INDEXED.has(c))) return null
  const window = from === null ? 'true' : `started_at >= make_timestamp(${params.add(from)}::BIGINT)`
  // On the index's scans only (its `filename`): the merged calls' rows have none.
  const skip = older.length ? ` AND NOT list_contains(${params.add(listValue([...older]))}, filename)` : ''
  where.push(window.replace('started_at', 'm.started_at'))
  const cols = INDEX_COLUMNS.join(', ')
  const page = `ORDER BY m.started_at DESC NULLS LAST, m.id ASC LIMIT ${params.add(need)}`
  const out = `m.id, ${BLOCK_COLUMNS.map((c) => `m.${c}`).join(', ')}`
  if (!newer) return { sql: `SELECT ${out} FROM page_index m WHERE m.project_id = ${p} AND ${where.join(' AND ')}${skip} ${page}`, params }
  // A call with newer parts, merged: its compacted row (the index row on the whole path; on the windowed one, its row
  // in the id-ordered compacted segments, looked up by id: a join's id range prunes them) and its newer parts.
  const compacted = windowed ? 'indexed_parts' : 'page_index'
  const newerOnly = windowed ? ' AND id IN (SELECT id FROM c)' : ''
  const merged = `SELECT project_id, id, max(seq) AS seq, ${INDEX_FOLDED.map(latest).join(', ')}, max(deleted_at) AS deleted_at
      FROM (SELECT ${cols} FROM ${compacted} WHERE project_id = ${p} AND id IN (SELECT id FROM c)
        UNION ALL BY NAME SELECT ${cols} FROM newer_parts WHERE project_id = ${p}${newerOnly})
      GROUP BY project_id, id`
  // c: the calls merged. Windowed: those with a newer part that may be in the window (a newer start there, or an
  // index row there), gathered once (MATERIALIZED); whole: every call with a newer part. The index rows in the window
  // of all other calls are read as indexed (the page's filters reach that scan).
  const c = windowed
    ? `c AS MATERIALIZED (SELECT id FROM newer_parts WHERE project_id = ${p} AND ${window}
        UNION SELECT id FROM newer_parts WHERE project_id = ${p} AND id IN (SELECT id FROM page_index WHERE project_id = ${p} AND ${window}${skip}))`
    : `c AS (SELECT DISTINCT id FROM newer_parts WHERE project_id = ${p})`
  const sql = `WITH ${c},
    m AS (
      SELECT ${cols}, ${BLOCK_COLUMNS.join(', ')} FROM page_index WHERE project_id = ${p} AND ${window}${skip} AND id NOT IN (SELECT id FROM c)
      UNION ALL BY NAME ${merged})
    SELECT ${out} FROM m WHERE ${where.join(' AND ')} ${page}`
  return { sql, params }
}
