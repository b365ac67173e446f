/**
 * weft as a library. `startServer` runs everything `weft serve` runs, in-process; `openStore` opens
 * a data directory's calls store without HTTP, for use as an embedded analytics engine.
 */
import { CallStore } from './calls/store.js'

export { startServer, type RunningServer } from './server.js'
export { loadConfig, type Config } from './core/config.js'
export { createLogger } from './core/log.js'
export { CallStore, type ArrowStream } from './calls/store.js'
export type { CallPart, CallFilter, QueryOptions, CallRecord } from './calls/model.js'
export { startPart, endPart } from './calls/ingest/parts.js'
export { openAnalytics, type Analytics } from './stats/analytics.js'
export type { CallStatsReq as StatsRequest } from './schemas/calls.js'
export { progress, type TaskState } from './core/progress.js'

/** Opens (creating) the calls store of a data directory. One process at a time may hold it. */
export function openStore(dataDir: string): Promise<CallStore> {
  return CallStore.open(dataDir)
}
