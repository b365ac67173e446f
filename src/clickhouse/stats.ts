import type { CallStatsReq } from '../schemas/calls.js'
import { Accumulator, assemble } from '../stats/assemble.js'
import type { StatsEngine } from '../stats/backend.js'
import { statsContext, type StatsContext, type StatsPath } from '../stats/plan.js'
import type { Executor, Row, Settings } from './executor.js'
import { readSettings, type Layout } from './layout.js'
import { ChParams } from './query/params.js'
import { timeoutSettings, withTimeout } from './settings.js'
import { chCallGroupsSql, chUsageGroupsSql } from './stats-sql.js'
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

/**
 * `/calls/stats` on ClickHouse: every request aggregated directly over the merged calls (ClickHouse
 * scans columns fast enough that the embedded store's rollup tiers are not needed for correctness),
 * with the embedded engine's request checks, bucket boundaries, percentile sketch and assembly
 * (stats/plan.ts, metrics.ts, sketch.ts, assemble.ts), so both backends give the same answer.
 */
export class ClickHouseStats implements StatsEngine {
  constructor(
    private readonly reader: ChReader,
    private readonly prices: Pick<ClickHousePrices, 'forProject'>,
  ) {}

  async run(req: CallStatsReq, now = Date.now()): Promise<{ result: Record<string, unknown>; path: StatsPath }> {
    const ctx = await this.resolve(req, now)
    const acc = new Accumulator()
    const tasks: Promise<void>[] = []
    if (ctx.callCols.length) tasks.push(this.calls(ctx, acc))
    if (ctx.usageCols.length) tasks.push(this.usage(ctx, acc))
    await Promise.all(tasks)
    return { result: assemble(ctx, acc), path: 'scan' }
  }

  private resolve(req: CallStatsReq, now: number): Promise<StatsContext> {
    return statsContext(req, now, this.prices)
  }

  /** Per (bucket, bin) rows, given to the accumulator as a scan's totals (`g` 1) and bins (`g` 0). */
  private async calls(ctx: StatsContext, acc: Accumulator): Promise<void> {
    const params = new ChParams()
    const rows = await this.reader.rows(chCallGroupsSql(this.reader.opts, ctx, params), params)
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
