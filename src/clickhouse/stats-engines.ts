import type { QueryOptions } from '../calls/model.js'
import { defaultPrices } from '../catalog/prices.js'
import type { PriceBook, UsageEngine } from '../stats/backend.js'
import { ClickHousePrices } from './costs.js'
import type { Executor } from './executor.js'
import { ChReader, ClickHouseStats, type ChStatsOptions } from './stats.js'
import { chTraceStorageBytes } from './stats-storage.js'
import { ClickHouseUsage } from './usage.js'

/** The statistics side of the ClickHouse backend: what api/stats.ts serves, and the prices include_costs reads. */
export interface ClickHouseAnalytics {
  /** StatsEngine, and the rollup count /calls/query_stats reads (as the embedded CallStats.count). */
  stats: ClickHouseStats
  usage: UsageEngine
  prices: ClickHousePrices & PriceBook
  /** CallBackend.traceStorageBytes (`include_total_storage_size` of /calls/query_stats) for the call backend to serve. */
  traceStorageBytes(project: string, opts: QueryOptions): Promise<number>
}

/** Statistics, usage and prices over the backend's executor; `extraPrices` as `--prices` (catalog/prices.ts defaultPrices). */
export function clickHouseAnalytics(exec: Executor, opts: ChStatsOptions, extraPrices = ''): ClickHouseAnalytics {
  const prices = new ClickHousePrices(exec, opts, defaultPrices(extraPrices))
  const reader = new ChReader(exec, opts)
  return {
    stats: new ClickHouseStats(reader, prices),
    usage: new ClickHouseUsage(reader, prices),
    prices,
    traceStorageBytes: (project, opts) => chTraceStorageBytes(reader, project, opts),
  }
}
