import type { Accumulator } from '../stats/assemble.js'
import type { StatsContext } from '../stats/plan.js'
import type { Row } from './executor.js'
import type { Layout } from './layout.js'
import { ChParams } from './query/params.js'
import { chRollupDoneSql, chRollupUsageSql } from './stats-done-sql.js'
import { slotParams } from './stats-slots.js'
import { chRollupCountsSql, MAX_BOUND, suspectsSql, type Suspects } from './stats-rollup-sql.js'
import { chCallGroupsSql, chUsageGroupsSql } from './stats-sql.js'
import { TOKEN_METRICS } from './stats-done-schema.js'
import type { RollupTier } from './stats-tiers.js'
import { COST_METRICS } from './stats-cost-sql.js'

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
  /** The op tier, or the user tier when `dims` name users or runs (stats-tiers.ts). */
  tier: RollupTier
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

type Extremes = { min: number | null; max: number | null }

/** Marks `bucket` dirty when a taken-out extreme equals the one it reports (`now`). */
function touches(dirty: Set<number>, bucket: number, sub: Extremes, now: Extremes): void {
  if ((sub.min !== null && sub.min === now.min) || (sub.max !== null && sub.max === now.max)) dirty.add(bucket)
}

/** One request's rollup reads: where they add up, the calls to correct, and the buckets found dirty (touches). */
interface RollupRead {
  reader: RowReader
  ctx: StatsContext
  acc: Accumulator
  plan: RollupSlots
  suspects: Suspects
  dirty: Set<number>
}

/** The emitted calls' errors, latency and bins, the corrected calls' emissions taken back out. */
async function doneFromRollup(run: RollupRead): Promise<void> {
  const { reader, ctx, acc, plan, suspects, dirty } = run
  const params = plan.params.clone()
  const sql = chRollupDoneSql(reader.opts, slotParams(ctx.project_id, plan.hours, plan.dims, params, plan.tier), params, suspects)
  const rows = await reader.rows(sql, params)
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
  for (const r of rows) {
    const b = Number(r.bucket)
    if (sign(r) < 0) touches(dirty, b, { min: num(r.lat_min), max: num(r.lat_max) }, acc.call(b).lat)
  }
}

/** Taken-out rows add nothing to the extremes. */
function extremes(r: Row, s: number): { lat_min: unknown; lat_max: unknown } {
  return s > 0 ? { lat_min: r.lat_min, lat_max: r.lat_max } : { lat_min: null, lat_max: null }
}

/** The emitted calls' usage (and costs) per bucket and model, the corrected calls' emissions taken back out. */
async function usageFromRollup(run: RollupRead): Promise<void> {
  const { reader, ctx, acc, plan, suspects, dirty } = run
  const params = plan.params.clone()
  const costs = ctx.usageCols.some((c) => COST_METRICS.includes(c.metric))
  const slots = slotParams(ctx.project_id, plan.hours, plan.dims, params, plan.tier)
  const rows = await reader.rows(chRollupUsageSql(reader.opts, slots, params, suspects, costs ? ctx.spans : null), params)
  const metrics = costs ? [...TOKEN_METRICS, ...COST_METRICS] : TOKEN_METRICS
  acc.addUsage(
    rows.map((r) => {
      const s = Number(r.sub) === 1 ? -1 : 1
      const out: Row = { bucket: r.bucket, model: r.model, n: s * Number(r.n) }
      for (const m of metrics) {
        out[`${m}_sum`] = s * Number(r[`${m}_sum`] ?? 0)
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
    for (const m of metrics) touches(dirty, Number(r.bucket), { min: num(r[`${m}_min`]), max: num(r[`${m}_max`]) }, now[m]!)
  }
}

/**
 * The calls of a project whose rollup rows are not their merged state (stats-rollup-sql.ts
 * suspectsSql; `done`: for latency, errors and usage too), read once for all of a request's
 * statements; past MAX_BOUND of them, the statements evaluate the subquery themselves.
 */
export async function readSuspects(reader: RowReader, project: string, done: boolean): Promise<Suspects> {
  const params = new ChParams()
  const sql = `SELECT DISTINCT id FROM (${suspectsSql(reader.opts, params.add(project, 'String'), done)}) LIMIT ${params.add(MAX_BOUND + 1, 'UInt64')}`
  const rows = await reader.rows(sql, params)
  return rows.length > MAX_BOUND ? { done } : { ids: rows.map((r) => String(r.id)) }
}

/**
 * A request from the rollups: counts (stats-rollup-sql.ts), errors and latency, and usage from the
 * hourly rows of its whole hours; the partial hours at the ends (and hours a bucket cuts) scanned.
 * The calls to correct are read first, once (the counts need fewer of them, but correcting a call
 * whose rows are right changes nothing: its rows out, the same state in). Returns the buckets where a
 * corrected call held a reported extreme: what the rollup has left there is unknown (rescanBuckets).
 */
export async function fromRollup(reader: RowReader, ctx: StatsContext, acc: Accumulator, plan: RollupSlots): Promise<Set<number>> {
  const dirty = new Set<number>()
  const latency = ctx.callCols.some((c) => c.metric !== 'call_count')
  const done = latency || ctx.usageCols.length > 0
  const suspects = readSuspects(reader, ctx.project_id, done)
  const tasks: Promise<void>[] = []
  if (ctx.callCols.length) {
    const params = plan.params.clone()
    tasks.push(
      suspects.then(async (s) => {
        const sql = chRollupCountsSql(reader.opts, ctx.project_id, plan.hours, plan.dims, params, s, plan.tier)
        acc.addCalls((await reader.rows(sql, params)).map((r) => ({ bucket: r.bucket, n: r.n, err: 0 })))
      }),
    )
    if (latency) tasks.push(suspects.then((s) => doneFromRollup({ reader, ctx, acc, plan, suspects: s, dirty })))
    if (plan.windows.length) tasks.push(scanCalls(reader, ctx, acc, plan.windows))
  }
  if (ctx.usageCols.length) {
    tasks.push(suspects.then((s) => usageFromRollup({ reader, ctx, acc, plan, suspects: s, dirty })))
    if (plan.windows.length) tasks.push(scanUsage(reader, ctx, acc, plan.windows))
  }
  await Promise.all(tasks)
  return dirty
}

/**
 * The buckets `dirty` scanned whole instead (their rollup rows dropped): a minimum or maximum cannot be
 * taken out of a rollup, so where a corrected call held one, only the bucket's calls can say what is
 * left. The embedded engine scans the whole request then; the other buckets' rows stand here.
 */
export async function rescanBuckets(reader: RowReader, ctx: StatsContext, acc: Accumulator, dirty: Set<number>): Promise<void> {
  const windows: [number, number][] = []
  ctx.starts.forEach((b, i) => {
    if (!dirty.has(b)) return
    acc.calls.delete(b)
    acc.usage.delete(b)
    windows.push([Math.max(b, ctx.start), Math.min(ctx.starts[i + 1] ?? ctx.end, ctx.end)])
  })
  const tasks: Promise<void>[] = []
  if (ctx.callCols.length) tasks.push(scanCalls(reader, ctx, acc, windows))
  if (ctx.usageCols.length) tasks.push(scanUsage(reader, ctx, acc, windows))
  await Promise.all(tasks)
}
