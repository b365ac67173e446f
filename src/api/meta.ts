import { version as duckdbVersion } from '@duckdb/node-api'
import { route, type Ctx, type Reply, type RouteDef } from './route.js'
import { buildOpenApi } from './openapi.js'
import { MIN_WEAVE_PYTHON_VERSION, VERSION } from '../core/version.js'
import { progress } from '../core/progress.js'
import { HealthQuerySchema, ReadySchema, type HealthQuery } from '../schemas/progress.js'
import { HealthSchema, ServerInfoSchema, VersionSchema, type ServerInfo, type StorageInfo, type Version } from '../schemas/meta.js'

type ModelInfo = { name: string; backend: string; architecture: string }

// A constant body: this is the load balancer's hot path.
const LIVE: Reply = { raw: '{"status":"ok"}', contentType: 'application/json' }

/** Ready when no start-up work (log replay, first rollup build, model load) is still running: 503 with what is. */
function ready(): Reply {
  const warming = progress.warming()
  return { status: warming.length ? 503 : 200, body: { ready: warming.length === 0, warming } }
}

/** Liveness, unchanged; `?ready=1` asks for readiness instead (for balancers that probe one path). */
const health = (ctx: Ctx<unknown, HealthQuery>): Reply => (ctx.query?.ready === '1' || ctx.query?.ready === 'true' ? ready() : LIVE)

const EMBEDDED: StorageInfo = { backend: 'embedded' }

function versions(models: () => readonly ModelInfo[], storage: StorageInfo) {
  return (): Reply => {
    const body: Version = {
      version: VERSION,
      storage,
      node: process.version,
      duckdb: duckdbVersion(),
      inference: models().map((m) => ({ model: m.name, backend: m.backend, architecture: m.architecture })),
    }
    return { body }
  }
}

function serverInfo(): Reply {
  const body: ServerInfo = { min_required_weave_python_version: MIN_WEAVE_PYTHON_VERSION, trace_server_version: VERSION }
  return { body }
}

/** The document is built once, on first request: by then every route is registered. */
function openApiDocument(routes: () => readonly RouteDef[]) {
  let openapi: string | undefined
  return (): Reply => ({ raw: (openapi ??= JSON.stringify(buildOpenApi(routes()))), contentType: 'application/json' })
}

/** Service endpoints that need no credentials. `routes` is read per request so the document lists every route. */
export function metaRoutes(
  routes: () => readonly RouteDef[],
  models: () => readonly ModelInfo[] = () => [],
  storage: StorageInfo = EMBEDDED,
): RouteDef[] {
  const service = { family: 'trace' as const, auth: 'none' as const, tags: ['Service'] }
  return [
    route({
      ...service,
      method: 'GET',
      path: '/health',
      summary: 'Liveness (`?ready=1`: readiness, as /ready)',
      query: HealthQuerySchema,
      response: { description: 'The server is up', schema: HealthSchema },
      handler: health,
    }),
    route({
      ...service,
      method: 'GET',
      path: '/ready',
      summary: 'Readiness: 200 when nothing is warming up, else 503 with what is (log replay, rollups, model loads) and its progress',
      response: { description: 'Ready', schema: ReadySchema },
      handler: ready,
    }),
    route({
      ...service,
      method: 'GET',
      path: '/version',
      summary: 'Versions of weft and its engines',
      response: { description: 'Versions', schema: VersionSchema },
      handler: versions(models, storage),
    }),
    route({
      ...service,
      method: 'GET',
      path: '/server_info',
      summary: 'Trace server info (checked by the Python weave SDK)',
      response: { description: 'Server info', schema: ServerInfoSchema },
      handler: serverInfo,
    }),
    route({
      ...service,
      method: 'GET',
      path: '/openapi.json',
      summary: 'This OpenAPI 3.1 document',
      handler: openApiDocument(routes),
    }),
  ]
}
