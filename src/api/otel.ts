import { DomainError } from '../core/errors.js'
import { route, type Ctx, type RouteDef } from './route.js'
import type { CallBackend } from '../calls/backend.js'
import type { IngestPool } from '../calls/ingest/pool.js'

/** POST /otel/v1/traces: OTLP/HTTP spans become calls; the answer names every rejected span. */
export function otelRoutes(store: Pick<CallBackend, 'ingestRecord'>, pool: IngestPool, maxBodyBytes: number): RouteDef[] {
  const handler = async (ctx: Ctx) => {
    const type = ctx.headers['content-type'].split(';')[0]!.trim().toLowerCase()
    const isJson = type === 'application/json'
    if (!isJson && type !== 'application/x-protobuf' && type !== 'application/protobuf') {
      throw new DomainError(415, 'OTLP/HTTP bodies must be application/x-protobuf or application/json')
    }
    const p = ctx.principal!
    const { record, count, reply } = await pool.prepare({
      route: 'otel',
      body: ctx.rawBody ?? Buffer.alloc(0),
      userId: p.userId,
      entities: p.entities,
      otel: { json: isJson, encoding: ctx.headers['content-encoding'], projectHeader: ctx.headers['project-id'], maxBytes: maxBodyBytes },
    })
    await store.ingestRecord(record, count)
    const conv = reply as { rejected: number; message: string }
    const message = conv.message
    if (isJson) {
      // OTLP/JSON spells fields in lowerCamelCase, as protobuf's JSON mapping does: that is what exporters read.
      return { body: conv.rejected > 0 ? { partialSuccess: { rejectedSpans: conv.rejected, errorMessage: message } } : {} }
    }
    // protobufjs and the OTLP types (~0.1 s to load) wait for the first protobuf answer rather than every start.
    const { encodeResponse } = await import('../calls/ingest/otlp.js')
    return { raw: Buffer.from(encodeResponse(conv.rejected, message)), contentType: 'application/x-protobuf' }
  }
  const def = (path: string, summary: string) =>
    route({ method: 'POST', path, family: 'trace', auth: 'key', tags: ['Calls'], summary, rawBody: true, handler })
  return [
    def('/otel/v1/traces', 'OpenTelemetry (OTLP/HTTP, protobuf or JSON) spans as calls'),
    def('/otel/v1/trace', 'Alias of /otel/v1/traces (older Weave servers)'),
  ]
}
