import { USAGE_METRICS } from '../schemas/calls.js'
import { emptyValue, type CallMetric, type Column, type UsageMetric } from './metrics.js'
import type { StatsContext } from './plan.js'
import { percentile, percentileOfFlags } from './sketch.js'

type Row = Record<string, unknown>

interface Agg {
  sum: number
  n: number
  min: number | null
  max: number | null
}
interface CallAcc {
  n: number
  err: number
  lat: Agg
  bins: Map<number, number>
}
interface UsageAcc {
  n: number
  m: Record<string, Agg>
  /** Percentiles computed exactly by a scan, by column name. */
  pct: Map<string, number | null>
}

const newAgg = (): Agg => ({ sum: 0, n: 0, min: null, max: null })
function addAgg(a: Agg, sum: unknown, n: unknown, min: unknown, max: unknown): void {
  a.sum += Number(sum ?? 0)
  a.n += Number(n ?? 0)
  if (min !== null && min !== undefined) a.min = a.min === null ? Number(min) : Math.min(a.min, Number(min))
  if (max !== null && max !== undefined) a.max = a.max === null ? Number(max) : Math.max(a.max, Number(max))
}

const iso = (ms: number) => new Date(ms).toISOString()

/** The rows of every statement of a request, added up per bucket (and model). */
export class Accumulator {
  readonly calls = new Map<number, CallAcc>()
  readonly usage = new Map<number, Map<string, UsageAcc>>()
  /** A subtracted row touched a minimum or maximum these buckets report (see Rollups). */
  dirty = false

  call(bucket: number): CallAcc {
    let a = this.calls.get(bucket)
    if (!a) this.calls.set(bucket, (a = { n: 0, err: 0, lat: newAgg(), bins: new Map() }))
    return a
  }

  use(bucket: number, model: string): UsageAcc {
    let b = this.usage.get(bucket)
    if (!b) this.usage.set(bucket, (b = new Map()))
    let a = b.get(model)
    if (!a) b.set(model, (a = { n: 0, m: Object.fromEntries(USAGE_METRICS.map((m) => [m, newAgg()])), pct: new Map() }))
    return a
  }

  /** A scan's rows (sql.ts scanWindowStatement): call groups and bins (`kind` c), usage groups (`kind` u). */
  addScan(rows: Row[], pcts: Column<UsageMetric>[]): void {
    for (const r of rows) {
      if (r.kind === 'c') {
        const a = this.call(Number(r.bucket))
        if (Number(r.g) === 1) {
          a.n += Number(r.n)
          a.err += Number(r.err)
          addAgg(a.lat, r.lat_sum, r.lat_n, r.lat_min, r.lat_max)
        } else if (r.k !== null && Number(r.lat_n) > 0) a.bins.set(Number(r.k), (a.bins.get(Number(r.k)) ?? 0) + Number(r.lat_n))
      } else {
        const a = this.use(Number(r.bucket), String(r.model))
        a.n += Number(r.n)
        for (const m of USAGE_METRICS) addAgg(a.m[m]!, r[`${m}_sum`], r[`${m}_n`], r[`${m}_min`], r[`${m}_max`])
        pcts.forEach((c, i) => a.pct.set(c.name, r[`p${i}`] === null ? null : Number(r[`p${i}`])))
      }
    }
  }

  /** The rollups' call rows (sql.ts callsStatement). */
  addCalls(rows: Row[]): void {
    for (const r of rows) {
      const a = this.call(Number(r.bucket))
      a.n += Number(r.n)
      a.err += Number(r.err)
      addAgg(a.lat, r.lat_sum, r.lat_n, r.lat_min, r.lat_max)
      if (r.dirty) this.dirty = true
    }
  }

  /** The rollups' latency bins (sql.ts latencyStatement). */
  addBins(rows: Row[]): void {
    for (const r of rows) {
      const a = this.call(Number(r.bucket))
      a.bins.set(Number(r.k), (a.bins.get(Number(r.k)) ?? 0) + Number(r.n))
    }
  }

  /** Another accumulator's buckets (a request's statements gathered apart), taken over as they are: this one is empty. */
  absorb(other: Accumulator): void {
    for (const [k, v] of other.calls) this.calls.set(k, v)
    for (const [k, v] of other.usage) this.usage.set(k, v)
    this.dirty = other.dirty
  }

  /** One statement's rows of every table (sql.ts correctionStatement): rows of kind c, l and u, as the three statements'. */
  addKinds(rows: Row[]): void {
    this.addCalls(rows.filter((r) => r.kind === 'c'))
    this.addBins(rows.filter((r) => r.kind === 'l'))
    this.addUsage(rows.filter((r) => r.kind === 'u'))
  }

  /** The rollups' usage rows (sql.ts usageStatement). */
  addUsage(rows: Row[]): void {
    for (const r of rows) {
      const a = this.use(Number(r.bucket), String(r.model))
      a.n += Number(r.n)
      for (const m of USAGE_METRICS) addAgg(a.m[m]!, r[`${m}_sum`], r[`${m}_n`], r[`${m}_min`], r[`${m}_max`])
      if (r.dirty) this.dirty = true
    }
  }
}

/** The response: every bucket of the range, usage buckets for every model seen. */
export function assemble(ctx: StatsContext, acc: Accumulator): Record<string, unknown> {
  return {
    start: iso(ctx.start),
    end: iso(ctx.end),
    granularity: ctx.granularity,
    timezone: ctx.timezone,
    usage_buckets: ctx.usageCols.length ? usageBuckets(acc, ctx.starts, ctx.usageCols) : [],
    call_buckets: ctx.callCols.length ? callBuckets(acc, ctx.starts, ctx.callCols) : [],
  }
}

function callBuckets(acc: Accumulator, starts: number[], cols: Column<CallMetric>[]): Record<string, unknown>[] {
  return starts.map((t) => {
    const a = acc.calls.get(t)
    const row: Record<string, unknown> = { timestamp: iso(t) }
    for (const c of cols) row[c.name] = a && a.n > 0 ? callValue(a, c) : emptyValue(c)
    row.count = a?.n ?? 0
    return row
  })
}

function usageBuckets(acc: Accumulator, starts: number[], cols: Column<UsageMetric>[]): Record<string, unknown>[] {
  const seen = new Set<string>()
  for (const b of acc.usage.values()) for (const [model, a] of b) if (a.n > 0) seen.add(model)
  const models = [...seen].sort()
  const out: Record<string, unknown>[] = []
  for (const t of starts) {
    for (const model of models) {
      const a = acc.usage.get(t)?.get(model)
      const row: Record<string, unknown> = { timestamp: iso(t), model }
      for (const c of cols) row[c.name] = a && a.n > 0 ? usageValue(a, c) : emptyValue(c)
      row.count = a && a.n > 0 ? a.n : 0
      out.push(row)
    }
  }
  return out
}

function aggValue(a: Agg, c: Column<string>): number | null {
  switch (c.agg) {
    case 'sum':
      return a.sum
    case 'count':
      return a.n
    case 'avg':
      return a.n ? a.sum / a.n : 0
    case 'min':
      return a.n ? a.min : null
    case 'max':
      return a.n ? a.max : null
    default:
      return null
  }
}

function callValue(a: CallAcc, c: Column<CallMetric>): number | null {
  if (c.metric === 'latency_ms') {
    if (c.p !== undefined) {
      const v = percentile(
        [...a.bins.entries()].sort((x, y) => x[0] - y[0]),
        c.p,
      )
      // The exact extremes are known: an estimate never goes past them (one call's p50 is its latency).
      return v === null || a.lat.min === null || a.lat.max === null ? v : Math.min(a.lat.max, Math.max(a.lat.min, v))
    }
    return aggValue(a.lat, c)
  }
  const ones = c.metric === 'call_count' ? a.n : a.err
  if (c.p !== undefined) return percentileOfFlags(a.n, ones, c.p)
  return aggValue({ sum: ones, n: a.n, min: ones === a.n ? 1 : 0, max: ones > 0 ? 1 : 0 }, c)
}

function usageValue(a: UsageAcc, c: Column<UsageMetric>): number | null {
  if (c.p !== undefined) return a.pct.get(c.name) ?? null
  return aggValue(a.m[c.metric]!, c)
}
