import fs from 'node:fs/promises'
import path from 'node:path'
import type { Config } from './core/config.js'
import { ROOT_DIR } from './core/version.js'
import type { StorageInfo } from './schemas/meta.js'
import type { IngestPool } from './calls/ingest/pool.js'
import { ClickHouseCallBackend } from './clickhouse/backend.js'
import { chdbResolvable } from './clickhouse/chdb-executor.js'
import { clickHouseAnalytics } from './clickhouse/stats-engines.js'
import { chStore } from './clickhouse/objects-store.js'
import { ClickHouseObjects } from './clickhouse/objects.js'
import { ClickHouseTables } from './clickhouse/tables.js'
import { ClickHouseFiles } from './clickhouse/files.js'
import { ClickHouseFeedback } from './clickhouse/feedback.js'
import { RefResolver } from './catalog/refs.js'
import { FileStore } from './catalog/files.js'
import type { Catalog } from './catalog/db.js'
import type { RouteDef } from './api/route.js'
import { callRoutes } from './api/calls.js'
import { statsRoutes } from './api/stats.js'
import { otelRoutes } from './api/otel.js'
import { objectRoutes } from './api/objects.js'
import { fileRoutes } from './api/files.js'
import { tableRoutes } from './api/tables.js'
import { v2ObjectRoutes } from './api/v2/objects.js'
import { v2RunRoutes } from './api/v2/runs.js'
import { feedbackRoutes } from './api/feedback.js'
import { refRoutes } from './api/refs.js'

/**
 * Where chdb (~550 MB, optional) is looked for: the working directory's install, weft's own, and the
 * bench peers' (`npm --prefix bench/peer-deps install`).
 */
function chdbPlaces(): string[] {
  return [process.cwd(), ROOT_DIR, path.join(ROOT_DIR, 'bench', 'peer-deps')].map((d) => path.join(d, 'package.json'))
}

/** The ClickHouse backend `--storage clickhouse|chdb` names, connected and migrated. */
export async function openClickHouse(config: Config): Promise<ClickHouseCallBackend> {
  const s = config.storage
  const layout = {
    database: s.clickhouseDatabase,
    cluster: s.clickhouseCluster,
    queryTimeoutMs: config.queryTimeoutMs,
    insertSettings: s.clickhouseInsertSettings,
  }
  if (s.kind === 'chdb') {
    const resolveFrom = chdbPlaces()
    if (!chdbResolvable(resolveFrom)) throw new Error('--storage chdb needs the optional chdb package (npm install chdb)')
    await fs.mkdir(s.chdbPath, { recursive: true })
    return ClickHouseCallBackend.open({ kind: 'chdb', chdb: { path: s.chdbPath, resolveFrom }, ...layout })
  }
  return ClickHouseCallBackend.open({
    kind: 'clickhouse',
    http: {
      url: s.clickhouseUrl,
      username: process.env.WEFT_CLICKHOUSE_USER || undefined,
      password: process.env.WEFT_CLICKHOUSE_PASSWORD || undefined,
    },
    ...layout,
  })
}

export async function storageInfo(backend: ClickHouseCallBackend): Promise<StorageInfo> {
  return { backend: backend.name, clickhouse_version: await backend.version() }
}

/**
 * Objects, tables and feedback in ClickHouse's own tables (clickhouse/objects.ts, tables.ts, feedback.ts).
 * File bytes: with chdb (one machine) on local disk as the embedded server keeps them (catalog/files.ts:
 * streamed with backpressure, fsynced, content-addressed); a ClickHouse server may serve several weft
 * servers with no disk in common, so there they go into its `files` table (clickhouse/files.ts).
 */
function objectSide(backend: ClickHouseCallBackend, config: Config, catalog: Catalog) {
  const s = config.storage
  const st = chStore(backend.calls.exec, { database: s.clickhouseDatabase, cluster: s.clickhouseCluster })
  const files = s.kind === 'chdb' ? FileStore.of(catalog) : new ClickHouseFiles(st, path.join(config.dataDir, 'files', 'tmp'))
  const objects = new ClickHouseObjects(st, files)
  const tables = new ClickHouseTables(st)
  const refs = new RefResolver(objects, tables)
  return { files, objects, tables, refs, feedback: new ClickHouseFeedback(st, refs) }
}

/**
 * The routes on ClickHouse, in the embedded server's order: the call routes, statistics, usage, costs and
 * OTLP on the backend; objects, tables, files, refs, feedback and the /v2 object kinds on objectSide's stores.
 * The /v2 evaluation runs, predictions and scores are calls on the backend plus ops and feedback on objectSide's stores.
 */
export function clickHouseRoutes(backend: ClickHouseCallBackend, ingest: IngestPool, config: Config, catalog: Catalog): RouteDef[] {
  const name = backend.name
  const s = config.storage
  const analytics = clickHouseAnalytics(
    backend.calls.exec,
    { database: s.clickhouseDatabase, cluster: s.clickhouseCluster, queryTimeoutMs: config.queryTimeoutMs },
    config.prices,
  )
  backend.traceStorageBytes = analytics.traceStorageBytes
  const o = objectSide(backend, config, catalog)
  const { maxQueryRows } = config
  const calls = callRoutes({
    store: backend,
    backend: name,
    pool: ingest,
    maxQueryRows,
    prices: analytics.prices,
    feedback: o.feedback,
    refs: o.refs,
    stats: analytics.stats,
  })
  const served = [...statsRoutes(analytics.stats, analytics.usage, analytics.prices), ...otelRoutes(backend, ingest, config.maxBodyBytes)]
  const rest = [
    ...objectRoutes(o.objects),
    ...fileRoutes(o.files, config.maxFileBytes),
    ...tableRoutes(o.tables, { maxBodyBytes: config.maxBodyBytes }),
    ...v2ObjectRoutes({ objects: o.objects, tables: o.tables }),
    ...v2RunRoutes({ calls: backend, objects: o.objects, feedback: o.feedback }),
    ...feedbackRoutes(o.feedback),
    ...refRoutes(o.refs),
  ]
  return [...calls, ...served, ...rest]
}
