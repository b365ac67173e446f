import { promisify } from 'node:util'
import zlib from 'node:zlib'
import { canAccess } from '../auth/keys.js'
import { ApiError } from '../http/errors.js'
import { route, type Ctx, type RouteDef } from '../http/route.js'
import type { CallStore } from '../calls/store.js'
import { decodeProtobuf, encodeResponse, spansToParts, type ExportRequest } from '../otel/otlp.js'

const gunzip = promisify(zlib.gunzip)
const inflate = promisify(zlib.inflate)

async function decompress(ctx: Ctx, limit: number): Promise<Buffer> {
  const body = ctx.rawBody ?? Buffer.alloc(0)
  const enc = ctx.headers['content-encoding'].toLowerCase()
  if (!enc || enc === 'identity') return body
  // The inflated size is bounded like a body: a small gzip bomb must not become gigabytes.
  const opts = { maxOutputLength: limit }
  try {
    if (enc === 'gzip') return await gunzip(body, opts)
    if (enc === 'deflate') return await inflate(body, opts)
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'ERR_BUFFER_TOO_LARGE') throw new ApiError(413, `Decompressed body is larger than ${limit} bytes`)
    throw new ApiError(400, `Body is not valid ${enc} data`)
  }
  throw new ApiError(415, `Unsupported Content-Encoding ${JSON.stringify(enc)}: send gzip, deflate or none`)
}

/** POST /otel/v1/traces: OTLP/HTTP spans become calls; the answer names every rejected span. */
export function otelRoutes(store: CallStore, maxBodyBytes: number): RouteDef[] {
  const handler = async (ctx: Ctx) => {
    const type = ctx.headers['content-type'].split(';')[0]!.trim().toLowerCase()
    const isJson = type === 'application/json'
    if (!isJson && type !== 'application/x-protobuf' && type !== 'application/protobuf') {
      throw new ApiError(415, 'OTLP/HTTP bodies must be application/x-protobuf or application/json')
    }
    const raw = await decompress(ctx, maxBodyBytes)
    let req: ExportRequest
    if (isJson) {
      try {
        req = JSON.parse(raw.toString('utf8')) as ExportRequest
      } catch {
        throw new ApiError(400, 'Body is not valid JSON')
      }
      if (!req || typeof req !== 'object' || Array.isArray(req)) throw new ApiError(400, 'Body must be an ExportTraceServiceRequest object')
      if (req.resourceSpans !== undefined && !Array.isArray(req.resourceSpans)) throw new ApiError(400, 'resourceSpans must be a list')
    } else req = decodeProtobuf(raw)

    const principal = ctx.principal!
    let conv
    try {
      conv = spansToParts(req, ctx.headers['project-id'], principal.userId, (project) => canAccess(principal, project.slice(0, project.indexOf('/'))))
    } catch (e) {
      if (e instanceof ApiError) throw e
      throw new ApiError(400, `Malformed OTLP request: ${(e as Error).message}`)
    }
    await store.ingest(conv.parts)
    const message = conv.errors.join('; ')
    if (isJson) {
      return { body: conv.rejected > 0 ? { partial_success: { rejected_spans: conv.rejected, error_message: message } } : {} }
    }
    return { raw: Buffer.from(encodeResponse(conv.rejected, message)), contentType: 'application/x-protobuf' }
  }
  const def = (path: string, summary: string) =>
    route({ method: 'POST', path, family: 'trace', auth: 'key', tags: ['Calls'], summary, rawBody: true, handler })
  return [
    def('/otel/v1/traces', 'OpenTelemetry (OTLP/HTTP, protobuf or JSON) spans as calls'),
    def('/otel/v1/trace', 'Alias of /otel/v1/traces (older Weave servers)'),
  ]
}
