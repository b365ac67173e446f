import { parseJson } from '../core/json.js'
import { randomUUID } from 'node:crypto'
import { STATUS_CODES } from 'node:http'
import type { Logger } from 'pino'
import type { KeyStore } from '../catalog/keys.js'
import { canAccess, type Principal } from '../core/principal.js'
import { DomainError, toDomainError, validationError } from '../core/errors.js'
import { HttpError, errorReply, type Family } from './errors.js'
import { credentialsOf } from './credentials.js'
import { clientIpOf } from './client-ip.js'
import { Router, type Method } from './router.js'
import type { Ctx, Reply, RequestHeaders, RouteDef } from '../api/route.js'
import { compileValidator, type Validator } from '../schemas/validate.js'
import { checkJsonShape } from '../core/json-shape.js'

/**
 * One HTTP exchange as the pipeline sees it. The uWebSockets.js server implements it; so does the
 * node:http peer in bench/, which is how the bench compares front ends doing identical work.
 */
export interface Exchange {
  readonly method: string
  readonly path: string
  readonly query: string
  readonly headers: RequestHeaders
  /** The TCP peer's address as text. */
  peerAddress(): string
  readonly aborted: boolean
  onAbort(cb: () => void): void
  /** Resolves with the whole body; rejects with a 413 DomainError past `limit` bytes. */
  readBody(limit: number): Promise<Buffer>
  /**
   * The body as it arrives, pausing the socket while the reader lags; iterating throws a 413 DomainError past
   * `limit` bytes. Must be called in the request's first tick. A transport without it has bodies read whole.
   */
  streamBody?(limit: number): AsyncIterable<Buffer>
  send(status: number, headers: [string, string][], body: string | Buffer, close: boolean): void
  beginStream(status: number, headers: [string, string][]): void
  /** Resolves when the transport can take more (backpressure), or at once if the client left. */
  write(chunk: string | Uint8Array): Promise<void>
  endStream(close: boolean): void
}

export interface AppOptions {
  log: Logger
  keys: KeyStore
  maxBodyBytes: number
  corsOrigins: string[]
  trustedProxies: string[]
  accessLog: boolean
}

interface CompiledRoute {
  def: RouteDef
  body?: Validator
  query?: Validator
}

/** One request on its way through dispatch: what the error reply and the access log need. */
interface Attempt {
  started: number
  requestId: string
  /** Headers every reply carries: request id, keep-alive, CORS. */
  base: [string, string][]
  /** The reply shape: the path's until a route matches, then the route's. */
  family: Family
  /** 0 until something is sent. */
  status: number
  principal: Principal | null
}

const INFERENCE_PREFIX = '/inference/v1/'
const REQUEST_ID = /^[A-Za-z0-9._:@-]{1,128}$/
const CORS_ALLOW_HEADERS = 'authorization, content-type, x-request-id, openai-project, wandb-api-key, accept'

export function statusLine(status: number): string {
  return `${status} ${STATUS_CODES[status] ?? 'Unknown'}`
}

/** Paths of the chat/inference family answer in the OpenAI envelope even when no route matches. */
export function familyOfPath(path: string): Family {
  return path.startsWith('/v1/') || path === '/v1' || path.startsWith('/inference/') ? 'openai' : 'trace'
}

export class App {
  readonly router = new Router<CompiledRoute>()
  private readonly routeList: RouteDef[] = []
  private inFlight = 0
  private idleWaiters: (() => void)[] = []
  /** Set during shutdown: new requests get 503 and their connection is closed. */
  draining = false

  constructor(private readonly opts: AppOptions) {}

  add(defs: RouteDef[]): void {
    for (const def of defs) {
      const compiled: CompiledRoute = {
        def,
        body: def.body ? compileValidator(def.body, 'body') : undefined,
        query: def.query ? compileValidator(def.query, 'query') : undefined,
      }
      this.router.add(def.method, def.path, compiled, { catchAll: def.catchAll })
      this.routeList.push(def)
    }
  }

  get routes(): readonly RouteDef[] {
    return this.routeList
  }

  get pending(): number {
    return this.inFlight
  }

  /** Resolves once no request is in flight. */
  idle(): Promise<void> {
    if (this.inFlight === 0) return Promise.resolve()
    return new Promise((r) => this.idleWaiters.push(r))
  }

  async dispatch(ex: Exchange): Promise<void> {
    const a = this.begin(ex)
    this.inFlight++
    try {
      await this.serve(ex, a)
    } catch (e) {
      this.replyError(ex, a, e)
    } finally {
      this.inFlight--
      if (this.inFlight === 0 && this.idleWaiters.length > 0) {
        for (const w of this.idleWaiters.splice(0)) w()
      }
      if (this.opts.accessLog) this.logAccess(ex, a)
    }
  }

  private begin(ex: Exchange): Attempt {
    const incomingId = ex.headers['x-request-id']
    const requestId = incomingId && REQUEST_ID.test(incomingId) ? incomingId : randomUUID()
    const cors = this.corsHeaders(ex.headers.origin)
    // uWebSockets.js closes a connection idle for 10 s; clients that keep sockets (undici, the SDKs)
    // reuse one only within the timeout announced here, so they never write into a closing socket.
    const base: [string, string][] = [['x-request-id', requestId], ['keep-alive', 'timeout=5'], ...cors]
    return { started: performance.now(), requestId, base, family: familyOfPath(ex.path), status: 0, principal: null }
  }

  /** Route, authenticate, validate, authorise, handle, write: each step throws what the client is answered. */
  private async serve(ex: Exchange, a: Attempt): Promise<void> {
    if (this.draining) throw new DomainError(503, 'Server is shutting down', { retryAfterS: 1 })
    if (ex.method === 'OPTIONS') {
      a.status = this.preflight(ex, a.base)
      return
    }
    const { route, params } = this.route(ex)
    const { def } = route
    a.family = def.family
    a.principal = this.authenticate(def, ex.headers)
    const ctx = await this.buildContext(ex, route, params, a.requestId, a.principal)
    if (def.project && a.principal) authorizeProject(a.principal, def.project(ctx))
    if (!def.handler) {
      throw new DomainError(501, `${def.method} ${def.path} is not implemented yet${def.pending ? ` (${def.pending})` : ''}`)
    }
    const reply = await def.handler(ctx)
    a.status = await this.write(ex, a.base, reply)
  }

  private route(ex: Exchange): { route: CompiledRoute; params: Record<string, string> } {
    const m = this.match(ex.method, ex.path)
    if (m.kind === 'not_found') throw new DomainError(404, `No route for ${ex.method} ${ex.path}`)
    if (m.kind === 'bad_path') throw new DomainError(400, m.message)
    if (m.kind === 'method_not_allowed') {
      throw new HttpError(405, `Method ${ex.method} not allowed on ${ex.path}; allowed: ${m.allow.join(', ')}`, {
        allow: m.allow.join(', '),
      })
    }
    return m
  }

  private replyError(ex: Exchange, a: Attempt, e: unknown): void {
    const err = toDomainError(e)
    if (err.status >= 500 && !(e instanceof DomainError)) {
      this.opts.log.error({ err: e, req_id: a.requestId, method: ex.method, path: ex.path }, 'request failed')
    }
    const r = errorReply(a.family, err)
    a.status = r.status
    const headers = [...a.base, ['content-type', 'application/json'] as [string, string]]
    for (const [k, v] of Object.entries(r.headers ?? {})) headers.push([k, v])
    // After a 413 or during shutdown the rest of the request may still be arriving: close.
    ex.send(a.status, headers, JSON.stringify(r.body), a.status === 413 || this.draining)
  }

  private logAccess(ex: Exchange, a: Attempt): void {
    this.opts.log.info(
      {
        req_id: a.requestId,
        method: ex.method,
        path: ex.path,
        status: ex.aborted && a.status === 0 ? 499 : a.status,
        ms: Math.round((performance.now() - a.started) * 1000) / 1000,
        user: a.principal?.userId,
      },
      'request',
    )
  }

  /**
   * `/inference/v1/...` serves whatever `/v1/...` serves (the W&B Inference prefix); the
   * `/inference/v1{path}` catch-all only sees sub-paths no /v1 route has.
   */
  private match(method: string, path: string) {
    if (path.startsWith(INFERENCE_PREFIX)) {
      const alias = this.router.match(method, '/v1/' + path.slice(INFERENCE_PREFIX.length))
      if (alias.kind === 'found' || alias.kind === 'method_not_allowed') return alias
    }
    return this.router.match(method, path)
  }

  private authenticate(def: RouteDef, headers: RequestHeaders): Principal | null {
    if (def.auth === 'none') return null
    const scheme = def.family === 'openai' ? 'Bearer' : 'Basic'
    const challenge = { 'www-authenticate': `${scheme} realm="weft"` }
    const cred = credentialsOf(headers)
    if (cred === null) {
      const how = scheme === 'Basic' ? 'Authorization: Basic base64(api:<key>)' : 'Authorization: Bearer <key>'
      throw new HttpError(401, `Missing credentials: send ${how}`, challenge)
    }
    const p = this.opts.keys.verify(cred)
    if (!p) throw new HttpError(401, 'Invalid API key', challenge)
    if (def.auth === 'admin' && !p.isAdmin) throw new DomainError(403, 'This operation needs an admin API key')
    return p
  }

  private async buildContext(
    ex: Exchange,
    route: CompiledRoute,
    params: Record<string, string>,
    requestId: string,
    principal: Principal | null,
  ): Promise<Ctx> {
    const { def } = route
    let rawBody: Buffer | undefined
    let bodyStream: AsyncIterable<Buffer> | undefined
    let body: unknown = undefined
    const declared = ex.headers['content-length']
    const hasBody = (declared !== '' && declared !== '0') || ex.headers['transfer-encoding'] !== ''
    const limit = def.streamBody?.maxBytes ?? def.maxBodyBytes ?? this.opts.maxBodyBytes
    if (declared !== '' && Number(declared) > limit) {
      throw tooLarge(limit)
    }
    if (def.streamBody) {
      bodyStream = !hasBody ? emptyBody() : ex.streamBody ? ex.streamBody(limit) : wholeBody(ex.readBody(limit))
    } else if (hasBody || def.body || def.rawBody) {
      rawBody = await ex.readBody(limit)
    }
    if (def.body && !def.rawBody) {
      body = parseJson(rawBody ?? Buffer.alloc(0))
      checkJsonShape(body, rawBody !== undefined && rawBody.includes('\\u'))
      const problems = route.body!(body)
      if (problems) throw validationError(problems)
    }
    let query: unknown = undefined
    if (route.query) {
      query = queryObject(ex.query)
      const problems = route.query(query)
      if (problems) throw validationError(problems)
    }
    return new RequestContext(ex, def, params, query, body, { rawBody, bodyStream }, requestId, principal, this.opts)
  }

  private async write(ex: Exchange, base: [string, string][], reply: Reply): Promise<number> {
    const status = reply.status ?? 200
    const headers = [...base]
    for (const [k, v] of Object.entries(reply.headers ?? {})) headers.push([k, v])
    if ('stream' in reply) {
      headers.push(['content-type', reply.contentType])
      ex.beginStream(status, headers)
      const it = reply.stream[Symbol.asyncIterator]()
      try {
        for (;;) {
          if (ex.aborted) break
          const { value, done } = await it.next()
          if (done) break
          await ex.write(value)
        }
      } catch (e) {
        // Headers are gone already; the only honest signal left is to cut the connection.
        this.opts.log.error({ err: e, path: ex.path }, 'stream failed')
        ex.endStream(true)
        return status
      } finally {
        if (ex.aborted) await it.return?.()
      }
      ex.endStream(this.draining)
      return status
    }
    if ('raw' in reply) {
      headers.push(['content-type', reply.contentType])
      ex.send(status, headers, reply.raw, this.draining)
      return status
    }
    headers.push(['content-type', 'application/json'])
    ex.send(status, headers, JSON.stringify(reply.body), this.draining)
    return status
  }

  private corsHeaders(origin: string): [string, string][] {
    if (!origin) return []
    const any = this.opts.corsOrigins.includes('*')
    if (!any && !this.opts.corsOrigins.includes(origin)) return []
    return [
      ['access-control-allow-origin', any ? '*' : origin],
      ['access-control-expose-headers', 'x-request-id'],
      ['vary', 'origin'],
    ]
  }

  private preflight(ex: Exchange, base: [string, string][]): number {
    const m = this.router.match(ex.headers['access-control-request-method'] || 'GET', ex.path)
    if (m.kind === 'not_found' || m.kind === 'bad_path') throw new DomainError(404, `No route for ${ex.path}`)
    const allow = m.kind === 'found' ? [m.route.def.method] : m.allow
    const headers: [string, string][] = [
      ...base,
      ['access-control-allow-methods', [...new Set([...allow, 'OPTIONS'])].join(', ')],
      ['access-control-allow-headers', ex.headers['access-control-request-headers'] || CORS_ALLOW_HEADERS],
      ['access-control-max-age', '600'],
    ]
    ex.send(204, headers, '', false)
    return 204
  }
}

/** A route that names a project may only be called with a key that covers the project's entity. */
function authorizeProject(principal: Principal, project: string | undefined): void {
  if (project === undefined) return
  const entity = project.slice(0, project.indexOf('/'))
  if (!canAccess(principal, entity)) {
    throw new DomainError(403, `This API key may not access entity ${JSON.stringify(entity)}`)
  }
}

export function tooLarge(limit: number): DomainError {
  return new DomainError(413, `Request body is larger than the limit of ${limit} bytes`)
}

async function* emptyBody(): AsyncGenerator<Buffer> {}

/** For transports that cannot stream a body: the whole of it, as one chunk. */
function wholeBody(read: Promise<Buffer>): AsyncIterable<Buffer> {
  // Reading starts now; a failure before the handler iterates must not count as an unhandled rejection.
  read.catch(() => {})
  return (async function* () {
    yield await read
  })()
}

/** A query string as an object; a repeated key becomes an array. */
export function queryObject(q: string): Record<string, string | string[]> {
  const out: Record<string, string | string[]> = Object.create(null)
  if (!q) return out
  for (const [k, v] of new URLSearchParams(q)) {
    const prev = out[k]
    out[k] = prev === undefined ? v : Array.isArray(prev) ? [...prev, v] : [prev, v]
  }
  return out
}

/**
 * The handler's view of a request. The client address and the abort signal cost an address parse
 * and an AbortController; most requests never ask, so both are made on first use.
 */
class RequestContext implements Ctx {
  readonly method: Method
  readonly path: string
  readonly headers: RequestHeaders
  readonly rawBody?: Buffer
  readonly bodyStream?: AsyncIterable<Buffer>
  private ip?: string
  private abort?: AbortController

  constructor(
    private readonly ex: Exchange,
    def: RouteDef,
    readonly params: Record<string, string>,
    readonly query: unknown,
    readonly body: unknown,
    bodies: { rawBody?: Buffer; bodyStream?: AsyncIterable<Buffer> },
    readonly requestId: string,
    readonly principal: Principal | null,
    private readonly opts: AppOptions,
  ) {
    this.method = ex.method as Method
    this.path = ex.path
    this.headers = ex.headers
    this.rawBody = def.rawBody ? bodies.rawBody : undefined
    this.bodyStream = bodies.bodyStream
  }

  get log(): Logger {
    return this.opts.log
  }

  get clientIp(): string {
    return (this.ip ??= clientIpOf(this.ex.peerAddress(), this.ex.headers['x-forwarded-for'], this.opts.trustedProxies))
  }

  get signal(): AbortSignal {
    if (!this.abort) {
      const abort = (this.abort = new AbortController())
      this.ex.onAbort(() => abort.abort())
    }
    return this.abort.signal
  }
}
