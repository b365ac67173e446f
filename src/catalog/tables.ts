import type { DuckDBValue } from '@duckdb/node-api'
import type { Catalog, Tx } from './db.js'
import { pythonJsonDumps, digestBytes, tableDigest } from './digest.js'
import { DomainError } from '../core/errors.js'
import type { TableQueryReq, TableRow, TableStatsRow, TableUpdateSpec } from '../schemas/tables.js'

/** Rows one create, update or create_from_digests may carry (the body limit bounds their bytes). */
export const MAX_TABLE_ROWS = 100_000

/** A list of strings bound as one JSON parameter: DuckDB cannot type an empty bound list. */
const strList = (n: number) => `from_json($${n}::JSON, '["VARCHAR"]')`

interface Stored {
  digest: string
  dump: string
}

function checkCount(n: number, what: string): void {
  if (n > MAX_TABLE_ROWS) throw new DomainError(413, `${n} ${what} in one request; at most ${MAX_TABLE_ROWS}`)
}

/** A row as Weave digests it (docs/tables.md); only JSON objects are rows. */
function toStored(row: unknown, where: string): Stored {
  if (row === null || typeof row !== 'object' || Array.isArray(row))
    throw new DomainError(
      400,
      `${where}: a table row must be a JSON object, got ${row === null ? 'null' : Array.isArray(row) ? 'an array' : typeof row}`,
    )
  return { digest: digestBytes(pythonJsonDumps(row)), dump: JSON.stringify(row) }
}

function checkExpected(expected: string | null | undefined, digest: string): void {
  if (expected && expected !== digest) throw new DomainError(409, `Digest mismatch: expected ${expected}, computed ${digest}`)
}

/** Applies the updates in order to a copy of the row list; answers the row each one touched. */
function applyUpdates(list: string[], updates: TableUpdateSpec[], fresh: Stored[]): string[] {
  const touched: string[] = []
  updates.forEach((u, i) => {
    if ('append' in u) {
      const s = toStored(u.append.row, `updates[${i}].append.row`)
      fresh.push(s)
      list.push(s.digest)
      touched.push(s.digest)
    } else if ('pop' in u) {
      if (u.pop.index < 0 || u.pop.index >= list.length) throw new DomainError(400, `updates[${i}].pop: Index out of range`)
      touched.push(list.splice(u.pop.index, 1)[0]!)
    } else {
      if (u.insert.index < 0 || u.insert.index > list.length) throw new DomainError(400, `updates[${i}].insert: Index out of range`)
      const s = toStored(u.insert.row, `updates[${i}].insert.row`)
      fresh.push(s)
      list.splice(u.insert.index, 0, s.digest)
      touched.push(s.digest)
    }
  })
  return touched
}

/** Mixed-type order, as calls sort JSON fields: numbers before strings, missing last, in either direction. */
function orderBy(sort: TableQueryReq['sort_by'], params: DuckDBValue[]): string {
  const keys: string[] = []
  for (const s of sort ?? []) {
    // The JSON path is a bound parameter, never SQL text; the schema keeps segments to [A-Za-z0-9_-] (no quotes).
    params.push(
      '$' +
        s.field
          .split('.')
          .map((seg) => `."${seg}"`)
          .join(''),
    )
    const x = `json_extract_string(r.val_dump, $${params.length})`
    const dir = s.direction === 'desc' ? 'DESC' : 'ASC'
    keys.push(`(${x}) IS NULL ASC`, `TRY_CAST(${x} AS DOUBLE) IS NULL ASC`, `TRY_CAST(${x} AS DOUBLE) ${dir}`, `(${x}) ${dir}`)
  }
  return `ORDER BY ${[...keys, 'u.i ASC'].join(', ')}`
}

/** Tables (docs/tables.md): ordered lists of row digests; rows stored once per project and digest. */
export class TableStore {
  constructor(private readonly catalog: Catalog) {}

  async create(project: string, rows: unknown[], expected?: string | null): Promise<{ digest: string; row_digests: string[] }> {
    checkCount(rows.length, 'rows')
    const stored = rows.map((r, i) => toStored(r, `rows[${i}]`))
    const row_digests = stored.map((s) => s.digest)
    const digest = tableDigest(row_digests)
    checkExpected(expected, digest)
    await this.catalog.transaction(async (tx) => {
      await insertRows(tx, project, stored)
      await insertTable(tx, project, digest, row_digests)
    })
    return { digest, row_digests }
  }

  async update(project: string, base: string, updates: TableUpdateSpec[]): Promise<{ digest: string; updated_row_digests: string[] }> {
    checkCount(updates.length, 'updates')
    return this.catalog.transaction(async (tx) => {
      const list = await rowDigests(tx, project, base)
      if (!list) throw new DomainError(404, `Table ${base} not found`)
      checkCount(list.length + updates.length, 'rows')
      const fresh: Stored[] = []
      const updated_row_digests = applyUpdates(list, updates, fresh)
      const digest = tableDigest(list)
      await insertRows(tx, project, fresh)
      await insertTable(tx, project, digest, list)
      return { digest, updated_row_digests }
    })
  }

  async createFromDigests(project: string, digests: string[], expected?: string | null): Promise<{ digest: string }> {
    checkCount(digests.length, 'row digests')
    const digest = tableDigest(digests)
    checkExpected(expected, digest)
    await this.catalog.transaction(async (tx) => {
      const wanted = [...new Set(digests)]
      const [found] = await tx.all<{ n: bigint }>(
        `SELECT count(*) AS n FROM table_rows WHERE project_id = $1 AND list_contains(${strList(2)}, digest)`,
        [project, JSON.stringify(wanted)],
      )
      if (Number(found?.n ?? 0) !== wanted.length)
        throw new DomainError(400, `${wanted.length - Number(found?.n ?? 0)} of the row digests name no row of ${project}`)
      await insertTable(tx, project, digest, digests)
    })
    return { digest }
  }

  /** The table's rows, filtered, sorted and paged in one statement; an unknown table has none. */
  async query(project: string, q: Omit<TableQueryReq, 'project_id'>): Promise<TableRow[]> {
    const params: DuckDBValue[] = [project, q.digest]
    let where = ''
    if (q.filter?.row_digests) {
      params.push(JSON.stringify(q.filter.row_digests))
      where = `WHERE list_contains(${strList(params.length)}, u.d)`
    }
    let sql = `SELECT u.i - 1 AS original_index, u.d AS digest, r.val_dump
      FROM (SELECT unnest(row_digests) AS d, generate_subscripts(row_digests, 1) AS i FROM tables WHERE project_id = $1 AND digest = $2) u
      JOIN table_rows r ON r.project_id = $1 AND r.digest = u.d ${where} ${orderBy(q.sort_by, params)}`
    if (q.limit !== undefined && q.limit !== null) sql += ` LIMIT $${params.push(q.limit)}`
    if (q.offset) sql += ` OFFSET $${params.push(q.offset)}`
    const rows = await this.catalog.all<{ original_index: bigint; digest: string; val_dump: string }>(sql, params)
    return rows.map((r) => ({ digest: r.digest, val: JSON.parse(r.val_dump), original_index: Number(r.original_index) }))
  }

  /** Row counts (and bytes of the distinct rows listed) of the named tables that exist. */
  async stats(project: string, digests: string[], withSize: boolean): Promise<TableStatsRow[]> {
    const size = withSize
      ? `, (SELECT coalesce(sum(strlen(r.val_dump)), 0) FROM table_rows r
           WHERE r.project_id = t.project_id AND list_contains(t.row_digests, r.digest)) AS size`
      : ''
    const rows = await this.catalog.all<{ digest: string; n: bigint; size?: bigint }>(
      `SELECT t.digest, len(t.row_digests) AS n ${size} FROM tables t WHERE t.project_id = $1 AND list_contains(${strList(2)}, t.digest)`,
      [project, JSON.stringify(digests)],
    )
    const byDigest = new Map(rows.map((r) => [r.digest, r]))
    return digests.flatMap((d) => {
      const r = byDigest.get(d)
      if (!r) return []
      return [withSize ? { digest: d, count: Number(r.n), storage_size_bytes: Number(r.size ?? 0) } : { digest: d, count: Number(r.n) }]
    })
  }
}

async function rowDigests(tx: Tx, project: string, digest: string): Promise<string[] | null> {
  const [r] = await tx.all<{ d: string[] }>('SELECT row_digests AS d FROM tables WHERE project_id = $1 AND digest = $2', [project, digest])
  return r ? [...r.d] : null
}

/** New rows only: one statement, the rows de-duplicated first (a conflict within one INSERT is an error). */
async function insertRows(tx: Tx, project: string, stored: Stored[]): Promise<void> {
  const unique = new Map(stored.map((s) => [s.digest, s.dump]))
  if (unique.size === 0) return
  await tx.run(`INSERT INTO table_rows SELECT $1, unnest(${strList(2)}), unnest(${strList(3)}) ON CONFLICT DO NOTHING`, [
    project,
    JSON.stringify([...unique.keys()]),
    JSON.stringify([...unique.values()]),
  ])
}

async function insertTable(tx: Tx, project: string, digest: string, rows: string[]): Promise<void> {
  await tx.run(`INSERT INTO tables VALUES ($1, $2, ${strList(3)}, now()) ON CONFLICT DO NOTHING`, [project, digest, JSON.stringify(rows)])
}
