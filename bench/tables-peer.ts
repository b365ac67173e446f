/**
 * The ClickHouse peer of the tables bench: chdb (in a process of its own, tables-peer-process.ts) with Weave's `tables`,
 * `table_rows` and `object_versions` schema (ReplacingMergeTree, Weave's migrations), doing what
 * Weave's ClickHouse trace server does for the same requests: parse the rows, `json.dumps` and digest
 * each, insert them, and read pages, sorted pages, latest objects and row refs with Weave's SQL shapes.
 */
import { createRequire } from 'node:module'
import path from 'node:path'
import { pythonJsonDumps, digestBytes } from '../src/catalog/digest.js'
import { ROOT_DIR } from '../src/core/version.js'
import { PROJECT, tableDigestOf, type PageRow, type Row } from './tables-data.js'

interface Session {
  query(sql: string, format?: string): string
  queryBind(sql: string, args: object, format?: string): string
  insert(p: { table: string; values: Buffer; format: 'JSONEachRow' }): Promise<unknown>
  cleanup?: () => void
}
interface Chdb {
  Session: new (dir?: string) => Session
}

export function loadChdb(): Chdb | null {
  try {
    return createRequire(path.join(ROOT_DIR, 'bench', 'peer-deps', 'package.json'))('chdb') as Chdb
  } catch {
    return null
  }
}

const SCHEMA = [
  `CREATE TABLE tables (project_id String, digest String, row_digests Array(String), created_at DateTime64(3) DEFAULT now64(3))
    ENGINE = ReplacingMergeTree() ORDER BY (project_id, digest)`,
  `CREATE TABLE table_rows (project_id String, digest String, refs Array(String), val_dump String, created_at DateTime64(3) DEFAULT now64(3))
    ENGINE = ReplacingMergeTree() ORDER BY (project_id, digest)`,
  `CREATE TABLE object_versions (project_id String, object_id String, created_at DateTime64(3) DEFAULT now64(3),
    deleted_at Nullable(DateTime64(3)) DEFAULT NULL, kind Enum('op' = 1, 'object' = 2), base_object_class Nullable(String),
    leaf_object_class Nullable(String), refs Array(String), val_dump String, digest String, wb_user_id Nullable(String))
    ENGINE = ReplacingMergeTree() ORDER BY (project_id, kind, object_id, digest)`,
]

const lines = (out: string) =>
  out
    .split('\n')
    .filter(Boolean)
    .map((l) => JSON.parse(l) as unknown[])

/**
 * Weave's table page in natural order (make_natural_sort_table_query): slice the row-digest array
 * first, enumerate it, join the slice's rows.
 */
const NATURAL = `WITH digests_arr AS (
    SELECT ifNull(any(arraySlice(row_digests, 1 + {off:Int64}, {lim:Int64})), []) AS arr FROM tables WHERE project_id = {p:String} AND digest = {d:String})
  SELECT DISTINCT t.row_digest AS digest, tr.val_dump, t.original_index + {off:Int64} - 1 AS original_index
  FROM (SELECT row_digest, original_index FROM (SELECT (SELECT arr FROM digests_arr) AS row_digests,
      arrayEnumerate((SELECT arr FROM digests_arr)) AS original_indices) ARRAY JOIN row_digests AS row_digest, original_indices AS original_index) AS t
  INNER JOIN (SELECT digest, val_dump FROM table_rows WHERE project_id = {p:String} AND digest IN (SELECT arrayJoin(arr) FROM digests_arr)) AS tr
    ON tr.digest = t.row_digest
  ORDER BY original_index ASC`

/**
 * Weave's table page sorted by a JSON field (make_standard_table_query): every row joined, then the
 * field's null / number / text order, as Weave sorts dynamic fields; the position breaks ties.
 */
const SORTED = `WITH digests_arr AS (SELECT ifNull(any(row_digests), []) AS arr FROM tables WHERE project_id = {p:String} AND digest = {d:String})
  SELECT tr.digest, tr.val_dump, tr.original_index FROM (
    SELECT DISTINCT t.row_digest AS digest, tr.val_dump, t.row_index AS original_index
    FROM (SELECT row_digest, original_index - 1 AS row_index FROM (SELECT (SELECT arr FROM digests_arr) AS row_digests,
        arrayEnumerate((SELECT arr FROM digests_arr)) AS original_indices) ARRAY JOIN row_digests AS row_digest, original_indices AS original_index) AS t
    INNER JOIN (SELECT digest, val_dump FROM table_rows WHERE project_id = {p:String} AND digest IN (SELECT arrayJoin(arr) FROM digests_arr)) AS tr
      ON tr.digest = t.row_digest) AS tr
  ORDER BY JSON_VALUE(tr.val_dump, '$.score') = '' ASC, isNull(toFloat64OrNull(JSON_VALUE(tr.val_dump, '$.score'))) ASC,
    toFloat64OrNull(JSON_VALUE(tr.val_dump, '$.score')) DESC, JSON_VALUE(tr.val_dump, '$.score') DESC, tr.original_index ASC
  LIMIT {lim:Int64}`

/** Weave's object metadata query (ObjectMetadataQueryBuilder): versions, latest and version_index by window. */
function objectsMetadata(where: string, idCond = ''): string {
  return `SELECT object_id, digest, version_index, is_latest, base_object_class FROM (
    SELECT project_id, object_id, created_at, deleted_at, kind, base_object_class, digest,
      row_number() OVER (PARTITION BY project_id, kind, object_id ORDER BY created_at ASC) - 1 AS version_index,
      row_number() OVER (PARTITION BY project_id, kind, object_id ORDER BY (deleted_at IS NULL) DESC, created_at DESC) AS row_num,
      if(row_num = 1, 1, 0) AS is_latest
    FROM (SELECT *, row_number() OVER (PARTITION BY project_id, kind, object_id, digest ORDER BY created_at DESC, (deleted_at IS NULL) ASC) AS rn
      FROM object_versions WHERE project_id = {p:String}${idCond})
    WHERE rn = 1) AS main
  WHERE ${where} AND deleted_at IS NULL`
}
const OBJ_VALS = `SELECT object_id, digest, argMax(val_dump, created_at) FROM object_versions
  WHERE project_id = {p:String} AND object_id IN {ids:Array(String)} AND digest IN {digests:Array(String)} GROUP BY object_id, digest`

export interface PeerObject {
  object_id: string
  digest: string
  version_index: number
  is_latest: number
  base_object_class: string | null
  val: unknown
}

export class ClickHousePeer {
  constructor(private readonly s: Session) {
    for (const q of SCHEMA) s.query(q)
  }

  private rows(sql: string, args: object): unknown[][] {
    return lines(this.s.queryBind(sql, args, 'JSONCompactEachRow'))
  }

  /** /table/create for one chunk, as Weave's server does it: parse, dump and digest each row, insert rows, then the table. */
  async create(chunkJson: string): Promise<{ digest: string; row_digests: string[] }> {
    const row_digests = await this.insertRows(JSON.parse(chunkJson) as Row[])
    const digest = tableDigestOf(row_digests)
    await this.insertTable(digest, row_digests)
    return { digest, row_digests }
  }

  /** /table/update with appends (Weave's table_update): read the base list, append, insert new rows and the new table. */
  async append(base: string, chunkJson: string): Promise<{ digest: string }> {
    const [hit] = this.rows('SELECT row_digests FROM tables WHERE project_id = {p:String} AND digest = {d:String} LIMIT 1', {
      p: PROJECT,
      d: base,
    })
    if (!hit) throw new Error(`peer: table ${base} not found`)
    const list = hit[0] as string[]
    list.push(...(await this.insertRows(JSON.parse(chunkJson) as Row[])))
    const digest = tableDigestOf(list)
    await this.insertTable(digest, list)
    return { digest }
  }

  private async insertRows(rows: Row[]): Promise<string[]> {
    const digests: string[] = []
    let body = ''
    for (const r of rows) {
      const dump = pythonJsonDumps(r)
      const digest = digestBytes(dump)
      digests.push(digest)
      body += JSON.stringify({ project_id: PROJECT, digest, refs: [], val_dump: dump }) + '\n'
    }
    await this.s.insert({ table: 'table_rows', values: Buffer.from(body), format: 'JSONEachRow' })
    return digests
  }

  /** /table/create_from_digests: Weave inserts the table row without checking the rows exist. */
  insertTableOnly(digest: string, rowDigests: string[]): Promise<void> {
    return this.insertTable(digest, rowDigests)
  }

  private async insertTable(digest: string, rowDigests: string[]): Promise<void> {
    const line = JSON.stringify({ project_id: PROJECT, digest, row_digests: rowDigests }) + '\n'
    await this.s.insert({ table: 'tables', values: Buffer.from(line), format: 'JSONEachRow' })
  }

  /** Object versions of one round, one insert (Weave inserts one row per /obj/create; the load is not timed against weft). */
  async insertObjects(objs: { object_id: string; val: Row }[]): Promise<string[]> {
    let body = ''
    const digests = objs.map((o) => {
      const dump = pythonJsonDumps(o.val)
      const digest = digestBytes(dump)
      const cls = (o.val._class_name as string | undefined) ?? null
      body +=
        JSON.stringify({
          project_id: PROJECT,
          object_id: o.object_id,
          kind: 'object',
          base_object_class: cls,
          leaf_object_class: cls,
          refs: [],
          val_dump: dump,
          digest,
        }) + '\n'
      return digest
    })
    await this.s.insert({ table: 'object_versions', values: Buffer.from(body), format: 'JSONEachRow' })
    return digests
  }

  page(table: string, offset: number, limit: number): PageRow[] {
    return this.rows(NATURAL, { p: PROJECT, d: table, off: offset, lim: limit }).map(toPageRow)
  }

  sortedPage(table: string, limit: number): PageRow[] {
    return this.rows(SORTED, { p: PROJECT, d: table, lim: limit }).map(toPageRow)
  }

  /** Weave's objs_query: the metadata query, then the values of the versions it returned. */
  latestObjects(limit: number): PeerObject[] {
    const meta = this.rows(
      `${objectsMetadata('is_latest = 1 AND base_object_class IN {classes:Array(String)}')} ORDER BY object_id ASC LIMIT {lim:Int64}`,
      {
        p: PROJECT,
        classes: ['Prompt'],
        lim: limit,
      },
    )
    return this.withVals(meta)
  }

  private withVals(meta: unknown[][]): PeerObject[] {
    if (!meta.length) return []
    const vals = this.rows(OBJ_VALS, { p: PROJECT, ids: meta.map((m) => m[0]), digests: meta.map((m) => m[1]) })
    const byKey = new Map(vals.map((v) => [`${v[0]}:${v[1]}`, v[2] as string]))
    return meta.map((m) => ({
      object_id: m[0] as string,
      digest: m[1] as string,
      version_index: Number(m[2]),
      is_latest: Number(m[3]),
      base_object_class: m[4] as string | null,
      val: JSON.parse(byKey.get(`${m[0]}:${m[1]}`)!),
    }))
  }

  /** Weave's refs_read_batch: per ref, an obj_read by digest, then the path; an `id` edge reads the row by digest. */
  readRefs(refs: string[]): unknown[] {
    return refs.map((ref) => {
      const [, objPart, ...extra] = ref.slice(`weave:///${PROJECT}/`.length).split('/')
      const [name, version] = objPart!.split(':') as [string, string]
      const meta = this.rows(`${objectsMetadata('digest = {v:String}', ' AND object_id = {o:String}')}`, {
        p: PROJECT,
        o: name,
        v: version,
      })
      let val: unknown = this.withVals(meta)[0]?.val ?? null
      for (let i = 0; i + 1 < extra.length; i += 2) {
        const [edge, arg] = [extra[i], decodeURIComponent(extra[i + 1]!)]
        if (edge === 'attr' || edge === 'key') val = (val as Record<string, unknown>)[arg]
        else if (edge === 'id') {
          const [row] = this.rows('SELECT digest, val_dump FROM table_rows WHERE project_id = {p:String} AND digest = {r:String} LIMIT 1', {
            p: PROJECT,
            r: arg,
          })
          val = row ? JSON.parse(row[1] as string) : null
        }
      }
      return val
    })
  }

  /**
   * Waits (at most `timeoutMs`) until ClickHouse has no merge running, and says how long that took: its merges after
   * an ingest run on background threads, and the reads timed after it would otherwise share the two cores with them.
   */
  async settleMerges(timeoutMs: number): Promise<{ waited_ms: number; merges_left: number }> {
    const t0 = performance.now()
    for (;;) {
      const left = Number(this.rows('SELECT count() FROM system.merges', {})[0]?.[0] ?? 0)
      const waited = performance.now() - t0
      if (left === 0 || waited > timeoutMs) return { waited_ms: Math.round(waited), merges_left: left }
      await new Promise((r) => setTimeout(r, 500))
    }
  }

  cleanup(): void {
    this.s.cleanup?.()
  }
}

const toPageRow = (r: unknown[]): PageRow => ({ digest: r[0] as string, val: JSON.parse(r[1] as string), original_index: Number(r[2]) })
