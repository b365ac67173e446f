import type { Static, TSchema } from '@sinclair/typebox'
import type { Logger } from 'pino'
import type { Principal } from '../core/principal.js'

export type Method = 'GET' | 'POST' | 'PUT' | 'DELETE' | 'PATCH'

/**
 * Error shapes. Each endpoint family keeps the shape its existing clients parse (http/errors.ts):
 * `trace` (Weave trace/object API, /v2, meta endpoints) and `openai` (chat/inference, as vLLM).
 */
export type Family = 'trace' | 'openai'

/**
 * Who may call a route. `key`: any valid API key (then, where the route names a project, a key
 * limited to some entities must cover it); `admin`: an admin key; `none`: open.
 */
export type AuthMode = 'none' | 'key' | 'admin'

/** Request headers the server reads; uWebSockets only exposes headers while its handler runs. */
export const READ_HEADERS = [
  'authorization',
  'content-type',
  'content-length',
  'content-encoding',
  'transfer-encoding',
  'origin',
  'access-control-request-method',
  'access-control-request-headers',
  'x-request-id',
  'x-forwarded-for',
  'openai-project',
  'accept',
  'user-agent',
  'wandb-api-key',
  // The Weave project of OTLP spans whose resource does not name one. Weave calls this header
  // `project_id`, but uWebSockets drops connections sending header names with underscores.
  'project-id',
] as const
export type HeaderName = (typeof READ_HEADERS)[number]
export type RequestHeaders = Record<HeaderName, string>

export interface Ctx<B = unknown, Q = unknown> {
  method: Method
  path: string
  params: Record<string, string>
  query: Q
  body: B
  /** The undecoded body, for routes declared `rawBody` (ingest hands bytes to workers). */
  rawBody?: Buffer
  /** The body as it arrives, for routes declared `streamBody`; iterating it throws a 413 DomainError past the limit. */
  bodyStream?: AsyncIterable<Buffer>
  headers: RequestHeaders
  requestId: string
  /** The peer's address, or the client address from X-Forwarded-For when the peer is a trusted proxy. */
  clientIp: string
  principal: Principal | null
  /** Aborts when the client goes away. */
  signal: AbortSignal
  log: Logger
}

export interface JsonReply {
  status?: number
  headers?: Record<string, string>
  body: unknown
}
export interface RawReply {
  status?: number
  headers?: Record<string, string>
  raw: string | Buffer
  contentType: string
}
export interface StreamReply {
  status?: number
  headers?: Record<string, string>
  contentType: string
  /** Pulled only as fast as the client reads; abandoned (return()) when the client goes away. */
  stream: AsyncIterable<string | Uint8Array>
}
export type Reply = JsonReply | RawReply | StreamReply

export interface ResponseDoc {
  description: string
  schema?: TSchema
  contentType?: string
}

export interface RouteDef<TB extends TSchema = TSchema, TQ extends TSchema = TSchema> {
  method: Method
  path: string
  family: Family
  auth: AuthMode
  summary: string
  description?: string
  tags: string[]
  body?: TB
  query?: TQ
  /** Success response, documented in OpenAPI. */
  response?: ResponseDoc
  /** Where the project this request touches comes from, for the entity check (403). */
  project?: (ctx: Ctx<Static<TB>, Static<TQ>>) => string | undefined
  rawBody?: boolean
  /**
   * The body is handed over as it arrives (`ctx.bodyStream`) instead of read whole, for uploads too big to hold
   * in memory: the transport stops reading from the socket while the handler lags. `maxBytes` replaces the
   * server's body limit for this route.
   */
  streamBody?: { maxBytes: number }
  /** A body bound for this route in place of the server's (a body read whole; see streamBody for uploads). */
  maxBodyBytes?: number
  catchAll?: boolean
  /** A route that a later piece of work fills in answers 501 with this text until then. */
  pending?: string
  handler?: (ctx: Ctx<Static<TB>, Static<TQ>>) => Reply | Promise<Reply>
}

/** Keeps the handler's ctx typed from the route's own schemas. */
export function route<TB extends TSchema = TSchema, TQ extends TSchema = TSchema>(def: RouteDef<TB, TQ>): RouteDef {
  return def as unknown as RouteDef
}

export const pathProject = (ctx: Ctx): string => `${ctx.params.entity}/${ctx.params.project}`
export const bodyProject = (ctx: Ctx<{ project_id?: string }>): string | undefined => ctx.body?.project_id
