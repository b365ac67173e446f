import type { CallFilter } from '../calls/model.js'
import type { CallStatsReq } from '../schemas/calls.js'
import { Accumulator, assemble } from '../stats/assemble.js'
import type { StatsEngine } from '../stats/backend.js'
import { split, statsContext, type StatsContext, type StatsPath } from '../stats/plan.js'
import type { Executor, Row, Settings } from './executor.js'
import { readSettings, type Layout } from './layout.js'
import { ChParams } from './query/params.js'
import { timeoutSettings, withTimeout } from './settings.js'
import { fromRollup, readSuspects, rescanBuckets, scanCalls, scanUsage, type RollupSlots } from './stats-reads.js'
import { chRollupTotalSql, rollupDims } from './stats-rollup-sql.js'
import type { ClickHousePrices } from './costs.js'
import { tierOf } from './stats-tiers.js'

/** How the ClickHouse statistics run: where, and for how long a query may take. */
export interface ChStatsOptions extends Layout {
  /** `--query-timeout-ms`: ClickHouse stops a query past it (max_execution_time); the answer is a 504. */
  queryTimeoutMs?: number
}

/** Reads for statistics: the layout's read settings plus the time limit, ClickHouse's timeout as the 504. */
export class ChReader {
  private readonly settings: Settings

  constructor(
    readonly exec: Executor,
    readonly opts: ChStatsOptions,
  ) {
    this.settings = { ...readSettings(opts), ...timeoutSettings(opts.queryTimeoutMs) }
  }

  rows(sql: string, params: ChParams, extra: Settings = {}): Promise<Row[]> {
    return withTimeout(this.opts.queryTimeoutMs, () => this.exec.query(sql, params.values, { ...this.settings, ...extra }))
  }
}

/** Past this many partial-hour windows a request is one scan (the embedded planner's bound, stats/plan.ts). */
const MAX_WINDOWS = 4_000

/** How a request is answered from the hourly rollups: its whole hours with their buckets, the rest as windows to scan. */
export type RollupPlan = RollupSlots

/**
 * The rollups answer call metrics (counts, errors, latency with its percentiles), token metrics
 * (sums, counts, extremes) and costs (the tokens of an hour times its price) under no filter or one
 * on op names, trace roots, users and runs (the last two from the user tier). Usage percentiles need every value, and total_cost's extremes each
 * call's two prices together, so those are scanned, as on the embedded engine (stats/plan.ts); so is
 * a granularity under an hour. The hours are split at every price change (a cost's price is its
 * hour's). Null: scan the whole range.
 */
export function rollupPlan(ctx: StatsContext): RollupPlan | null {
  if (ctx.usageCols.some((c) => c.p !== undefined || (c.metric === 'total_cost' && (c.agg === 'min' || c.agg === 'max')))) return null
  const params = new ChParams()
  const dims = rollupDims(ctx.filter, params)
  if (!dims) return null
  const { hours, windows } = split(ctx.start, ctx.end, ctx.starts, ctx.spans, { hours: true, minutes: false })
  if (!hours.length || windows.length > MAX_WINDOWS) return null
  return { hours, windows, dims, tier: tierOf(ctx.filter), params }
}

/**
 * `/calls/stats` on ClickHouse: call counts from the hourly rollup where it answers exactly
 * (rollupPlan), everything else aggregated directly over the merged calls, with the embedded
 * engine's request checks, bucket boundaries, percentile sketch and assembly (stats/plan.ts,
 * metrics.ts, sketch.ts, assemble.ts), so both backends give the same answer.
 */
export class ClickHouseStats implements StatsEngine {
  constructor(
    private readonly reader: ChReader,
    private readonly prices: Pick<ClickHousePrices, 'forProject'>,
  ) {}

  async run(req: CallStatsReq, now = Date.now()): Promise<{ result: Record<string, unknown>; path: StatsPath }> {
    const ctx = await this.resolve(req, now)
    const plan = rollupPlan(ctx)
    if (plan) {
      const acc = new Accumulator()
      const dirty = await fromRollup(this.reader, ctx, acc, plan)
      // Where a corrected call held a reported extreme, what the rollup has left is unknown: those buckets are scanned.
      if (dirty.size) await rescanBuckets(this.reader, ctx, acc, dirty)
      return { result: assemble(ctx, acc), path: 'rollup' }
    }
    const acc = new Accumulator()
    const tasks: Promise<void>[] = []
    if (ctx.callCols.length) tasks.push(scanCalls(this.reader, ctx, acc))
    if (ctx.usageCols.length) tasks.push(scanUsage(this.reader, ctx, acc))
    await Promise.all(tasks)
    return { result: assemble(ctx, acc), path: 'scan' }
  }

  /**
   * `/calls/query_stats`'s count from the rollup when its filter is on op names and roots only (as the
   * embedded CallStats.count); null when the rollup cannot say.
   */
  async count(project: string, filter: CallFilter | null | undefined): Promise<number | null> {
    const params = new ChParams()
    const dims = rollupDims(filter, params)
    if (!dims) return null
    const suspects = await readSuspects(this.reader, project, false)
    const [r] = await this.reader.rows(chRollupTotalSql(this.reader.opts, project, dims, params, suspects, tierOf(filter)), params)
    return Number(r?.n ?? 0)
  }

  private resolve(req: CallStatsReq, now: number): Promise<StatsContext> {
    return statsContext(req, now, this.prices)
  }
}
