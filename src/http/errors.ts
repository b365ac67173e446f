/**
 * Error shapes. Each endpoint family keeps the shape its existing clients parse:
 * - `trace` (Weave trace/object API, /v2, meta endpoints): validation problems are FastAPI's
 *   422 `{"detail":[{loc,msg,type}]}`; domain errors are `{"reason": ...}` (Weave's error registry).
 * - `openai` (chat/inference): `{"error":{"message","type","param","code"}}` with `code` the HTTP
 *   status, as vLLM answers.
 */
export type Family = 'trace' | 'openai'

export interface Detail {
  loc: (string | number)[]
  msg: string
  type: string
}

export interface ApiErrorOptions {
  details?: Detail[]
  /** OpenAI envelope `param`: the offending request field. */
  param?: string | null
  /** Overrides the OpenAI envelope `type` derived from the status. */
  type?: string
  /** Extra members of a `{"reason"}` body (e.g. `deleted_at`). */
  extra?: Record<string, unknown>
  headers?: Record<string, string>
}

export class ApiError extends Error {
  readonly status: number
  readonly details?: Detail[]
  readonly param?: string | null
  readonly type?: string
  readonly extra?: Record<string, unknown>
  readonly headers?: Record<string, string>

  constructor(status: number, message: string, opts: ApiErrorOptions = {}) {
    super(message)
    this.status = status
    this.details = opts.details
    this.param = opts.param
    this.type = opts.type
    this.extra = opts.extra
    this.headers = opts.headers
  }
}

/** A request that failed schema validation; the trace family answers 422, the openai family 400. */
export function validationError(details: Detail[]): ApiError {
  const first = details[0]
  const message =
    details.length === 1 && first
      ? `${first.msg} (at ${first.loc.join('.')})`
      : `${details.length} validation errors: ` + details.map((d) => `${d.loc.join('.')}: ${d.msg}`).join('; ')
  const param = first ? first.loc.filter((p) => p !== 'body' && p !== 'query' && p !== 'path').join('.') || null : null
  return new ApiError(422, message, { details, param })
}

const OPENAI_TYPES: Record<number, string> = {
  400: 'BadRequestError',
  401: 'AuthenticationError',
  403: 'PermissionDeniedError',
  404: 'NotFoundError',
  405: 'MethodNotAllowedError',
  409: 'ConflictError',
  413: 'RequestTooLargeError',
  415: 'UnsupportedMediaTypeError',
  422: 'UnprocessableEntityError',
  429: 'RateLimitError',
  500: 'InternalServerError',
  501: 'NotImplementedError',
  503: 'ServiceUnavailableError',
  504: 'GatewayTimeoutError',
}

export interface ErrorReply {
  status: number
  body: unknown
  headers?: Record<string, string>
}

export function errorReply(family: Family, err: ApiError): ErrorReply {
  if (family === 'openai') {
    // vLLM reports request validation failures as 400 Bad Request, not FastAPI's 422.
    const status = err.details ? 400 : err.status
    return {
      status,
      headers: err.headers,
      body: {
        error: {
          message: err.message,
          type: err.type ?? OPENAI_TYPES[status] ?? 'Error',
          param: err.param ?? null,
          code: status,
        },
      },
    }
  }
  if (err.details) return { status: err.status, headers: err.headers, body: { detail: err.details } }
  return { status: err.status, headers: err.headers, body: { reason: err.message, ...err.extra } }
}

/** Anything thrown that is not an ApiError is a bug: the client sees a generic 500, the log sees the cause. */
export function toApiError(e: unknown): ApiError {
  if (e instanceof ApiError) return e
  return new ApiError(500, 'Internal server error')
}
