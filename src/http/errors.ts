import { DomainError, type DomainErrorOptions } from '../core/errors.js'
import type { Family } from '../api/route.js'

/**
 * Error replies. Each endpoint family keeps the shape its existing clients parse:
 * - `trace` (Weave trace/object API, /v2, meta endpoints): validation problems are FastAPI's
 *   422 `{"detail":[{loc,msg,type}]}`; domain errors are `{"reason": ...}` (Weave's error registry).
 * - `openai` (chat/inference): `{"error":{"message","type","param","code"}}` with `code` the HTTP
 *   status, as vLLM answers.
 */
export type { Family }

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
  507: 'InsufficientStorageError',
}

/** An error raised by the HTTP layer itself, with headers of its own (`Allow`, `WWW-Authenticate`). */
export class HttpError extends DomainError {
  constructor(
    status: number,
    message: string,
    readonly headers: Record<string, string>,
    opts: DomainErrorOptions = {},
  ) {
    super(status, message, opts)
  }
}

export interface ErrorReply {
  status: number
  body: unknown
  headers?: Record<string, string>
}

export function errorReply(family: Family, err: DomainError): ErrorReply {
  const own = err instanceof HttpError ? err.headers : undefined
  const headers = err.retryAfterS === undefined ? own : { ...own, 'retry-after': String(err.retryAfterS) }
  if (family === 'openai') {
    // vLLM reports request validation failures as 400 Bad Request, not FastAPI's 422.
    const status = err.details ? 400 : err.status
    const type = err.type ?? OPENAI_TYPES[status] ?? 'Error'
    return { status, headers, body: { error: { message: err.message, type, param: err.param ?? null, code: status } } }
  }
  if (err.details) return { status: err.status, headers, body: { detail: err.details } }
  return { status: err.status, headers, body: { reason: err.message, ...err.extra } }
}
