import pino, { type Logger } from 'pino'

/** How long a log line may wait in the buffer when traffic is too light to fill it. */
const FLUSH_MS = 250

/**
 * Credentials are never passed to the logger; these paths are censored anyway, so that a later
 * `log.error({ err, headers })` cannot write a key. One level deep only: wildcards cost every line.
 */
export const REDACTED_PATHS = [
  'authorization',
  'apiKey',
  'api_key',
  '["wandb-api-key"]',
  '*.authorization',
  '*.apiKey',
  '*.api_key',
  '*["wandb-api-key"]',
]

/**
 * The process logger: JSON lines on stdout (pino). Writes are buffered up to 4 KiB and flushed at
 * least every 250 ms: one write per access-log line costs a busy server half its throughput.
 * Times are epoch milliseconds (pino's default; pino-pretty renders them).
 */
export function createLogger(level: string): Logger {
  const dest = pino.destination({ sync: false, minLength: 4096 })
  setInterval(() => dest.flush(), FLUSH_MS).unref()
  return pino({ level, base: { pid: process.pid }, redact: { paths: REDACTED_PATHS, censor: '[redacted]' } }, dest)
}
