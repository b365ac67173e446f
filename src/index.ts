/**
 * weft as a library. `startServer` runs everything `weft serve` runs, in-process; `openStore` opens
 * a data directory's calls store without HTTP, for use as an embedded analytics engine.
 */
import { CallStore } from './calls/store.js'

export { startServer, type RunningServer } from './server.js'
export { loadConfig, type Config } from './core/config.js'
export { createLogger } from './core/log.js'
export { CallStore, type CallPart, type CallFilter, type QueryOptions, type CallRecord } from './calls/store.js'
export { startPart, endPart } from './calls/parts.js'
export { openAnalytics, type Analytics } from './stats/analytics.js'
export type { StatsRequest } from './stats/engine.js'

/** Opens (creating) the calls store of a data directory. One process at a time may hold it. */
export function openStore(dataDir: string): Promise<CallStore> {
  return CallStore.open(dataDir)
}
