import { DomainError } from '../core/errors.js'
import type { Settings } from './executor.js'

/**
 * `--query-timeout-ms` on ClickHouse: the server stops the query itself (`max_execution_time`, in
 * seconds, fractions allowed), so a runaway read frees ClickHouse's threads rather than only the
 * waiting client. `timeout_overflow_mode: 'throw'` makes it an error, never a silently partial answer.
 */
export function timeoutSettings(queryTimeoutMs: number | undefined): Settings {
  if (queryTimeoutMs === undefined) return {}
  return { max_execution_time: queryTimeoutMs / 1000, timeout_overflow_mode: 'throw' }
}

/**
 * ClickHouse's "this query ran too long": 159 TIMEOUT_EXCEEDED, or 160 TOO_SLOW when it predicts the
 * limit will be passed. @clickhouse/client gives the code as a field; chdb only as message text
 * (`Code: 159. DB::Exception: Timeout exceeded: … (TIMEOUT_EXCEEDED)`).
 */
export function isTimeout(e: unknown): boolean {
  const code = (e as { code?: unknown } | null)?.code
  if (code === '159' || code === '160' || code === 159 || code === 160) return true
  return e instanceof Error && /\b(TIMEOUT_EXCEEDED|TOO_SLOW)\b/.test(e.message)
}

/** The embedded store's 504 (calls/read/reader.ts), word for word, so clients see one error either way. */
export function timeoutError(queryTimeoutMs: number): DomainError {
  return new DomainError(504, `Query took longer than ${queryTimeoutMs} ms and was stopped; narrow the filter or page with limit`)
}

/** ClickHouse's timeout as that 504; any other error unchanged. */
export function mapTimeout(e: unknown, queryTimeoutMs: number | undefined): unknown {
  return queryTimeoutMs !== undefined && isTimeout(e) ? timeoutError(queryTimeoutMs) : e
}

/** Runs a query, turning ClickHouse's timeout into the 504. */
export async function withTimeout<T>(queryTimeoutMs: number | undefined, run: () => Promise<T>): Promise<T> {
  try {
    return await run()
  } catch (e) {
    throw mapTimeout(e, queryTimeoutMs)
  }
}
