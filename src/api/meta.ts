import { Type } from '@sinclair/typebox'
import { version as duckdbVersion } from '@duckdb/node-api'
import { route, type RouteDef } from './route.js'
import { buildOpenApi } from './openapi.js'
import { MIN_WEAVE_PYTHON_VERSION, VERSION } from '../core/version.js'

const HealthSchema = Type.Object({ status: Type.Literal('ok') })
const VersionSchema = Type.Object({
  version: Type.String(),
  node: Type.String(),
  duckdb: Type.String(),
  inference: Type.Array(
    Type.Object({
      model: Type.String(),
      backend: Type.String({ description: 'TF.js backend: tensorflow, wasm-simd, wasm or cpu' }),
      architecture: Type.String(),
    }),
  ),
})
const ServerInfoSchema = Type.Object({
  min_required_weave_python_version: Type.String(),
  trace_server_version: Type.String(),
})

/** Service endpoints that need no credentials. `routes` is read per request so the document lists every route. */
export function metaRoutes(
  routes: () => readonly RouteDef[],
  models: () => readonly { name: string; backend: string; architecture: string }[] = () => [],
): RouteDef[] {
  let openapi: string | undefined
  return [
    route({
      method: 'GET',
      path: '/health',
      family: 'trace',
      auth: 'none',
      tags: ['Service'],
      summary: 'Liveness',
      response: { description: 'The server is up', schema: HealthSchema },
      // A constant body: this is the load balancer's hot path.
      handler: () => ({ raw: '{"status":"ok"}', contentType: 'application/json' }),
    }),
    route({
      method: 'GET',
      path: '/version',
      family: 'trace',
      auth: 'none',
      tags: ['Service'],
      summary: 'Versions of weft and its engines',
      response: { description: 'Versions', schema: VersionSchema },
      handler: () => ({
        body: {
          version: VERSION,
          node: process.version,
          duckdb: duckdbVersion(),
          inference: models().map((m) => ({ model: m.name, backend: m.backend, architecture: m.architecture })),
        },
      }),
    }),
    route({
      method: 'GET',
      path: '/server_info',
      family: 'trace',
      auth: 'none',
      tags: ['Service'],
      summary: 'Trace server info (checked by the Python weave SDK)',
      response: { description: 'Server info', schema: ServerInfoSchema },
      handler: () => ({
        body: { min_required_weave_python_version: MIN_WEAVE_PYTHON_VERSION, trace_server_version: VERSION },
      }),
    }),
    route({
      method: 'GET',
      path: '/openapi.json',
      family: 'trace',
      auth: 'none',
      tags: ['Service'],
      summary: 'This OpenAPI 3.1 document',
      handler: () => ({ raw: (openapi ??= JSON.stringify(buildOpenApi(routes()))), contentType: 'application/json' }),
    }),
  ]
}
