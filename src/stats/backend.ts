import type { CallFilter, QueryOptions } from '../calls/model.js'
import type { Prices } from '../catalog/prices.js'
import type { CallStatsReq } from '../schemas/calls.js'
import type { StatsPath } from './plan.js'
import type { Usage } from './usage.js'

/**
 * What the statistics routes (api/stats.ts) need of a storage backend: the embedded engine
 * (CallStats, UsageRollup, Prices over DuckDB) has it, and so has the ClickHouse one
 * (clickhouse/stats.ts, usage.ts, costs.ts). The routes take these, never the DuckDB classes.
 */
export interface StatsEngine {
  /** `/calls/stats`: the answer, and how it was computed (the `x-weft-stats-path` header). */
  run(req: CallStatsReq, now?: number): Promise<{ result: Record<string, unknown>; path: StatsPath }>
}

/** `/calls/usage` and `/trace/usage`'s answer. */
export interface UsageAnswer {
  call_usage: Record<string, Record<string, Usage>>
  unfinished_call_ids: string[]
}

export interface UsageEngine {
  /** Each requested call with all its descendants (docs/statistics.md). */
  calls(project: string, ids: string[], includeCosts: boolean, limit: number): Promise<UsageAnswer>
  /** The calls matching filter and query (up to limit), each with its matching descendants. */
  traces(
    project: string,
    filter: CallFilter | null | undefined,
    query: QueryOptions['query'],
    includeCosts: boolean,
    limit: number,
  ): Promise<UsageAnswer>
}

/** Prices as the cost routes use them. */
export type PriceBook = Pick<Prices, 'create' | 'query' | 'purge' | 'forProject'>
