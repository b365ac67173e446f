import pino, { type Logger } from 'pino'

/** How long a log line may wait in the buffer when traffic is too light to fill it. */
const FLUSH_MS = 250

/**
 * The process logger: JSON lines on stdout (pino). Writes are buffered up to 4 KiB and flushed at
 * least every 250 ms: one write per access-log line costs a busy server half its throughput.
 * Times are epoch milliseconds (pino's default; pino-pretty renders them). Authorization headers
 * and keys are never passed to it.
 */
export function createLogger(level: string): Logger {
  const dest = pino.destination({ sync: false, minLength: 4096 })
  setInterval(() => dest.flush(), FLUSH_MS).unref()
  return pino({ level, base: { pid: process.pid } }, dest)
}
