import { DomainError } from '../core/errors.js'
import { Params } from '../query/expr.js'
import { priceSpans, type PriceRow, type PriceSpan } from '../catalog/prices.js'
import type { CallStatsReq } from '../schemas/calls.js'
import { MAX_RANGE_MS, bucketStarts, checkTimezone, chooseGranularity } from './buckets.js'
import { dimFilter } from './dims.js'
import { columnsOf, type CallMetric, type Column, type UsageMetric } from './metrics.js'
import type { Tier } from './rollups.js'

const HOUR = 3_600_000
const MINUTE = 60_000
/** Past this many minute slots and call-tier windows, a request is answered by one scan instead. */
const MAX_PIECES = 4_000

/** The range of a request, checked, with its defaults resolved (end: now; time zone: UTC; granularity: from the span). */
export interface StatsRange {
  start: number
  end: number
  granularity: number
  timezone: string
  /** The buckets' starts (ms), in order. */
  starts: number[]
}

/**
 * The request checked, its defaults resolved, its metrics parsed, and the price spans its cost metrics need
 * (prices read only then): what every backend's statistics start from.
 */
export async function statsContext(
  req: CallStatsReq,
  now: number,
  prices: { forProject(project: string): Promise<readonly PriceRow[]> },
): Promise<StatsContext> {
  const range = resolveRange(req, now)
  const callCols = columnsOf(req.call_metrics)
  const usageCols = columnsOf(req.usage_metrics)
  const spans = usageCols.some((c) => c.metric.endsWith('_cost')) ? priceSpans(await prices.forProject(req.project_id), req.project_id) : []
  return { project_id: req.project_id, filter: req.filter, ...range, callCols, usageCols, spans }
}

/**
 * A request resolved: its range, its metrics as output columns, and the project's price spans (when
 * costs are asked for). What planning, the SQL and the assembly of buckets read.
 */
export type StatsContext = Pick<CallStatsReq, 'project_id' | 'filter'> &
  StatsRange & {
    callCols: Column<CallMetric>[]
    usageCols: Column<UsageMetric>[]
    spans: PriceSpan[]
  }

export function resolveRange(req: CallStatsReq, now: number): StatsRange {
  const start = Date.parse(req.start)
  const end = req.end ? Date.parse(req.end) : now
  if (!Number.isFinite(start)) throw new DomainError(400, 'start is not a timestamp')
  if (!Number.isFinite(end)) throw new DomainError(400, 'end is not a timestamp')
  if (end <= start) throw new DomainError(400, 'start must be before end')
  if (end - start > MAX_RANGE_MS) throw new DomainError(422, 'The range from start to end may not exceed 31 days')
  const timezone = req.timezone ?? 'UTC'
  checkTimezone(timezone)
  const granularity = chooseGranularity(start, end, req.granularity)
  return { start, end, granularity, timezone, starts: bucketStarts(start, end, granularity, timezone) }
}

/** A part of a range answered by one tier: whole slots (hours or minutes) with their buckets, or windows of the call tier. */
export type Piece = { tier: Tier; slots: [number, number][] } | { tier: 'call'; windows: [number, number][] }

/** How a request is answered: by the rollups (plus scans of partial hours), or by one scan. */
export type StatsPath = 'rollup' | 'scan'

/** Which tier answers which part of the range: scans of merged calls in windows, or the rollups' pieces. */
export type StatsPlan = { path: 'scan'; windows: [number, number][] } | { path: 'rollup'; pieces: Piece[] }

/**
 * The plan of a request. The rollups answer when they are built and hold the filter's dimensions,
 * and no usage percentile or total_cost min/max is asked for (those need the calls); `forceScan`
 * when a subtracted row touched a reported minimum or maximum. Percentiles of latency under a
 * user/run filter have no hour tier: the call tier answers the whole range then.
 */
export function planStats(ctx: StatsContext, rollupsReady: boolean, forceScan = false): StatsPlan {
  const dims = dimFilter(ctx.filter, new Params())
  const rollupOk =
    !forceScan &&
    rollupsReady &&
    dims !== null &&
    !ctx.usageCols.some((c) => c.p !== undefined || (c.metric === 'total_cost' && (c.agg === 'min' || c.agg === 'max')))
  if (!rollupOk) return { path: 'scan', windows: [[ctx.start, ctx.end]] }
  const noHours = dims.tier === 'user' && ctx.callCols.some((c) => c.p !== undefined && c.metric === 'latency_ms')
  const { hours, minutes, windows } = split(ctx.start, ctx.end, ctx.starts, ctx.spans, {
    hours: !noHours,
    minutes: dims.tier === 'project',
  })
  // Buckets that cut most minutes (a granularity of 260 s over 30 days) leave tens of thousands of slots and
  // windows; one statement over that many ranges costs far more to plan and run than one scan of the range.
  if (minutes.length + windows.length > MAX_PIECES) return { path: 'scan', windows: [[ctx.start, ctx.end]] }
  const pieces: Piece[] = [
    ...(hours.length ? [{ tier: dims.tier, slots: hours }] : []),
    ...(minutes.length ? [{ tier: 'minute' as const, slots: minutes }] : []),
    ...(windows.length ? [{ tier: 'call' as const, windows }] : []),
  ]
  return { path: 'rollup', pieces }
}

/**
 * Splits [start, end) into the slots the aggregated tiers answer whole — UTC hours, then (`minutes`)
 * UTC minutes of what is left — each inside the range and inside one bucket, with no price change
 * inside, each with its bucket; and windows (the rest, merged where adjacent) for the call tier.
 * `hours: false`: everything goes to the call tier.
 */
export function split(
  start: number,
  end: number,
  starts: readonly number[],
  spans: readonly PriceSpan[],
  opts: { hours: boolean; minutes: boolean },
): { hours: [number, number][]; minutes: [number, number][]; windows: [number, number][] } {
  const hours: [number, number][] = []
  const minutes: [number, number][] = []
  if (!opts.hours) return { hours, minutes, windows: [[start, end]] }
  const rest = slotsOf([[start, end]], HOUR, starts, spans, hours)
  return { hours, minutes, windows: opts.minutes ? slotsOf(rest, MINUTE, starts, spans, minutes) : rest }
}

/** Slots of `unit` ms inside the windows (appended to `slots` with their bucket start); returns what they leave. */
function slotsOf(
  windows: readonly [number, number][],
  unit: number,
  starts: readonly number[],
  spans: readonly PriceSpan[],
  slots: [number, number][],
): [number, number][] {
  const edges = new Set<number>()
  for (const s of spans) for (const e of [s.from_ms, s.to_ms]) if (e % unit !== 0) edges.add(Math.floor(e / unit) * unit)
  const rest: [number, number][] = []
  for (const [lo, hi] of windows) {
    let at = lo
    for (let h = Math.ceil(lo / unit) * unit; h + unit <= hi; h += unit) {
      const b = bucketAt(starts, h)
      if (b < 0 || (b + 1 < starts.length && starts[b + 1]! < h + unit) || edges.has(h)) continue
      if (at < h) rest.push([at, h])
      slots.push([h, starts[b]!])
      at = h + unit
    }
    if (at < hi) rest.push([at, hi])
  }
  return rest
}

/** The index of the last bucket starting at or before t; -1 when none does. */
function bucketAt(starts: readonly number[], t: number): number {
  let lo = 0
  let hi = starts.length
  while (lo < hi) {
    const mid = (lo + hi) >> 1
    if (starts[mid]! <= t) lo = mid + 1
    else hi = mid
  }
  return lo - 1
}

/** The windows cut at bucket starts: [lo, hi, bucket start] pieces, each inside one bucket. */
export function inBuckets(windows: readonly [number, number][], starts: readonly number[]): [number, number, number][] {
  const out: [number, number, number][] = []
  let bi = 0
  for (const [lo, hi] of windows) {
    let at = lo
    while (at < hi) {
      while (bi + 1 < starts.length && starts[bi + 1]! <= at) bi++
      const next = bi + 1 < starts.length ? Math.min(hi, starts[bi + 1]!) : hi
      out.push([at, next, starts[bi]!])
      at = next
    }
  }
  return out
}
