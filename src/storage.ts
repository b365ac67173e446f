import fs from 'node:fs/promises'
import path from 'node:path'
import type { Config } from './core/config.js'
import { DomainError } from './core/errors.js'
import { ROOT_DIR } from './core/version.js'
import type { StorageInfo } from './schemas/meta.js'
import type { IngestPool } from './calls/ingest/pool.js'
import { ClickHouseCallBackend } from './clickhouse/backend.js'
import { chdbResolvable } from './clickhouse/chdb-executor.js'
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
  const layout = { database: s.clickhouseDatabase, cluster: s.clickhouseCluster }
  if (s.kind === 'chdb') {
    const resolveFrom = chdbPlaces()
    if (!chdbResolvable(resolveFrom))
      throw new Error('--storage chdb needs the optional chdb package: npm install chdb (or npm --prefix bench/peer-deps install)')
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
 * A stand-in for a store a route family is built with but will never call: its handlers are
 * replaced by 501s (notServed). Touching it at all is a wiring mistake, so it throws.
 */
function never<T>(what: string): T {
  return new Proxy({} as object, {
    get: () => {
      throw new Error(`${what} is not available on this storage backend`)
    },
  }) as T
}

/** Routes the backend does not serve yet, kept in the route list (and /openapi.json), each answering 501. */
function notServed(defs: RouteDef[], backend: string): RouteDef[] {
  return defs.map((d) => ({
    ...d,
    handler: () => {
      throw new DomainError(501, `${d.method} ${d.path} is not served on the ${backend} storage backend yet`)
    },
  }))
}

/**
 * The calls-side routes on ClickHouse, in the embedded server's order: the call routes on the
 * backend; statistics, usage, OTLP, objects, tables, files, feedback and refs (which the embedded
 * server keeps in DuckDB) answer 501 naming the backend rather than using DuckDB beside ClickHouse.
 */
export function clickHouseRoutes(backend: ClickHouseCallBackend, ingest: IngestPool, config: Config): RouteDef[] {
  const name = backend.name
  const calls = callRoutes({ store: backend, backend: name, pool: ingest, maxQueryRows: config.maxQueryRows })
  const store = never<never>('the embedded store')
  const rest = [
    ...statsRoutes(store, store, store),
    ...otelRoutes(store, ingest, config.maxBodyBytes),
    ...objectRoutes(store),
    ...fileRoutes(store, config.maxFileBytes),
    ...tableRoutes(store),
    ...v2ObjectRoutes({ objects: store, tables: store }),
    ...v2RunRoutes({ calls: store, objects: store, feedback: store }),
    ...feedbackRoutes(store),
    ...refRoutes(store),
  ]
  return [...calls, ...notServed(rest, name)]
}
