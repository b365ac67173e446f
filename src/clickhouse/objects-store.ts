import { isoFromMicros } from '../core/time.js'
import type { ClickHouseCallsOptions } from './calls.js'
import type { Executor, Settings } from './executor.js'
import { readSettings, writeSettings } from './layout.js'
import { SeqClock } from './parts.js'

/**
 * What the object-side stores on ClickHouse (objects, tables, files, feedback) share: the executor, where the
 * tables are, the settings reads and writes run with, and one clock for the times their rows carry.
 */
export interface ChStore {
  exec: Executor
  layout: ClickHouseCallsOptions
  reads: Settings
  writes: Settings
  /** Microseconds, never going back in this process: the `updated_at` that decides which row of a key wins. */
  clock: SeqClock
}

export function chStore(exec: Executor, layout: ClickHouseCallsOptions): ChStore {
  return {
    exec,
    layout,
    reads: readSettings(layout),
    writes: { ...writeSettings(layout), ...layout.insertSettings },
    clock: new SeqClock(),
  }
}

/** Microseconds since the epoch as DateTime64(6)'s text (UTC), which JSONEachRow and bound parameters take. */
export function chTime(us: bigint): string {
  return isoFromMicros(us)!.replace('T', ' ').slice(0, -1)
}
