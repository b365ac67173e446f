import fs from 'node:fs/promises'
import path from 'node:path'
import type { Logger } from 'pino'
import { SERVER_FILE, type Config } from './core/config.js'
import { progress } from './core/progress.js'
import { Catalog } from './catalog/db.js'
import { KeyStore, saveFirstAdminKey } from './catalog/keys.js'
import { App } from './http/app.js'
import { canonicalIp } from './http/client-ip.js'
import { serveUws, type Listening } from './http/uws.js'
import { loadGeoIndex, type GeoIndex } from './geo/index.js'
import { metaRoutes } from './api/meta.js'
import { adminRoutes } from './api/admin.js'
import { geolocateRoutes } from './api/geolocate.js'
import { specRoutes } from './api/pending.js'
import { callRoutes } from './api/calls.js'
import { otelRoutes } from './api/otel.js'
import { objectRoutes } from './api/objects.js'
import { v2ObjectRoutes } from './api/v2/objects.js'
import { v2RunRoutes } from './api/v2/runs.js'
import { ObjectStore } from './catalog/objects.js'
import { fileRoutes } from './api/files.js'
import { FileStore } from './catalog/files.js'
import { tableRoutes } from './api/tables.js'
import { TableStore } from './catalog/tables.js'
import { TablePool } from './catalog/table-pool.js'
import { feedbackRoutes } from './api/feedback.js'
import { FeedbackStore } from './catalog/feedback.js'
import { refRoutes } from './api/refs.js'
import { RefResolver } from './catalog/refs.js'
import { CallStore } from './calls/store.js'
import { IngestPool } from './calls/ingest/pool.js'
import { attachAnalytics, type Analytics } from './stats/analytics.js'
import { statsRoutes } from './api/stats.js'
import { chatRoutes } from './api/chat/routes.js'
import type { CompletionRecorder } from './api/chat/record.js'
import type { ModelPool } from './inference/client.js'
import { closeModels, startModels } from './models.js'
import type { ClickHouseCallBackend } from './clickhouse/backend.js'
import type { StorageInfo } from './schemas/meta.js'

export { TINY_MODEL } from './models.js'

export interface RunningServer {
  url: string
  port: number
  app: App
  keys: KeyStore
  catalog: Catalog
  /** The embedded calls store; absent with `--storage clickhouse|chdb`. */
  calls?: CallStore
  /** Set when this start created the first admin key: the only time the key is ever shown. */
  createdAdminKey?: string
  /** Where this start kept the key it created (`<data dir>/admin-key`, mode 0600); unset when it created none. */
  adminKeyFile?: string
  /** Stops accepting, lets in-flight requests finish (up to the grace period), closes the catalog. */
  close(): Promise<void>
}

export interface StartOptions {
  /** The HTTP transport; uWebSockets.js unless told otherwise (the bench's node:http peer swaps it). */
  serve?: (app: App, host: string, port: number) => Promise<Listening>
  /**
   * The models, already starting (models.ts: `weft serve` starts them before it loads this file); without it,
   * they start once the catalog is open. Closed here if the start fails.
   */
  models?: Promise<ModelPool[]>
}

/** What a start has opened so far: closed again if a later step fails, and by close(). */
interface Parts {
  catalog: Catalog
  keys?: KeyStore
  /** Calls in the embedded store (`--storage embedded`)… */
  calls?: CallStore
  /** …or in ClickHouse (`--storage clickhouse|chdb`): exactly one is set. */
  clickhouse?: ClickHouseCallBackend
  ingest?: IngestPool
  /** Parses and digests table writes for the catalog's tables (embedded storage); its threads start at the first. */
  tablePool?: TablePool
  /** The models once started (filled in before the server listens)… */
  models: ModelPool[]
  /** …and their start, which runs beside the other steps (a failed one is closed from here). */
  modelsStarting: Promise<ModelPool[]>
}
type Opened = Required<Pick<Parts, 'catalog' | 'keys' | 'ingest' | 'models' | 'modelsStarting'>> &
  Pick<Parts, 'calls' | 'clickhouse' | 'tablePool'>

async function openStores(config: Config, log: Logger, parts: Parts): Promise<Opened> {
  const keys = (parts.keys = await KeyStore.load(parts.catalog))
  if (config.storage.kind === 'embedded') {
    const calls = (parts.calls = await CallStore.open(config.dataDir, {
      flushRows: config.callsFlushRows,
      flushIntervalMs: config.callsFlushIntervalMs,
      queryTimeoutMs: config.queryTimeoutMs,
      memoryLimit: config.memoryLimit,
    }))
    log.info(calls.recovered, 'calls write-ahead log replayed')
    parts.tablePool = new TablePool()
  } else {
    // The ClickHouse side (its client, backend and routes: ~0.3 s of imports) loads only when it is the storage.
    const { openClickHouse } = await import('./storage.js')
    parts.clickhouse = await openClickHouse(config)
    log.info({ storage: config.storage.kind, database: config.storage.clickhouseDatabase }, 'calls in ClickHouse')
  }
  const ingest = (parts.ingest = new IngestPool({
    threads: config.ingestWorkers || undefined,
    maxQueue: config.ingestQueue,
    arrowRecords: !parts.clickhouse,
  }))
  return { ...parts, keys, ingest }
}

/** WEFT_API_KEY as an admin key; without it, a first admin key when none exists, kept in `<data dir>/admin-key`. */
async function ensureAdminKey(
  config: Config,
  log: Logger,
  keys: KeyStore,
): Promise<Pick<RunningServer, 'createdAdminKey' | 'adminKeyFile'>> {
  if (config.apiKey) {
    await keys.ensureAdmin(config.apiKey)
    return {}
  }
  if (keys.activeCount > 0) return {}
  const createdAdminKey = (await keys.create({ name: 'first admin key', userId: 'admin', isAdmin: true })).key
  // The key is printed all the same: failing to keep it must not fail the start that made it.
  let adminKeyFile: string | undefined
  try {
    adminKeyFile = await saveFirstAdminKey(config.dataDir, createdAdminKey)
    if (!adminKeyFile) log.warn({ data_dir: config.dataDir }, 'an admin-key file is in the data dir already; left as it is')
  } catch (err) {
    log.error({ err }, 'could not keep the first admin key in the data dir')
  }
  return { createdAdminKey, adminKeyFile }
}

/**
 * The range tables take a moment to parse: at start (the server listens meanwhile and /geolocate waits), or with
 * --geo-preload false at the first /geolocate.
 */
function loadGeo(log: Logger, preload: boolean): () => Promise<GeoIndex> {
  let geo: Promise<GeoIndex> | null = null
  const load = () => {
    if (geo) return geo
    const started = performance.now()
    geo = loadGeoIndex()
    geo.then(
      (g) => log.info({ ms: Math.round(performance.now() - started), ...g.stats }, 'geo index loaded'),
      (err) => log.error({ err }, 'geo index failed to load'),
    )
    return geo
  }
  if (preload) void load()
  return load
}

/** Completions are recorded as calls in the calls store, through the sink the chat routes take. */
const callsRecorder = (calls: Pick<CallStore, 'ingest'>): CompletionRecorder => ({ record: (parts) => calls.ingest(parts) })

/** Every route, in the order the OpenAPI document lists them; the analytics when calls are embedded. */
async function addRoutes(app: App, config: Config, log: Logger, p: Opened): Promise<Analytics | null> {
  const { keys, calls, clickhouse, ingest, models } = p
  const onClickHouse = clickhouse ? await import('./storage.js') : null
  const storage: StorageInfo = onClickHouse ? await onClickHouse.storageInfo(clickhouse!) : { backend: 'embedded' }
  app.add(
    metaRoutes(
      () => app.routes,
      () => models.map((m) => m.info),
      storage,
    ),
  )
  app.add(geolocateRoutes(loadGeo(log, config.geoPreload), config.geoDenyList))
  const analytics = calls ? await attachAnalytics(calls, p.catalog, config.prices) : null
  const inference = async () =>
    Object.fromEntries(await Promise.all(models.map(async (m) => [m.info.name, { backend: m.info.backend, ...(await m.stats()) }])))
  app.add(adminRoutes({ keys, calls, storage, ingest, inFlight: () => app.pending, rollups: analytics?.rollups, inference }))
  if (calls && analytics) await addEmbeddedRoutes(app, config, p, calls, analytics)
  else app.add(onClickHouse!.clickHouseRoutes(clickhouse!, ingest, config, p.catalog))
  models.push(...(await p.modelsStarting))
  if (models.length)
    app.add(
      chatRoutes({
        models,
        priorityScheduling: config.schedulingPolicy === 'priority',
        recorder: callsRecorder((calls ?? clickhouse)!),
        toolCallParser: config.toolCallParser,
        reasoningParser: config.reasoningParser,
      }),
    )
  app.add(specRoutes({ chat: models.length > 0 }))
  return analytics
}

/** The calls-side routes on the embedded store and the DuckDB catalog. */
async function addEmbeddedRoutes(app: App, config: Config, p: Opened, calls: CallStore, analytics: Analytics): Promise<void> {
  const { catalog, ingest } = p
  // One store of each kind: each TableStore keeps its own sort-order and table-hash caches, whose bounds would
  // multiply with every copy.
  const objects = new ObjectStore(catalog)
  const tables = new TableStore(catalog)
  const refs = new RefResolver(objects, tables)
  const feedback = new FeedbackStore(catalog, refs)
  app.add(
    callRoutes({
      store: calls,
      pool: ingest,
      maxQueryRows: config.maxQueryRows,
      prices: analytics.prices,
      stats: analytics.stats,
      feedback,
      refs,
    }),
  )
  app.add(statsRoutes(analytics.stats, analytics.usage, analytics.prices))
  app.add(otelRoutes(calls, ingest, config.maxBodyBytes))
  app.add(objectRoutes(objects))
  app.add(fileRoutes(await FileStore.open(catalog), config.maxFileBytes))
  app.add(tableRoutes(tables, { pool: p.tablePool, maxBodyBytes: config.maxBodyBytes }))
  app.add(v2ObjectRoutes({ objects, tables }))
  app.add(v2RunRoutes({ calls, objects, feedback }))
  app.add(feedbackRoutes(feedback))
  app.add(refRoutes(refs))
}

/** Listens, and says where in `<data dir>/server.json` (read by `weft keys` to find a running server). */
async function listen(app: App, config: Config, opts: StartOptions): Promise<{ listening: Listening; url: string; serverFile: string }> {
  const listening = await (opts.serve ?? serveUws)(app, config.host, config.port)
  const host = config.host.includes(':') ? `[${config.host}]` : config.host
  const url = `http://${host}:${listening.port}`
  const serverFile = path.join(config.dataDir, SERVER_FILE)
  await fs.writeFile(serverFile, JSON.stringify({ pid: process.pid, url, started_at: new Date().toISOString() }) + '\n')
  return { listening, url, serverFile }
}

/** Stops accepting, waits for in-flight requests up to the grace period, then closes every part in order. */
async function shutdown(
  config: Config,
  log: Logger,
  app: App,
  p: Opened,
  analytics: Analytics | null,
  net: { listening: Listening; serverFile: string },
): Promise<void> {
  app.draining = true
  net.listening.stopListening()
  const deadline = new Promise<'timeout'>((r) => setTimeout(() => r('timeout'), config.shutdownGraceMs).unref())
  const outcome = await Promise.race([app.idle().then(() => 'idle' as const), deadline])
  if (outcome === 'timeout') log.warn({ pending: app.pending }, 'shutdown grace period over; closing with requests in flight')
  await p.ingest.close()
  await p.tablePool?.close()
  await Promise.all(p.models.map((m) => m.close()))
  if (p.calls && analytics) {
    analytics.rollups.interrupt()
    await p.calls.exclusive(async () => analytics.rollups.close())
    await p.calls.close()
  }
  await p.clickhouse?.close()
  await p.catalog.close()
  await fs.rm(net.serverFile, { force: true })
  log.info('weft stopped')
}

/** A failed start closes what it had opened, newest first. */
async function abandon(p: Parts): Promise<void> {
  await closeModels(p.modelsStarting)
  await p.ingest?.close().catch(() => {})
  await p.tablePool?.close().catch(() => {})
  await p.calls?.close().catch(() => {})
  await p.clickhouse?.close().catch(() => {})
  await p.catalog.close().catch(() => {})
}

/** Everything `weft serve` runs, in-process: embedders and tests call this directly. */
export async function startServer(config: Config, log: Logger, opts: StartOptions = {}): Promise<RunningServer> {
  // Long work (log replay, rollup builds, compactions, model loads) reports its progress in the server's log.
  progress.useLogger(log)
  let catalog: Catalog
  try {
    catalog = await Catalog.open(config.dataDir, { memoryLimit: config.memoryLimit })
  } catch (e) {
    if (opts.models) await closeModels(opts.models)
    throw e
  }
  const modelsStarting = opts.models ?? startModels(config, log)
  // Awaited once the routes are added; a failure before then must not count as unhandled meanwhile.
  modelsStarting.catch(() => {})
  const parts: Parts = { catalog, models: [], modelsStarting }
  try {
    const p = await openStores(config, log, parts)
    const firstKey = await ensureAdminKey(config, log, p.keys)
    const app = new App({
      log,
      keys: p.keys,
      maxBodyBytes: config.maxBodyBytes,
      corsOrigins: config.corsOrigins,
      trustedProxies: config.trustedProxies.map(canonicalIp),
      accessLog: config.accessLog,
    })
    const analytics = await addRoutes(app, config, log, p)
    const net = await listen(app, config, opts)
    log.info({ url: net.url, data_dir: config.dataDir, routes: app.routes.length, keys: p.keys.activeCount }, 'weft listening')
    let closed = false
    return {
      url: net.url,
      port: net.listening.port,
      app,
      keys: p.keys,
      catalog: p.catalog,
      calls: p.calls,
      ...firstKey,
      async close() {
        if (closed) return
        closed = true
        await shutdown(config, log, app, p, analytics, net)
      },
    }
  } catch (e) {
    await abandon(parts)
    throw e
  }
}
