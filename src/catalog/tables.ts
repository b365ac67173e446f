import { createHash, type Hash } from 'node:crypto'
import type { DuckDBValue } from '@duckdb/node-api'
import type { Catalog, Tx } from './db.js'
import { tableDigest } from './digest.js'
import { rowIndexes, type RowIndex } from './table-row-index.js'
import {
  allEntries,
  entriesAt,
  insertList,
  insertRows,
  readList,
  rowsBySeq,
  seqsOf,
  storedRows,
  strList,
  textAt,
  writeChunks,
  type Reader,
  type Rows,
  type StoredRow,
  type TableList,
} from './table-chunks.js'
import { ENTRIES, sortedSelect, SortOrderCache } from './table-order.js'
import { TableReadCache } from './table-read-cache.js'
import { asciiSlice } from './table-texts.js'
import { RecentTables, type RecentTable } from './table-recent.js'
import { CreateBatches } from './table-create-batch.js'
import type { RowDigests } from './table-prepare.js'
import { DomainError } from '../core/errors.js'
import type { TablesBackend } from './backends.js'
import { applyUpdates, checkCount, checkExpected, MAX_REQUEST_ROWS, MAX_TABLE_ROWS, toRow, toStored, type RowOf } from './table-rules.js'
import type { TableQueryReq, TableRow, TableStatsRow, TableUpdateSpec } from '../schemas/tables.js'

/** A write's project, its row index and the rows it stores (as rows, or already column-wise). */
interface Writing {
  project: string
  index: RowIndex | null
  fresh: StoredRow[] | Rows
}

const columns = (rows: StoredRow[] | Rows): Rows =>
  Array.isArray(rows) ? { digests: rows.map((r) => r.digest), texts: rows.map((r) => r.val_dump) } : rows

/** Part of a table made from row digests: rows [at, end) chunked anew, or a recent table's chunks from `at` on. */
type Run = { at: number; end: number } | { at: number; reuse: RecentTable }
/** A table's `n` row digests, [a, b) of them as strings on request. */
interface DigestRows {
  n: number
  at(a: number, b: number): string[]
}

/** Hash states of recently written tables kept so an append hashes only the new rows (a Hash is ~400 bytes). */
const HASH_STATES = 64

/**
 * Tables (docs/tables.md): ordered lists of row digests, kept in shared chunks; rows stored once per project
 * and digest.
 */
export class TableStore implements TablesBackend {
  private readonly hashes = new Map<string, Hash>()
  private readonly orders = new SortOrderCache()
  private readonly reads = new TableReadCache()
  private readonly recent = new RecentTables()
  private readonly creates: CreateBatches

  constructor(private readonly catalog: Catalog) {
    this.creates = new CreateBatches(catalog)
  }

  async create(project: string, rows: unknown[], expected?: string | null): Promise<{ digest: string; row_digests: string[] }> {
    checkCount(rows.length, MAX_REQUEST_ROWS, 'rows in one request')
    const stored = rows.map((r, i) => toStored(r, `rows[${i}]`))
    const prepared = { digests: stored.map((s) => s.digest), texts: stored.map((s) => s.val_dump) }
    const digest = tableDigest(prepared.digests)
    checkExpected(expected, digest)
    return this.createStored(project, digest, prepared)
  }

  /** A table of rows already checked and digested (table-prepare.ts, in a worker); `digest` is theirs. */
  async createStored(project: string, digest: string, rows: Rows): Promise<{ digest: string; row_digests: string[] }> {
    const row_digests = rows.digests
    const hash = createHash('sha256').update(row_digests.join(''))
    const list = await this.creates.add(project, digest, rows)
    this.remember(project, digest, hash)
    this.recent.remember(project, row_digests[0], { digest, list })
    return { digest, row_digests }
  }

  async update(project: string, base: string, updates: TableUpdateSpec[]): Promise<{ digest: string; updated_row_digests: string[] }> {
    return this.updateWith(project, base, updates, toStored)
  }

  /**
   * `update` with each update's row already checked and digested (table-prepare.ts): row i is update i's. Null
   * updates: every row appended in order, with no per-row objects (a 10,000-row chunk made ~40,000 of them).
   */
  async updateStored(project: string, base: string, updates: TableUpdateSpec[] | null, rows: Rows) {
    if (updates === null) return this.appendRows(project, base, rows)
    return this.updateWith(project, base, updates, (_row, _where, i) => ({ digest: rows.digests[i]!, val_dump: textAt(rows, i) }))
  }

  private async appendRows(project: string, base: string, rows: Rows) {
    checkCount(rows.digests.length, MAX_REQUEST_ROWS, 'updates in one request')
    return this.write(project, async (tx, index) => {
      const list = await readList(tx, project, base)
      if (!list) throw new DomainError(404, `Table ${base} not found`)
      checkCount(list.n + rows.digests.length, MAX_TABLE_ROWS, 'rows in the table')
      return this.append(tx, { project, index, fresh: rows }, base, list, rows.digests)
    })
  }

  private async updateWith(project: string, base: string, updates: TableUpdateSpec[], rowOf: RowOf) {
    checkCount(updates.length, MAX_REQUEST_ROWS, 'updates in one request')
    return this.write(project, async (tx, index) => {
      const list = await readList(tx, project, base)
      if (!list) throw new DomainError(404, `Table ${base} not found`)
      checkCount(list.n + updates.length, MAX_TABLE_ROWS, 'rows in the table')
      const fresh: StoredRow[] = []
      return updates.every((u) => 'append' in u)
        ? this.append(tx, { project, index, fresh }, base, list, applyUpdates([], updates, fresh, rowOf))
        : this.rewrite(tx, { project, index, fresh }, list, updates, rowOf)
    })
  }

  /** A write transaction with the project's row index (table-row-index.ts) at hand. */
  private async write<T>(project: string, fn: (tx: Tx, index: RowIndex | null) => Promise<T>): Promise<T> {
    const indexes = rowIndexes(this.catalog)
    try {
      return await this.catalog.transaction(async (tx) => fn(tx, await indexes.of(tx, project)))
    } finally {
      indexes.trim()
    }
  }

  /** Appends write the new rows' chunks and a list of chunk digests; the base's chunks are shared. */
  private async append(tx: Tx, w: Writing, base: string, list: TableList, updated_row_digests: string[]) {
    const { project } = w
    const hash = (await this.hashOf(tx, project, base, list)).copy()
    for (const d of updated_row_digests) hash.update(d)
    const digest = hash.copy().digest('hex')
    const seqs = await insertRows(tx, project, columns(w.fresh), w.index)
    const added = await writeChunks(
      tx,
      project,
      { digests: updated_row_digests, seqs: updated_row_digests.map((d) => seqs.get(d)!) },
      list.n,
    )
    const next = {
      n: list.n + updated_row_digests.length,
      chunks: [...list.chunks, ...added.chunks],
      starts: [...list.starts, ...added.starts],
    }
    await insertList(tx, project, digest, next)
    this.remember(project, digest, hash)
    return { digest, updated_row_digests }
  }

  /** Pops and inserts: the chunks wholly before the first changed position are kept, the rest written anew. */
  private async rewrite(tx: Tx, w: Writing & { fresh: StoredRow[] }, list: TableList, updates: TableUpdateSpec[], rowOf: RowOf) {
    const { project } = w
    const old = await allEntries(tx, project, list)
    const digests = [...old.digests]
    const updated_row_digests = applyUpdates(digests, updates, w.fresh, rowOf)
    const digest = tableDigest(digests)
    const seqs = await insertRows(tx, project, columns(w.fresh), w.index)
    old.digests.forEach((d, i) => seqs.set(d, old.seqs[i]!))
    let same = 0
    while (same < digests.length && same < old.digests.length && digests[same] === old.digests[same]) same++
    let kept = 0
    while (kept < list.chunks.length && (list.starts[kept + 1] ?? list.n) <= same) kept++
    const from = list.starts[kept] ?? list.n
    const rest = digests.slice(Math.min(from, digests.length))
    const added = await writeChunks(tx, project, { digests: rest, seqs: rest.map((d) => seqs.get(d)!) }, from)
    const next = {
      n: digests.length,
      chunks: [...list.chunks.slice(0, kept), ...added.chunks],
      starts: [...list.starts.slice(0, kept), ...added.starts],
    }
    await insertList(tx, project, digest, next)
    return { digest, updated_row_digests }
  }

  async createFromDigests(project: string, digests: string[], expected?: string | null): Promise<{ digest: string }> {
    checkCount(digests.length, MAX_TABLE_ROWS, 'row digests')
    const hash = createHash('sha256').update(digests.join(''))
    const digest = hash.copy().digest('hex')
    checkExpected(expected, digest)
    const rows = { n: digests.length, at: (a: number, b: number) => digests.slice(a, b) }
    return this.fromRuns(project, digest, rows, [{ at: 0, end: digests.length }], hash)
  }

  /**
   * `createFromDigests` of digests a worker parsed and checked (table-prepare.ts), `digest` theirs. Runs of them
   * that are whole tables created lately (a dataset's chunks, table-recent.ts) keep those tables' chunks.
   */
  async createFromStoredDigests(project: string, digest: string, digests: RowDigests): Promise<{ digest: string }> {
    if (Array.isArray(digests)) return this.createFromDigests(project, digests)
    const n = digests.ends.length
    checkCount(n, MAX_TABLE_ROWS, 'row digests')
    const runs: Run[] = []
    // Runs are checked by hashing them; a request whose runs match hashes each digest about once, so twice its
    // bytes bounds what any list, however made, costs here.
    const budget = { bytes: 2 * digests.text.length }
    let loose = -1
    let yielded = performance.now()
    for (let at = 0; at < n;) {
      // Rows that start no recent table are looked at one by one: a long scan gives the event loop a turn.
      if (performance.now() - yielded > 20) {
        await new Promise((resolve) => setImmediate(resolve))
        yielded = performance.now()
      }
      const reuse = this.recent.match(project, digests, at, budget)
      if (!reuse) {
        if (loose < 0) loose = at
        at++
        continue
      }
      if (loose >= 0) runs.push({ at: loose, end: at })
      loose = -1
      runs.push({ at, reuse })
      at += reuse.list.n
    }
    if (loose >= 0) runs.push({ at: loose, end: n })
    const { text, ends } = digests
    const rows = { n, at: (a: number, b: number) => asciiSlice(text, ends, a, b) }
    return this.fromRuns(project, digest, rows, runs, createHash('sha256').update(text))
  }

  /** A table of stored rows by digest, as runs: recent tables' chunks taken whole, other rows chunked here. */
  private async fromRuns(project: string, digest: string, rows: DigestRows, runs: Run[], hash: Hash): Promise<{ digest: string }> {
    const list: TableList = { n: rows.n, chunks: [], starts: [] }
    await this.write(project, async (tx, index) => {
      const wanted = [...new Set(runs.flatMap((r) => ('end' in r ? rows.at(r.at, r.end) : [])))]
      const seqs = await storedRows(tx, project, wanted, index)
      if (seqs.size !== wanted.length)
        throw new DomainError(400, `${wanted.length - seqs.size} of the row digests name no row of ${project}`)
      for (const r of runs) {
        let part: Pick<TableList, 'chunks' | 'starts'>
        if ('end' in r) {
          const digests = rows.at(r.at, r.end)
          part = await writeChunks(tx, project, { digests, seqs: digests.map((d) => seqs.get(d)!) }, r.at)
        } else part = { chunks: r.reuse.list.chunks, starts: r.reuse.list.starts.map((s) => s + r.at) }
        list.chunks.push(...part.chunks)
        list.starts.push(...part.starts)
      }
      await insertList(tx, project, digest, list)
    })
    this.remember(project, digest, hash)
    if (rows.n > 0) this.recent.remember(project, rows.at(0, 1)[0], { digest, list })
    return { digest }
  }

  /** The table's rows, filtered, sorted and paged; an unknown table has none. */
  async query(project: string, q: Omit<TableQueryReq, 'project_id'>): Promise<TableRow[]> {
    const list = await this.reads.list(this.catalog, project, q.digest)
    if (!list) return []
    if (q.filter?.row_digests) return this.filtered(project, q)
    const from = q.offset ?? 0
    const to = q.limit === undefined || q.limit === null ? list.n : from + q.limit
    if (q.sort_by?.length) {
      const order = await this.orders.get(this.catalog, project, q.digest, list.n, q.sort_by, Math.min(to, list.n))
      const positions = [...order.positions.subarray(from, to)]
      const inHead = from + positions.length <= order.head.length
      const rows = inHead ? null : await rowsBySeq(this.catalog, project, [...order.seqs.subarray(from, to)])
      return positions.map((p, k) => {
        const r = inHead ? order.head[from + k]! : rows!.get(order.seqs[from + k]!)!
        return toRow(r.digest, r.val_dump, p)
      })
    }
    const seqs = await this.reads.seqsAt(this.catalog, project, list, from, Math.min(to, list.n))
    const rows = await rowsBySeq(this.catalog, project, seqs)
    return seqs.map((seq, k) => {
      const r = rows.get(seq)!
      return toRow(r.digest, r.val_dump, from + k)
    })
  }

  /** Rows at the given positions of a table (missing positions left out); null if there is no such table. */
  async rowsAt(project: string, digest: string, positions: number[]): Promise<Map<number, unknown> | null> {
    const list = await this.reads.list(this.catalog, project, digest)
    if (!list) return null
    const inside = [...new Set(positions)].filter((p) => p < list.n)
    const e = await entriesAt(this.catalog, project, list, inside)
    const rows = await rowsBySeq(this.catalog, project, e.seqs)
    return new Map(inside.map((p, k) => [p, JSON.parse(rows.get(e.seqs[k]!)!.val_dump)]))
  }

  /**
   * Rows of a table by digest (digests it does not list left out); null if there is no such table. A digest
   * names at most one row of the project, so the rows are found through the project's digest key and then
   * checked against the table's row seqs: unnesting the table's row digests (strings) to match them cost ~10x
   * more at 100k rows.
   */
  async rowsById(project: string, digest: string, ids: string[]): Promise<Map<string, unknown> | null> {
    const list = await this.reads.list(this.catalog, project, digest)
    if (!list) return null
    const seqs = await seqsOf(this.catalog, project, [...new Set(ids)])
    if (seqs.size === 0) return new Map()
    const listed = await this.catalog.all<{ s: bigint }>(
      `SELECT DISTINCT s FROM (SELECT unnest(string_split(row_seqs, ',')::BIGINT[]) AS s FROM table_chunks WHERE project_id = $1 AND list_contains(${strList(2)}, digest))
        WHERE s IN (SELECT unnest(from_json($3::JSON, '["BIGINT"]')))`,
      [project, JSON.stringify(list.chunks), JSON.stringify([...seqs.values()])],
    )
    const rows = await rowsBySeq(
      this.catalog,
      project,
      listed.map((f) => Number(f.s)),
    )
    const out = new Map<string, unknown>()
    for (const r of rows.values()) out.set(r.digest, JSON.parse(r.val_dump))
    return out
  }

  /** With a digest filter: one statement over the table's entries (the filter can keep rows anywhere). */
  private async filtered(project: string, q: Omit<TableQueryReq, 'project_id'>): Promise<TableRow[]> {
    const params: DuckDBValue[] = [project, q.digest, JSON.stringify(q.filter!.row_digests)]
    const from = `${ENTRIES} u JOIN table_rows r ON r.project_id = $1 AND r.seq = u.s WHERE list_contains(${strList(3)}, u.d)`
    let sql = sortedSelect('i AS original_index, d AS digest, val_dump', `(SELECT u.i, u.d, r.val_dump FROM ${from}) r`, q.sort_by, params)
    if (q.limit !== undefined && q.limit !== null) sql += ` LIMIT $${params.push(q.limit)}`
    if (q.offset) sql += ` OFFSET $${params.push(q.offset)}`
    const rows = await this.catalog.all<{ original_index: bigint; digest: string; val_dump: string }>(sql, params)
    return rows.map((r) => toRow(r.digest, r.val_dump, Number(r.original_index)))
  }

  /** Row counts (and bytes of the distinct rows listed) of the named tables that exist. */
  async stats(project: string, digests: string[], withSize: boolean): Promise<TableStatsRow[]> {
    const out: TableStatsRow[] = []
    for (const d of digests) {
      const list = await this.reads.list(this.catalog, project, d)
      if (!list) continue
      if (!withSize) {
        out.push({ digest: d, count: list.n })
        continue
      }
      const [r] = await this.catalog.all<{ size: bigint }>(
        `SELECT coalesce(sum(strlen(val_dump)), 0) AS size FROM table_rows WHERE project_id = $1 AND seq IN
          (SELECT unnest(string_split(row_seqs, ',')::BIGINT[]) FROM table_chunks WHERE project_id = $1 AND list_contains(${strList(2)}, digest))`,
        [project, JSON.stringify(list.chunks)],
      )
      out.push({ digest: d, count: list.n, storage_size_bytes: Number(r?.size ?? 0) })
    }
    return out
  }

  /** The running SHA-256 of a table's row digests: from memory, or re-read once from its chunks. */
  private async hashOf(q: Reader, project: string, digest: string, list: TableList): Promise<Hash> {
    const kept = this.hashes.get(`${project}\0${digest}`)
    if (kept) return kept
    const hash = createHash('sha256').update((await allEntries(q, project, list)).digests.join(''))
    this.remember(project, digest, hash)
    return hash
  }

  private remember(project: string, digest: string, hash: Hash): void {
    const key = `${project}\0${digest}`
    this.hashes.delete(key)
    this.hashes.set(key, hash)
    if (this.hashes.size > HASH_STATES) this.hashes.delete(this.hashes.keys().next().value!)
  }
}
