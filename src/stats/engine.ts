import type { Table } from 'apache-arrow'
import type { CallSource, IdSpan } from '../calls/source.js'
import { readSpan } from './fresh-span.js'
import type { Prices } from '../catalog/prices.js'
import type { CallStatsReq } from '../schemas/calls.js'
import type { CallFilter } from '../schemas/common.js'
import { Accumulator, assemble } from './assemble.js'
import { planStats, statsContext, type Piece, type StatsContext, type StatsPath, type StatsPlan } from './plan.js'
import type { Rollups } from './rollups.js'
import {
  callsStatement,
  correctionStatement,
  countStatement,
  latencyStatement,
  scanPercentiles,
  scanWindowStatement,
  usageStatement,
  wantsBins,
  type Statement,
} from './sql.js'

/**
 * `/calls/stats`, `/calls/query_stats` counts: answered from the rollups where they can (see
 * Rollups), combined with the fresh parts and with scans of partial hours; by a scan of the merged
 * calls otherwise (filters on trace, call, parent, thread or turn ids or refs; boundaries off whole
 * UTC hours; usage percentiles; total_cost min/max).
 *
 * A request is resolved (plan.ts statsContext), planned (planStats: which tier answers which part of
 * the range), read (sql.ts builds each statement) and assembled into buckets (assemble.ts).
 */
export class CallStats {
  constructor(
    private readonly store: Pick<CallSource, 'rows' | 'matching' | 'windowIds' | 'touchedSpan' | 'lastSeq'>,
    private readonly rollups: Rollups | null,
    private readonly prices: Prices,
  ) {}

  async stats(req: CallStatsReq, now = Date.now()): Promise<Record<string, unknown>> {
    return (await this.run(req, now)).result
  }

  /** The same answer as one apache-arrow Table (see statsTable): for embedding, columns rather than JSON. */
  async statsArrow(req: CallStatsReq, now = Date.now()): Promise<Table> {
    // apache-arrow loads at the first Arrow answer (calls/arrow/media.ts says why).
    const { statsTable } = await import('./arrow.js')
    return statsTable(await this.stats(req, now))
  }

  /** The response, and how it was computed (sent as the `x-weft-stats-path` header). */
  async run(req: CallStatsReq, now = Date.now()): Promise<{ result: Record<string, unknown>; path: StatsPath }> {
    const ctx = await this.resolve(req, now)
    let plan = planStats(ctx, this.rollups?.ready === true)
    let acc = await this.gather(ctx, plan)
    if (acc.dirty && [...ctx.callCols, ...ctx.usageCols].some((c) => c.agg === 'min' || c.agg === 'max')) {
      plan = planStats(ctx, this.rollups?.ready === true, true)
      acc = await this.gather(ctx, plan)
    }
    return { result: assemble(ctx, acc), path: plan.path }
  }

  private resolve(req: CallStatsReq, now: number): Promise<StatsContext> {
    return statsContext(req, now, this.prices)
  }

  private async gather(ctx: StatsContext, plan: StatsPlan): Promise<Accumulator> {
    const acc = new Accumulator()
    if (plan.path === 'scan') await this.scan(acc, ctx, plan.windows)
    else await this.fromPieces(acc, ctx, plan.pieces)
    return acc
  }

  private read(s: Statement): Promise<Record<string, unknown>[]> {
    return this.store.rows(s.sql, s.params)
  }

  /**
   * Scans the merged calls started in the windows, one window at a time: the ids of the calls
   * starting in a window bound its merge, so with time-ordered ids (UUIDv7, as the SDKs make them)
   * the segments' id statistics skip nearly every row group. Other ids are only slower.
   */
  private async scan(acc: Accumulator, ctx: StatsContext, windows: [number, number][]): Promise<void> {
    const ranges = await this.store.windowIds(ctx.project_id, windows)
    await Promise.all(
      ranges.map(async (r, w) => {
        if (r === null) return
        const rows = await this.read(scanWindowStatement(this.store, ctx, windows[w]!, [r.lo, r.hi]))
        acc.addScan(rows, scanPercentiles(ctx.usageCols))
      }),
    )
  }

  /**
   * The pieces' rows of every table asked for, added into the request's buckets: one statement per table, and one
   * for the fresh parts' correction of them all (sql.ts correctionStatement), run at once through the rollups' gate
   * so that all read the tables at one `x` (commit-gate.ts). When a commit overtook them anyway (a read slower than
   * the gate's wait), one statement reads everything again at one `x`.
   */
  private async fromPieces(acc: Accumulator, ctx: StatsContext, pieces: Piece[]): Promise<void> {
    if (!pieces.length) return
    const input = { ctx, pieces, rollups: this.rollups!, span: await this.freshSpan(ctx.project_id) }
    const first = await this.rollups!.gate.read(async () => {
      const part = new Accumulator()
      const correction = correctionStatement(input)
      const tasks: Promise<void>[] = correction ? [this.read(correction).then((rows) => part.addKinds(rows))] : []
      if (ctx.callCols.length) tasks.push(this.read(callsStatement(input)).then((rows) => part.addCalls(rows)))
      if (wantsBins(ctx)) tasks.push(this.read(latencyStatement(input)).then((rows) => part.addBins(rows)))
      if (ctx.usageCols.length) tasks.push(this.read(usageStatement(input)).then((rows) => part.addUsage(rows)))
      await Promise.all(tasks)
      return { part, corrected: correction !== null }
    })
    // Without a correction each statement stands alone (each metric from one table, read at one `x`).
    const one = first.consistent || !first.value.corrected ? null : correctionStatement(input, true)
    if (one) acc.addKinds(await this.read(one))
    else acc.absorb(first.value.part)
  }

  /**
   * The id span of the project's calls with parts past the rollups' mark (fresh-span.ts), which bounds the
   * correction's merges; none when no part is past it. Read before the gate: a commit meanwhile only moves the mark on.
   */
  private async freshSpan(project: string): Promise<IdSpan | null> {
    const x = this.rollups!.x
    if (this.store.lastSeq <= x) return null
    return readSpan(this.store, { project, after: x }, async (sql, params) => (await this.store.rows(sql, params)).map((r) => [r.lo, r.hi]))
  }

  /**
   * The number of live calls matching an answerable filter, from the rollups; null when the
   * rollups cannot say (not built yet, or a filter they do not hold).
   */
  async count(project: string, filter: CallFilter | null | undefined): Promise<number | null> {
    if (!this.rollups?.ready) return null
    const statement = countStatement(this.rollups, project, filter, await this.freshSpan(project))
    if (statement === null) return null
    const rows = await this.read(statement)
    return Number(rows[0]!.n)
  }
}
