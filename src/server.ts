import fs from 'node:fs/promises'
import path from 'node:path'
import type { Logger } from 'pino'
import type { Config } from './core/config.js'
import { Catalog } from './catalog/db.js'
import { KeyStore } from './catalog/keys.js'
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
import { ObjectStore } from './catalog/objects.js'
import { CallStore } from './calls/store.js'
import { IngestPool } from './calls/ingest-pool.js'
import { attachAnalytics } from './stats/analytics.js'
import { statsRoutes } from './api/stats.js'
import { chatRoutes } from './api/chat.js'
import { ModelPool } from './inference/client.js'
import { makeTinyModel } from './inference/tiny-model.js'

export const SERVER_FILE = 'server.json'

export interface RunningServer {
  url: string
  port: number
  app: App
  keys: KeyStore
  catalog: Catalog
  calls: CallStore
  /** Set when this start created the first admin key: the only time the key is ever shown. */
  createdAdminKey?: string
  /** Stops accepting, lets in-flight requests finish (up to the grace period), closes the catalog. */
  close(): Promise<void>
}

export interface StartOptions {
  /** The HTTP transport; uWebSockets.js unless told otherwise (the bench's node:http peer swaps it). */
  serve?: (app: App, host: string, port: number) => Promise<Listening>
}

/** Everything `weft serve` runs, in-process: embedders and tests call this directly. */
export async function startServer(config: Config, log: Logger, opts: StartOptions = {}): Promise<RunningServer> {
  const catalog = await Catalog.open(config.dataDir)
  let closed = false
  let openedCalls: CallStore | undefined
  let ingest: IngestPool | undefined
  const models: ModelPool[] = []
  try {
    const keys = await KeyStore.load(catalog)
    const calls = await CallStore.open(config.dataDir, {
      flushRows: config.callsFlushRows,
      flushIntervalMs: config.callsFlushIntervalMs,
      queryTimeoutMs: config.queryTimeoutMs,
    })
    openedCalls = calls
    log.info(calls.recovered, 'calls write-ahead log replayed')
    ingest = new IngestPool({ threads: config.ingestWorkers || undefined, maxQueue: config.ingestQueue })
    const pool = ingest
    let createdAdminKey: string | undefined
    if (config.apiKey) await keys.ensureAdmin(config.apiKey)
    else if (keys.activeCount === 0) createdAdminKey = (await keys.create({ name: 'first admin key', userId: 'admin', isAdmin: true })).key

    // The range tables take a moment to parse; the server listens meanwhile and /geolocate waits.
    const started = performance.now()
    const geoPromise: Promise<GeoIndex> = loadGeoIndex()
    geoPromise.then(
      (g) => log.info({ ms: Math.round(performance.now() - started), ...g.stats }, 'geo index loaded'),
      (err) => log.error({ err }, 'geo index failed to load'),
    )

    const app = new App({
      log,
      keys,
      maxBodyBytes: config.maxBodyBytes,
      corsOrigins: config.corsOrigins,
      trustedProxies: config.trustedProxies.map(canonicalIp),
      accessLog: config.accessLog,
    })
    app.add(
      metaRoutes(
        () => app.routes,
        () => models.map((m) => m.info),
      ),
    )
    app.add(geolocateRoutes(() => geoPromise, config.geoDenyList))
    const analytics = await attachAnalytics(calls, catalog, config.prices)
    app.add(
      adminRoutes(
        keys,
        calls,
        pool,
        () => app.pending,
        analytics.rollups,
        async () =>
          Object.fromEntries(await Promise.all(models.map(async (m) => [m.info.name, { backend: m.info.backend, ...(await m.stats()) }]))),
      ),
    )
    app.add(callRoutes(calls, pool, config.maxQueryRows, analytics.prices, analytics.stats))
    app.add(statsRoutes(analytics.stats, analytics.usage, analytics.prices))
    app.add(otelRoutes(calls, pool, config.maxBodyBytes))
    app.add(objectRoutes(new ObjectStore(catalog), config.maxBodyBytes))
    models.push(...(await startModels(config, log)))
    if (models.length) app.add(chatRoutes({ models, priorityScheduling: config.schedulingPolicy === 'priority', calls }))
    app.add(specRoutes({ chat: models.length > 0 }))

    const listening = await (opts.serve ?? serveUws)(app, config.host, config.port)
    const host = config.host.includes(':') ? `[${config.host}]` : config.host
    const url = `http://${host}:${listening.port}`
    const serverFile = path.join(config.dataDir, SERVER_FILE)
    await fs.writeFile(serverFile, JSON.stringify({ pid: process.pid, url, started_at: new Date().toISOString() }) + '\n')
    log.info({ url, data_dir: config.dataDir, routes: app.routes.length, keys: keys.activeCount }, 'weft listening')

    return {
      url,
      port: listening.port,
      app,
      keys,
      catalog,
      calls,
      createdAdminKey,
      async close() {
        if (closed) return
        closed = true
        app.draining = true
        listening.stopListening()
        const deadline = new Promise<'timeout'>((r) => setTimeout(() => r('timeout'), config.shutdownGraceMs).unref())
        const outcome = await Promise.race([app.idle().then(() => 'idle' as const), deadline])
        if (outcome === 'timeout') log.warn({ pending: app.pending }, 'shutdown grace period over; closing with requests in flight')
        await pool.close()
        await Promise.all(models.map((m) => m.close()))
        analytics.rollups.interrupt()
        await calls.exclusive(async () => analytics.rollups.close())
        await calls.close()
        await catalog.close()
        await fs.rm(serverFile, { force: true })
        log.info('weft stopped')
      },
    }
  } catch (e) {
    await Promise.all(models.map((m) => m.close().catch(() => {})))
    await ingest?.close().catch(() => {})
    await openedCalls?.close().catch(() => {})
    if (!closed) await catalog.close().catch(() => {})
    throw e
  }
}

/** The built-in model's name and where it is made on first start. */
export const TINY_MODEL = 'weft-tiny'

/**
 * One inference worker per model directory. With none configured, the built-in tiny model (made in
 * DATA_DIR/models on first start, deterministically: nothing is downloaded); `none` serves no model.
 */
async function startModels(config: Config, log: Logger): Promise<ModelPool[]> {
  if (config.models.includes('none')) return []
  let dirs = config.models
  let names = config.servedModelNames
  if (!dirs.length) {
    const dir = path.join(config.dataDir, 'models', TINY_MODEL)
    const made = await fs.stat(path.join(dir, 'config.json')).then(
      () => true,
      () => false,
    )
    if (!made) {
      await makeTinyModel(dir + '.tmp')
      await fs.rm(dir, { recursive: true, force: true })
      await fs.rename(dir + '.tmp', dir)
      log.info({ dir }, 'made the built-in tiny model')
    }
    dirs = [dir]
    names = names.length ? names : [TINY_MODEL]
  }
  if (names.length && names.length !== dirs.length)
    throw new Error(`--served-model-name names ${names.length} models, --model gives ${dirs.length}`)
  const engine = {
    maxNumSeqs: config.maxNumSeqs,
    maxWaiting: config.maxWaitingRequests,
    kvTokens: config.kvCacheTokens,
    prefillChunk: config.prefillChunk,
    priority: config.schedulingPolicy === 'priority',
    maxLogprobs: 20,
  }
  const started: ModelPool[] = []
  try {
    for (const [i, dir] of dirs.entries()) {
      started.push(
        await ModelPool.start(
          { modelDir: dir, servedName: names[i] ?? path.basename(dir), engine, backend: config.inferenceBackend },
          log,
          config.modelReplicas,
        ),
      )
    }
  } catch (e) {
    await Promise.all(started.map((m) => m.close().catch(() => {})))
    throw e
  }
  return started
}
