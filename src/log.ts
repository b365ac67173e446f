import pino, { type Logger } from 'pino'

/**
 * The process logger: JSON lines on stdout through pino's asynchronous writer, so logging never
 * waits on the terminal. Authorization headers and keys are never passed to it.
 */
export function createLogger(level: string): Logger {
  return pino(
    { level, base: { pid: process.pid }, timestamp: pino.stdTimeFunctions.isoTime },
    pino.destination({ sync: false }),
  )
}
