import type { CallFilter } from '../calls/model.js'
import type { CallStatsReq } from '../schemas/calls.js'
import { Accumulator, assemble } from '../stats/assemble.js'
import type { StatsEngine } from '../stats/backend.js'
import { split, statsContext, type StatsContext, type StatsPath } from '../stats/plan.js'
import type { Executor, Row, Settings } from './executor.js'
import { readSettings, type Layout } from './layout.js'
import { ChParams } from './query/params.js'
import { timeoutSettings, withTimeout } from './settings.js'
import { chCallGroupsSql, chUsageGroupsSql } from './stats-sql.js'
import { chRollupCountsSql, chRollupTotalSql, rollupDims } from './stats-rollup-sql.js'
import type { ClickHousePrices } from './costs.js'

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

/** How a request is answered from the hourly rollup: its whole hours with their buckets, the rest as windows to scan. */
interface RollupPlan {
  hours: [number, number][]
  windows: [number, number][]
  dims: string[]
  params: ChParams
}

/**
 * The rollup answers call counts (`call_count`, any aggregation) under no filter or one on op names
 * and trace roots; latency, errors and usage come from a call's end part, which carries no start
 * hour or op, so they are scanned (docs/clickhouse.md). Null: scan the whole range.
 */
export function rollupPlan(ctx: StatsContext): RollupPlan | null {
  if (ctx.usageCols.length || !ctx.callCols.length || ctx.callCols.some((c) => c.metric !== 'call_count')) return null
  const params = new ChParams()
  const dims = rollupDims(ctx.filter, params)
  if (!dims) return null
  const { hours, windows } = split(ctx.start, ctx.end, ctx.starts, [], { hours: true, minutes: false })
  if (!hours.length || windows.length > MAX_WINDOWS) return null
  return { hours, windows, dims, params }
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
    const acc = new Accumulator()
    const plan = rollupPlan(ctx)
    if (plan) {
      await this.fromRollup(ctx, acc, plan)
      return { result: assemble(ctx, acc), path: 'rollup' }
    }
    const tasks: Promise<void>[] = []
    if (ctx.callCols.length) tasks.push(this.calls(ctx, acc))
    if (ctx.usageCols.length) tasks.push(this.usage(ctx, acc))
    await Promise.all(tasks)
    return { result: assemble(ctx, acc), path: 'scan' }
  }

  /** Whole hours from the rollup, the partial hours at the ends (and hours a bucket cuts) by a scan of just those windows. */
  private async fromRollup(ctx: StatsContext, acc: Accumulator, plan: RollupPlan): Promise<void> {
    const tasks: Promise<void>[] = [
      this.reader
        .rows(chRollupCountsSql(this.reader.opts, ctx.project_id, plan.hours, plan.dims, plan.params), plan.params)
        .then((rows) => {
          acc.addCalls(rows.map((r) => ({ bucket: r.bucket, n: r.n, err: 0 })))
        }),
    ]
    if (plan.windows.length) tasks.push(this.calls(ctx, acc, plan.windows))
    await Promise.all(tasks)
  }

  /**
   * `/calls/query_stats`'s count from the rollup when its filter is on op names and roots only (as the
   * embedded CallStats.count); null when the rollup cannot say.
   */
  async count(project: string, filter: CallFilter | null | undefined): Promise<number | null> {
    const params = new ChParams()
    const dims = rollupDims(filter, params)
    if (!dims) return null
    const [r] = await this.reader.rows(chRollupTotalSql(this.reader.opts, project, dims, params), params)
    return Number(r?.n ?? 0)
  }

  private resolve(req: CallStatsReq, now: number): Promise<StatsContext> {
    return statsContext(req, now, this.prices)
  }

  /** Per (bucket, bin) rows, given to the accumulator as a scan's totals (`g` 1) and bins (`g` 0). */
  private async calls(ctx: StatsContext, acc: Accumulator, windows?: [number, number][]): Promise<void> {
    const params = new ChParams()
    const rows = await this.reader.rows(chCallGroupsSql(this.reader.opts, ctx, params, windows), params)
    const scan: Row[] = []
    for (const r of rows) {
      scan.push({ ...r, kind: 'c', g: 1 })
      if (r.k !== null) scan.push({ kind: 'c', g: 0, bucket: r.bucket, k: r.k, lat_n: r.lat_n })
    }
    acc.addScan(scan, [])
  }

  private async usage(ctx: StatsContext, acc: Accumulator): Promise<void> {
    const params = new ChParams()
    const pcts = ctx.usageCols.filter((c) => c.p !== undefined)
    const rows = await this.reader.rows(chUsageGroupsSql(this.reader.opts, ctx, pcts, params), params)
    acc.addScan(
      rows.map((r) => ({ ...r, kind: 'u' })),
      pcts,
    )
  }
}
