/**
 * The domain error: what went wrong, as an HTTP-like status and a message a client can act on. Every
 * layer throws it; only the HTTP layer turns it into a reply (http/errors.ts), in the shape of the
 * endpoint's family.
 */
export interface Detail {
  loc: (string | number)[]
  msg: string
  type: string
}

export interface DomainErrorOptions {
  /** Validation problems, one per offending field. */
  details?: Detail[]
  /** The offending request field (the OpenAI envelope's `param`). */
  param?: string | null
  /** Overrides the OpenAI envelope `type` derived from the status. */
  type?: string
  /** Extra members of a `{"reason"}` body (e.g. `deleted_at`). */
  extra?: Record<string, unknown>
  /** Seconds after which a retry may succeed (503, 429); sent as `Retry-After`. */
  retryAfterS?: number
}

export class DomainError extends Error {
  readonly status: number
  readonly details?: Detail[]
  readonly param?: string | null
  readonly type?: string
  readonly extra?: Record<string, unknown>
  readonly retryAfterS?: number

  constructor(status: number, message: string, opts: DomainErrorOptions = {}) {
    super(message)
    this.status = status
    this.details = opts.details
    this.param = opts.param
    this.type = opts.type
    this.extra = opts.extra
    this.retryAfterS = opts.retryAfterS
  }
}

/** A request that failed schema validation; the trace family answers 422, the openai family 400. */
export function validationError(details: Detail[]): DomainError {
  const first = details[0]
  const message =
    details.length === 1 && first
      ? `${first.msg} (at ${first.loc.join('.')})`
      : `${details.length} validation errors: ` + details.map((d) => `${d.loc.join('.')}: ${d.msg}`).join('; ')
  const param = first ? first.loc.filter((p) => p !== 'body' && p !== 'query' && p !== 'path').join('.') || null : null
  return new DomainError(422, message, { details, param })
}

/** Anything thrown that is not a DomainError is a bug: the client sees a generic 500, the log sees the cause. */
export function toDomainError(e: unknown): DomainError {
  if (e instanceof DomainError) return e
  if (diskFull(e))
    return new DomainError(507, 'Insufficient storage: the disk is full, so this write was not acknowledged; retry once there is room', {
      retryAfterS: 30,
    })
  // DuckDB past its memory_limit (--memory-limit) with nothing left to spill: a load condition, not a bug.
  if (outOfMemory(e))
    return new DomainError(503, 'The server is out of query memory (--memory-limit); retry shortly or narrow the request', {
      retryAfterS: 5,
    })
  return new DomainError(500, 'Internal server error')
}

/**
 * DuckDB past its memory limit. Its errors say so in more than one way: "Out of Memory Error: …", and, when a
 * commit cannot get a buffer, "TransactionContext Error: Failed to commit: failed to pin block of size 256.0 KiB
 * (2.9 GiB/3.0 GiB used)" (seen in the soak, on a tail insert).
 */
export function outOfMemory(e: unknown): boolean {
  return e instanceof Error && /Out of Memory Error|failed to pin block|could not allocate block/i.test(e.message)
}

/** A full disk (or quota) is the operator's problem, not a bug: from Node's errno or DuckDB's message. */
export function diskFull(e: unknown): boolean {
  const code = (e as { code?: unknown } | null)?.code
  if (code === 'ENOSPC' || code === 'EDQUOT') return true
  return e instanceof Error && /No space left on device|Disk quota exceeded/i.test(e.message)
}
