import { bodyProject, route, type Ctx, type Reply, type RouteDef } from './route.js'
import type { TablesBackend } from '../catalog/backends.js'
import type { TablePool } from '../catalog/table-pool.js'
import type { TableStore } from '../catalog/tables.js'
import {
  TableCreateFromDigestsReqSchema,
  TableCreateFromDigestsResSchema,
  TableCreateReqSchema,
  TableCreateResSchema,
  TableQueryReqSchema,
  TableQueryResSchema,
  TableQueryStatsBatchReqSchema,
  TableQueryStatsBatchResSchema,
  TableQueryStatsReqSchema,
  TableQueryStatsResSchema,
  TableUpdateReqSchema,
  TableUpdateResSchema,
  type TableCreateFromDigestsReq,
  type TableCreateReq,
  type TableQueryReq,
  type TableQueryStatsBatchReq,
  type TableQueryStatsReq,
  type TableUpdateReq,
} from '../schemas/tables.js'

/** A store that takes rows parsed and digested in a worker (the catalog's TableStore). */
type PreparedBackend = TablesBackend & Pick<TableStore, 'createStored' | 'updateStored' | 'createFromStoredDigests'>
const takesPrepared = (t: TablesBackend): t is PreparedBackend =>
  'createStored' in t && 'updateStored' in t && 'createFromStoredDigests' in t

/**
 * The body bound of `/table/create_from_digests`, above the server's: it lists a whole table's row digests (~46
 * bytes each as JSON), and the Python SDK sends one for every dataset it uploads in chunks, so a 1M-row dataset's
 * is ~46 MB. 128 MiB is ~2.9M rows; past it, 413 (a bigger table grows by `/table/update` appends).
 */
export const DIGEST_LIST_BODY_BYTES = 128 * 1024 * 1024

/**
 * The body goes to a worker as bytes (catalog/table-prepare.ts: parse, check, digest every row); the request
 * thread only writes the catalog. The worker checks the key's entity, as the route's `project` would.
 */
function prepared(tables: PreparedBackend, pool: TablePool, route: 'create' | 'update' | 'digests') {
  return async (ctx: Ctx): Promise<Reply> => {
    const r = await pool.prepare({ route, body: ctx.rawBody ?? Buffer.alloc(0), entities: ctx.principal!.entities })
    if (r.route === 'digests') return { body: await tables.createFromStoredDigests(r.project, r.digest, r.rowDigests) }
    const body =
      r.route === 'create' ? await tables.createStored(r.project, r.digest, r) : await tables.updateStored(r.project, r.base, r.updates, r)
    return { body }
  }
}

function createTable(tables: TablesBackend) {
  return async (ctx: Ctx<TableCreateReq>): Promise<Reply> => {
    const t = ctx.body.table
    return { body: await tables.create(t.project_id, t.rows, t.expected_digest) }
  }
}

function updateTable(tables: TablesBackend) {
  return async (ctx: Ctx<TableUpdateReq>): Promise<Reply> => ({
    body: await tables.update(ctx.body.project_id, ctx.body.base_digest, ctx.body.updates),
  })
}

function createFromDigests(tables: TablesBackend) {
  return async (ctx: Ctx<TableCreateFromDigestsReq>): Promise<Reply> => ({
    body: await tables.createFromDigests(ctx.body.project_id, ctx.body.row_digests, ctx.body.expected_digest),
  })
}

function queryTable(tables: TablesBackend) {
  return async (ctx: Ctx<TableQueryReq>): Promise<Reply> => ({ body: { rows: await tables.query(ctx.body.project_id, ctx.body) } })
}

/**
 * A streamed table is read in pages of about this many bytes of JSON lines, so a slow reader holds a page or
 * two, not the table; the first page is FIRST_PAGE rows, later ones sized from the rows seen so far.
 */
const STREAM_PAGE_BYTES = 1 << 20
const FIRST_PAGE = 256
const MAX_PAGE = 65_536

function streamTable(tables: TablesBackend) {
  return async (ctx: Ctx<TableQueryReq>): Promise<Reply> => {
    const q = ctx.body
    const end = q.limit === undefined || q.limit === null ? Infinity : (q.offset ?? 0) + q.limit
    // A table is immutable under its digest, so pages read one after another see one table. The writer asks for
    // the next page only when the client has taken the last one.
    async function* pages() {
      let size = FIRST_PAGE
      for (let from = q.offset ?? 0; from < end;) {
        const limit = Math.min(size, end - from)
        const rows = await tables.query(q.project_id, { ...q, offset: from, limit })
        if (rows.length === 0) return
        const text = rows.map((r) => JSON.stringify(r) + '\n').join('')
        yield text
        if (rows.length < limit) return
        from += rows.length
        size = Math.max(1, Math.min(MAX_PAGE, Math.floor(STREAM_PAGE_BYTES / (text.length / rows.length))))
      }
    }
    return { contentType: 'application/jsonl', stream: pages() }
  }
}

function tableStats(tables: TablesBackend) {
  return async (ctx: Ctx<TableQueryStatsReq>): Promise<Reply> => {
    const withSize = ctx.body.include_storage_size === true
    const [row] = await tables.stats(ctx.body.project_id, [ctx.body.digest], withSize)
    // An unknown table has no rows, as /table/query answers none.
    const { digest: _digest, ...stats } = row ?? { digest: '', count: 0, ...(withSize ? { storage_size_bytes: 0 } : {}) }
    return { body: stats }
  }
}

function tableStatsBatch(tables: TablesBackend) {
  return async (ctx: Ctx<TableQueryStatsBatchReq>): Promise<Reply> => ({
    body: { tables: await tables.stats(ctx.body.project_id, ctx.body.digests ?? [], ctx.body.include_storage_size === true) },
  })
}

const common = { family: 'trace' as const, auth: 'key' as const, tags: ['Tables'], method: 'POST' as const }
/** The project is the body's project_id (every route but /table/create). */
const projectInBody = { ...common, project: bodyProject }

/** With a pool and a store that takes worker-prepared rows, the bodies of create and update go to the pool as bytes. */
function rowRoutes(tables: TablesBackend, pool?: TablePool): RouteDef[] {
  const create = {
    ...common,
    path: '/table/create',
    summary: 'Create a table from rows (same rows in the same order, same digest)',
    body: TableCreateReqSchema,
    response: { description: 'The table digest and the row digests', schema: TableCreateResSchema },
  }
  const update = {
    ...common,
    path: '/table/update',
    summary: 'A new table from a stored one by append, pop and insert updates, in order',
    body: TableUpdateReqSchema,
    response: { description: 'The new table digest and the row each update touched', schema: TableUpdateResSchema },
  }
  if (pool && takesPrepared(tables))
    return [
      route({ ...create, rawBody: true, handler: prepared(tables, pool, 'create') }),
      route({ ...update, rawBody: true, handler: prepared(tables, pool, 'update') }),
    ]
  return [
    route({ ...create, project: (ctx) => ctx.body.table.project_id, handler: createTable(tables) }),
    route({ ...update, project: bodyProject, handler: updateTable(tables) }),
  ]
}

function writeRoutes(tables: TablesBackend, pool: TablePool | undefined, maxBodyBytes: number): RouteDef[] {
  const fromDigests = {
    ...common,
    path: '/table/create_from_digests',
    summary: 'Create a table from rows already stored, by digest',
    body: TableCreateFromDigestsReqSchema,
    response: { description: 'The table digest', schema: TableCreateFromDigestsResSchema },
    maxBodyBytes: Math.max(maxBodyBytes, DIGEST_LIST_BODY_BYTES),
  }
  return [
    ...rowRoutes(tables, pool),
    pool && takesPrepared(tables)
      ? route({ ...fromDigests, rawBody: true, handler: prepared(tables, pool, 'digests') })
      : route({ ...fromDigests, project: bodyProject, handler: createFromDigests(tables) }),
  ]
}

function readRoutes(tables: TablesBackend): RouteDef[] {
  return [
    route({
      ...projectInBody,
      path: '/table/query',
      summary: 'Read rows of a table: filtered by digest, sorted by dot paths, paged',
      body: TableQueryReqSchema,
      response: { description: 'Rows, each with its position in the table', schema: TableQueryResSchema },
      handler: queryTable(tables),
    }),
    route({
      ...projectInBody,
      path: '/table/query_stream',
      summary: 'As /table/query, one row per line',
      body: TableQueryReqSchema,
      response: { description: 'JSON lines of rows', contentType: 'application/jsonl' },
      handler: streamTable(tables),
    }),
    route({
      ...projectInBody,
      path: '/table/query_stats',
      summary: 'Row count of a table',
      body: TableQueryStatsReqSchema,
      response: { description: 'Row count', schema: TableQueryStatsResSchema },
      handler: tableStats(tables),
    }),
    route({
      ...projectInBody,
      path: '/table/query_stats_batch',
      summary: 'Row counts of several tables',
      body: TableQueryStatsBatchReqSchema,
      response: { description: 'One entry per stored table named', schema: TableQueryStatsBatchResSchema },
      handler: tableStatsBatch(tables),
    }),
  ]
}

/**
 * The table endpoints the Weave SDKs need to save and read datasets (docs/tables.md). `pool` (the server's, closed
 * at its shutdown) parses and digests create and update bodies, and parses row digest lists, off the event loop;
 * without one, or with a store that does its own digesting, they are parsed on the request thread. `maxBodyBytes`
 * is the server's body bound (a digest list may be larger).
 */
export function tableRoutes(tables: TablesBackend, opts: { pool?: TablePool; maxBodyBytes: number }): RouteDef[] {
  return [...writeRoutes(tables, opts.pool, opts.maxBodyBytes), ...readRoutes(tables)]
}
