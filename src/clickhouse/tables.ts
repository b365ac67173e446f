import type { TablesBackend } from '../catalog/backends.js'
import { tableDigest } from '../catalog/digest.js'
import type { StoredRow } from '../catalog/table-chunks.js'
import { applyUpdates, checkCount, checkExpected, MAX_REQUEST_ROWS, MAX_TABLE_ROWS, toRow, toStored } from '../catalog/table-rules.js'
import { DomainError } from '../core/errors.js'
import type { TableQueryReq, TableRow, TableStatsRow, TableUpdateSpec } from '../schemas/tables.js'
import { insertTarget, table } from './layout.js'
import { chTime, type ChStore } from './objects-store.js'
import { ChParams } from './query/params.js'
import { rowListSql, rowsByDigestSql, sortedRowsSql, tableSizeSql } from './tables-sql.js'

/**
 * Tables on ClickHouse, in Weave's layout: `table_rows` holds each distinct row of a project once (by digest),
 * `tables` each table's ordered row digests. Both are content-addressed, so a write never changes a row: the
 * new rows are inserted first and the table last, and a request that fails before the last insert leaves
 * nothing a read can reach. Digests, row rules and updates are the embedded store's (catalog/table-rules.ts).
 */
export class ClickHouseTables implements TablesBackend {
  constructor(private readonly s: ChStore) {}

  private async run(sql: string, p: ChParams): Promise<Record<string, unknown>[]> {
    return this.s.exec.query(sql, p.values, this.s.reads)
  }

  /** A table's row digests in order, or null if there is no such table. */
  private async list(project: string, digest: string): Promise<string[] | null> {
    const p = new ChParams()
    const [r] = await this.run(rowListSql(this.s.layout, p, project, digest, 'row_digests'), p)
    return r ? (r.row_digests as string[]) : null
  }

  /** Row values by digest (the ones the project has). */
  private async values(project: string, digests: string[]): Promise<Map<string, string>> {
    const unique = [...new Set(digests)]
    if (unique.length === 0) return new Map()
    const p = new ChParams()
    const rows = await this.run(rowsByDigestSql(this.s.layout, p, project, unique), p)
    return new Map(rows.map((r) => [String(r.digest), String(r.val_dump)]))
  }

  /** Stores the rows the project lacks, then the table: the table becomes visible only with all its rows. */
  private async write(project: string, digest: string, rowDigests: string[], fresh: StoredRow[]): Promise<void> {
    const created_at = chTime(this.s.clock.next())
    const byDigest = new Map(fresh.map((r) => [r.digest, r.val_dump]))
    const have = await this.known(project, [...byDigest.keys()])
    const rows = [...byDigest]
      .filter(([d]) => !have.has(d))
      .map(([d, v]) => ({ project_id: project, digest: d, refs: [], val_dump: v, created_at }))
    if (rows.length) await this.s.exec.insert(insertTarget(this.s.layout, 'table_rows'), rows, this.s.writes)
    const t = { project_id: project, digest, row_digests: rowDigests, created_at }
    await this.s.exec.insert(insertTarget(this.s.layout, 'tables'), [t], this.s.writes)
  }

  /** Which of these row digests the project has stored. */
  private async known(project: string, digests: string[]): Promise<Set<string>> {
    if (digests.length === 0) return new Set()
    const p = new ChParams()
    const rows = await this.run(
      `SELECT DISTINCT digest FROM ${table(this.s.layout, 'table_rows')}
        WHERE project_id = ${p.add(project, 'String')} AND digest IN ${p.add(digests, 'Array(String)')}`,
      p,
    )
    return new Set(rows.map((r) => String(r.digest)))
  }

  async create(project: string, rows: unknown[], expected?: string | null): Promise<{ digest: string; row_digests: string[] }> {
    checkCount(rows.length, MAX_REQUEST_ROWS, 'rows in one request')
    const stored = rows.map((r, i) => toStored(r, `rows[${i}]`))
    const row_digests = stored.map((s) => s.digest)
    const digest = tableDigest(row_digests)
    checkExpected(expected, digest)
    await this.write(project, digest, row_digests, stored)
    return { digest, row_digests }
  }

  async update(project: string, base: string, updates: TableUpdateSpec[]): Promise<{ digest: string; updated_row_digests: string[] }> {
    checkCount(updates.length, MAX_REQUEST_ROWS, 'updates in one request')
    const list = await this.list(project, base)
    if (!list) throw new DomainError(404, `Table ${base} not found`)
    checkCount(list.length + updates.length, MAX_TABLE_ROWS, 'rows in the table')
    const fresh: StoredRow[] = []
    const updated_row_digests = applyUpdates(list, updates, fresh)
    const digest = tableDigest(list)
    await this.write(project, digest, list, fresh)
    return { digest, updated_row_digests }
  }

  async createFromDigests(project: string, digests: string[], expected?: string | null): Promise<{ digest: string }> {
    checkCount(digests.length, MAX_TABLE_ROWS, 'row digests')
    const digest = tableDigest(digests)
    checkExpected(expected, digest)
    const wanted = [...new Set(digests)]
    const have = await this.known(project, wanted)
    if (have.size !== wanted.length) throw new DomainError(400, `${wanted.length - have.size} of the row digests name no row of ${project}`)
    await this.write(project, digest, digests, [])
    return { digest }
  }

  async query(project: string, q: Omit<TableQueryReq, 'project_id'>): Promise<TableRow[]> {
    if (q.filter?.row_digests || q.sort_by?.length) {
      const p = new ChParams()
      const rows = await this.run(sortedRowsSql(this.s.layout, p, project, q), p)
      return rows.map((r) => toRow(String(r.digest), String(r.val_dump), Number(r.original_index)))
    }
    const from = q.offset ?? 0
    const p = new ChParams()
    const len = q.limit === undefined || q.limit === null ? 'length(row_digests)' : p.add(q.limit, 'UInt64')
    const [r] = await this.run(
      rowListSql(this.s.layout, p, project, q.digest, `arraySlice(row_digests, ${p.add(from + 1, 'UInt64')}, ${len}) AS d`),
      p,
    )
    if (!r) return []
    const page = r.d as string[]
    const vals = await this.values(project, page)
    return page.map((d, k) => toRow(d, vals.get(d)!, from + k))
  }

  async rowsAt(project: string, digest: string, positions: number[]): Promise<Map<number, unknown> | null> {
    const list = await this.list(project, digest)
    if (!list) return null
    const inside = [...new Set(positions)].filter((x) => x < list.length)
    const vals = await this.values(
      project,
      inside.map((x) => list[x]!),
    )
    return new Map(inside.map((x) => [x, JSON.parse(vals.get(list[x]!)!)]))
  }

  async rowsById(project: string, digest: string, ids: string[]): Promise<Map<string, unknown> | null> {
    const list = await this.list(project, digest)
    if (!list) return null
    const listed = new Set(list)
    const vals = await this.values(
      project,
      ids.filter((d) => listed.has(d)),
    )
    return new Map([...vals].map(([d, v]) => [d, JSON.parse(v)]))
  }

  async stats(project: string, digests: string[], withSize: boolean): Promise<TableStatsRow[]> {
    const out: TableStatsRow[] = []
    for (const d of digests) {
      const p = new ChParams()
      const [r] = await this.run(rowListSql(this.s.layout, p, project, d, 'length(row_digests) AS n'), p)
      if (!r) continue
      if (!withSize) {
        out.push({ digest: d, count: Number(r.n) })
        continue
      }
      const q = new ChParams()
      const [size] = await this.run(tableSizeSql(this.s.layout, q, project, d), q)
      out.push({ digest: d, count: Number(r.n), storage_size_bytes: Number(size?.size ?? 0) })
    }
    return out
  }
}
