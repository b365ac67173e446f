import type { Accumulator } from '../stats/assemble.js'
import type { StatsContext } from '../stats/plan.js'
import type { Row } from './executor.js'
import type { Layout } from './layout.js'
import { ChParams } from './query/params.js'
import { chRollupDoneSql, chRollupUsageSql } from './stats-done-sql.js'
import { slotParams } from './stats-slots.js'
import { chRollupCountsSql } from './stats-rollup-sql.js'
import { chCallGroupsSql, chUsageGroupsSql } from './stats-sql.js'
import { TOKEN_METRICS } from './stats-done-schema.js'

/** What the statistics read through (stats.ts ChReader): statements with bound parameters, under the read settings. */
export interface RowReader {
  readonly opts: Layout
  rows(sql: string, params: ChParams, extra?: Record<string, unknown>): Promise<Row[]>
}

/** The whole hours, their buckets and the rollup conditions of a request answered from the rollups (stats.ts rollupPlan). */
export interface RollupSlots {
  hours: [number, number][]
  windows: [number, number][]
  dims: string[]
  params: ChParams
}

/** Per (bucket, bin) rows of merged calls (in `windows` only, when given), as a scan's totals (`g` 1) and bins (`g` 0). */
export async function scanCalls(reader: RowReader, ctx: StatsContext, acc: Accumulator, windows?: [number, number][]): Promise<void> {
  const params = new ChParams()
  const rows = await reader.rows(chCallGroupsSql(reader.opts, ctx, params, windows), params)
  const scan: Row[] = []
  for (const r of rows) {
    scan.push({ ...r, kind: 'c', g: 1 })
    if (r.k !== null) scan.push({ kind: 'c', g: 0, bucket: r.bucket, k: r.k, lat_n: r.lat_n })
  }
  acc.addScan(scan, [])
}

/** Usage per bucket and model of merged calls (in `windows` only, when given), percentiles exact. */
export async function scanUsage(reader: RowReader, ctx: StatsContext, acc: Accumulator, windows?: [number, number][]): Promise<void> {
  const params = new ChParams()
  const pcts = ctx.usageCols.filter((c) => c.p !== undefined)
  const rows = await reader.rows(chUsageGroupsSql(reader.opts, ctx, pcts, params, windows), params)
  acc.addScan(
    rows.map((r) => ({ ...r, kind: 'u' })),
    pcts,
  )
}

const num = (v: unknown): number | null => (v === null || v === undefined ? null : Number(v))

/** Marks the accumulator dirty when a taken-out extreme equals the one a bucket reports. */
function touches(acc: Accumulator, sub: { min: number | null; max: number | null }, now: { min: number | null; max: number | null }): void {
  if ((sub.min !== null && sub.min === now.min) || (sub.max !== null && sub.max === now.max)) acc.dirty = true
}

/** The emitted calls' errors, latency and bins, the corrected calls' emissions taken back out. */
async function doneFromRollup(reader: RowReader, ctx: StatsContext, acc: Accumulator, plan: RollupSlots): Promise<void> {
  const params = plan.params.clone()
  const rows = await reader.rows(chRollupDoneSql(reader.opts, slotParams(ctx.project_id, plan.hours, plan.dims, params), params), params)
  const sign = (r: Row) => (Number(r.sub) === 1 ? -1 : 1)
  const add = rows.map((r) => {
    const s = sign(r)
    return { bucket: r.bucket, n: 0, err: s * Number(r.err), lat_n: s * Number(r.lat_n), lat_sum: s * Number(r.lat_sum), ...extremes(r, s) }
  })
  acc.addCalls(add)
  acc.addBins(
    rows.flatMap((r) => {
      const [ks, ns] = r.bins as [unknown[], unknown[]]
      return ks.map((k, i) => ({ bucket: r.bucket, k, n: sign(r) * Number(ns[i]) }))
    }),
  )
  // An extreme taken out matters only where one is reported (percentiles are clamped to them).
  if (!ctx.callCols.some((c) => c.metric === 'latency_ms' && (c.p !== undefined || c.agg === 'min' || c.agg === 'max'))) return
  for (const r of rows) if (sign(r) < 0) touches(acc, { min: num(r.lat_min), max: num(r.lat_max) }, acc.call(Number(r.bucket)).lat)
}

/** Taken-out rows add nothing to the extremes. */
function extremes(r: Row, s: number): { lat_min: unknown; lat_max: unknown } {
  return s > 0 ? { lat_min: r.lat_min, lat_max: r.lat_max } : { lat_min: null, lat_max: null }
}

/** The emitted calls' usage per bucket and model, the corrected calls' emissions taken back out. */
async function usageFromRollup(reader: RowReader, ctx: StatsContext, acc: Accumulator, plan: RollupSlots): Promise<void> {
  const params = plan.params.clone()
  const rows = await reader.rows(chRollupUsageSql(reader.opts, slotParams(ctx.project_id, plan.hours, plan.dims, params), params), params)
  acc.addUsage(
    rows.map((r) => {
      const s = Number(r.sub) === 1 ? -1 : 1
      const out: Row = { bucket: r.bucket, model: r.model, n: s * Number(r.n) }
      for (const m of TOKEN_METRICS) {
        out[`${m}_sum`] = s * Number(r[`${m}_sum`])
        out[`${m}_n`] = s * Number(r[`${m}_n`])
        out[`${m}_min`] = s > 0 ? r[`${m}_min`] : null
        out[`${m}_max`] = s > 0 ? r[`${m}_max`] : null
      }
      return out
    }),
  )
  if (!ctx.usageCols.some((c) => c.agg === 'min' || c.agg === 'max')) return
  for (const r of rows) {
    if (Number(r.sub) !== 1) continue
    const now = acc.use(Number(r.bucket), String(r.model)).m
    for (const m of TOKEN_METRICS) touches(acc, { min: num(r[`${m}_min`]), max: num(r[`${m}_max`]) }, now[m]!)
  }
}

/**
 * A request from the rollups: counts (stats-rollup-sql.ts), errors and latency, and usage from the
 * hourly rows of its whole hours; the partial hours at the ends (and hours a bucket cuts) scanned.
 */
export async function fromRollup(reader: RowReader, ctx: StatsContext, acc: Accumulator, plan: RollupSlots): Promise<void> {
  const tasks: Promise<void>[] = []
  if (ctx.callCols.length) {
    const params = plan.params.clone()
    const sql = chRollupCountsSql(reader.opts, ctx.project_id, plan.hours, plan.dims, params)
    tasks.push(reader.rows(sql, params).then((rows) => acc.addCalls(rows.map((r) => ({ bucket: r.bucket, n: r.n, err: 0 })))))
    if (ctx.callCols.some((c) => c.metric !== 'call_count')) tasks.push(doneFromRollup(reader, ctx, acc, plan))
    if (plan.windows.length) tasks.push(scanCalls(reader, ctx, acc, plan.windows))
  }
  if (ctx.usageCols.length) {
    tasks.push(usageFromRollup(reader, ctx, acc, plan))
    if (plan.windows.length) tasks.push(scanUsage(reader, ctx, acc, plan.windows))
  }
  await Promise.all(tasks)
}
