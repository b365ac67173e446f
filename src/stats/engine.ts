import { listValue } from '@duckdb/node-api'
import { DomainError } from '../core/errors.js'
import { Params } from '../query/expr.js'
import { checkFilterList, opNamesSql, type CallFilter, type CallStore } from '../calls/store.js'
import { priceSpans, type PriceSpan, type Prices } from '../catalog/prices.js'
import { MAX_RANGE_MS, bucketStarts, checkTimezone, chooseGranularity } from './buckets.js'
import { columnsOf, emptyValue, type CallMetric, type Column, type MetricSpec, type UsageMetric } from './metrics.js'
import {
  TOKEN_METRICS,
  TOKEN_NAMES,
  shaped,
  slotMs,
  storedAs,
  tableName,
  timeDim,
  type Rollups,
  type Table,
  type Tier,
  type TokenMetric,
} from './rollups.js'
import { binSql, percentile, percentileOfFlags } from './sketch.js'

const HOUR = 3_600_000
const MINUTE = 60_000
const USAGE_METRICS: UsageMetric[] = [...TOKEN_NAMES, 'input_cost', 'output_cost', 'total_cost']
/** Timestamps SQL can hold: price spans open to ±infinity are clipped to these. */
const MIN_MS = Date.UTC(1900, 0, 1)
const MAX_MS = Date.UTC(2300, 0, 1)

export interface StatsRequest {
  project_id: string
  start: string
  end?: string | null
  granularity?: number | null
  usage_metrics?: MetricSpec<UsageMetric>[] | null
  call_metrics?: MetricSpec<CallMetric>[] | null
  filter?: CallFilter | null
  timezone?: string | null
}

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

/** A part of a range answered by one tier: whole slots (hours or minutes) with their buckets, or windows of the call tier. */
type Piece = { tier: Tier; slots: [number, number][] } | { tier: 'call'; windows: [number, number][] }

/** How a request is answered: by the rollups (plus scans of partial hours), or by one scan. */
export type StatsPath = 'rollup' | 'scan'

class Accumulator {
  readonly calls = new Map<number, CallAcc>()
  readonly usage = new Map<number, Map<string, UsageAcc>>()
  /** A subtracted row touched a minimum or maximum these buckets report (see Rollups). */
  dirty = false
  path: StatsPath = 'scan'

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
}

/**
 * A filter the rollups can answer, as conditions on their dimension columns, and the tier holding
 * them; null when they cannot (trace, call, parent, thread or turn ids, refs).
 */
function dimFilter(f: CallFilter | null | undefined, params: Params): { conds: string[]; tier: Tier } | null {
  const conds: string[] = []
  if (!f) return { conds, tier: 'project' }
  const answerable = new Set(['op_names', 'trace_roots_only', 'svc_user_ids', 'wb_user_ids', 'svc_run_ids', 'wb_run_ids'])
  for (const [k, v] of Object.entries(f)) if (v !== null && v !== undefined && !answerable.has(k)) return null
  if (f.op_names) conds.push(opNamesSql(f.op_names, params))
  if (f.trace_roots_only) conds.push('is_root')
  let tier: Tier = f.op_names ? 'op' : 'project'
  for (const [col, a, b] of [
    ['user_id', f.svc_user_ids, f.wb_user_ids],
    ['run_id', f.svc_run_ids, f.wb_run_ids],
  ] as const) {
    if (!a && !b) continue
    tier = 'user'
    const l = [...new Set([...(a ?? []), ...(b ?? [])])]
    checkFilterList(col === 'user_id' ? 'svc_user_ids' : 'svc_run_ids', l)
    conds.push(l.length ? `list_contains(${params.add(listValue(l))}, ${col})` : 'false')
  }
  return { conds, tier }
}

const ts = (ms: number) => `make_timestamp(${Math.round(ms) * 1000})`
const iso = (ms: number) => new Date(ms).toISOString()

/**
 * `/calls/stats`, `/calls/query_stats` counts: answered from the rollups where they can (see
 * Rollups), combined with the fresh parts and with scans of partial hours; by a scan of the merged
 * calls otherwise (filters on trace, call, parent, thread or turn ids or refs; boundaries off whole
 * UTC hours; usage percentiles; total_cost min/max).
 */
export class CallStats {
  constructor(
    private readonly store: CallStore,
    private readonly rollups: Rollups | null,
    private readonly prices: Prices,
  ) {}

  async stats(req: StatsRequest, now = Date.now()): Promise<Record<string, unknown>> {
    return (await this.run(req, now)).result
  }

  /** The response, and how it was computed (sent as the `x-weft-stats-path` header). */
  async run(req: StatsRequest, now = Date.now()): Promise<{ result: Record<string, unknown>; path: StatsPath }> {
    const start = Date.parse(req.start)
    const end = req.end ? Date.parse(req.end) : now
    if (!Number.isFinite(start)) throw new DomainError(400, 'start is not a timestamp')
    if (!Number.isFinite(end)) throw new DomainError(400, 'end is not a timestamp')
    if (end <= start) throw new DomainError(400, 'start must be before end')
    if (end - start > MAX_RANGE_MS) throw new DomainError(422, 'The range from start to end may not exceed 31 days')
    const tz = req.timezone ?? 'UTC'
    checkTimezone(tz)
    const granularity = chooseGranularity(start, end, req.granularity)
    const starts = bucketStarts(start, end, granularity, tz)
    const callCols = columnsOf(req.call_metrics)
    const usageCols = columnsOf(req.usage_metrics)
    const spans = usageCols.some((c) => c.metric.endsWith('_cost'))
      ? priceSpans(await this.prices.forProject(req.project_id), req.project_id)
      : []

    let acc = await this.gather(req, start, end, starts, callCols, usageCols, spans)
    if (acc.dirty && [...callCols, ...usageCols].some((c) => c.agg === 'min' || c.agg === 'max')) {
      acc = await this.gather(req, start, end, starts, callCols, usageCols, spans, true)
    }
    const result = {
      start: iso(start),
      end: iso(end),
      granularity,
      timezone: tz,
      usage_buckets: usageCols.length ? this.usageBuckets(acc, starts, usageCols) : [],
      call_buckets: callCols.length ? this.callBuckets(acc, starts, callCols) : [],
    }
    return { result, path: acc.path }
  }

  private async gather(
    req: StatsRequest,
    start: number,
    end: number,
    starts: number[],
    callCols: Column<CallMetric>[],
    usageCols: Column<UsageMetric>[],
    spans: PriceSpan[],
    forceScan = false,
  ): Promise<Accumulator> {
    const acc = new Accumulator()
    const dims = dimFilter(req.filter, new Params())
    const rollupOk =
      !forceScan &&
      this.rollups?.ready === true &&
      dims !== null &&
      !usageCols.some((c) => c.p !== undefined || (c.metric === 'total_cost' && (c.agg === 'min' || c.agg === 'max')))
    if (!rollupOk) {
      await this.scan(acc, req, [[start, end]], starts, callCols, usageCols, spans)
      return acc
    }
    acc.path = 'rollup'
    const noHours = dims.tier === 'user' && callCols.some((c) => c.p !== undefined && c.metric === 'latency_ms')
    const { hours, minutes, windows } = split(start, end, starts, spans, { hours: !noHours, minutes: dims.tier === 'project' })
    const pieces: Piece[] = [
      ...(hours.length ? [{ tier: dims.tier, slots: hours }] : []),
      ...(minutes.length ? [{ tier: 'minute' as const, slots: minutes }] : []),
      ...(windows.length ? [{ tier: 'call' as const, windows }] : []),
    ]
    await this.fromPieces(acc, req, pieces, starts, callCols, usageCols, spans)
    return acc
  }

  /** Shared SQL: the bucket boundaries, and the price spans (`sp`) when costs are asked for. */
  private ctes(params: Params, starts: number[], spans: PriceSpan[]): string {
    const b = `b AS (SELECT make_timestamp(unnest(${params.add(listValue(starts.map((t) => BigInt(t) * 1000n)))})::BIGINT) AS ts)`
    if (!spans.length)
      return `WITH ${b}, sp AS (SELECT NULL::VARCHAR AS llm, NULL::TIMESTAMP AS f, NULL::TIMESTAMP AS t, NULL::DOUBLE AS pc, NULL::DOUBLE AS cc WHERE false)`
    const col = <T>(f: (s: PriceSpan) => T) => params.add(listValue(spans.map(f) as never[]))
    return `WITH ${b}, sp AS (SELECT unnest(${col((s) => s.llm_id)}) AS llm,
      make_timestamp(unnest(${col((s) => BigInt(Math.max(MIN_MS, s.from_ms)) * 1000n)})::BIGINT) AS f,
      make_timestamp(unnest(${col((s) => BigInt(Math.min(MAX_MS, s.to_ms)) * 1000n)})::BIGINT) AS t,
      unnest(${col((s) => s.row.prompt_token_cost)})::DOUBLE AS pc, unnest(${col((s) => s.row.completion_token_cost)})::DOUBLE AS cc)`
  }

  /**
   * Scans the merged calls started in the windows, one window at a time: the ids of the calls
   * starting in a window bound its merge, so with time-ordered ids (UUIDv7, as the SDKs make them)
   * the segments' id statistics skip nearly every row group. Other ids are only slower.
   */
  private async scan(
    acc: Accumulator,
    req: StatsRequest,
    windows: [number, number][],
    starts: number[],
    callCols: Column<CallMetric>[],
    usageCols: Column<UsageMetric>[],
    spans: PriceSpan[],
  ): Promise<void> {
    const inWindow = (col: string, [lo, hi]: [number, number]) => `(${col} >= ${ts(lo)} AND ${col} < ${ts(hi)})`
    const rp = new Params()
    const p = rp.add(req.project_id)
    const ranges = await this.store.rows(
      windows
        .map(
          (w, i) =>
            `SELECT ${i} AS w, min(id) AS lo, max(id) AS hi FROM all_parts WHERE project_id = ${p} AND ${inWindow('started_at', w)}`,
        )
        .join(' UNION ALL '),
      rp,
    )
    await Promise.all(
      ranges
        .filter((r) => r.lo !== null)
        .map((r) => this.scanWindow(acc, req, windows[Number(r.w)]!, String(r.lo), String(r.hi), starts, callCols, usageCols, spans)),
    )
  }

  /**
   * One window, one merge: the calls starting in it are merged once (a materialised CTE) and both
   * the call groups (with latency bins) and the usage groups are computed from it, returned
   * together (`kind` c or u; UNION ALL BY NAME fills the other side's columns with NULL).
   */
  private async scanWindow(
    acc: Accumulator,
    req: StatsRequest,
    window: [number, number],
    loId: string,
    hiId: string,
    starts: number[],
    callCols: Column<CallMetric>[],
    usageCols: Column<UsageMetric>[],
    spans: PriceSpan[],
  ): Promise<void> {
    const [wlo, whi] = window
    const params = new Params()
    const ctes = this.ctes(params, starts, usageCols.length ? spans : [])
    const ids = `id >= ${params.add(loId)} AND id <= ${params.add(hiId)}`
    const only = ['started_at', ...(callCols.length ? ['ended_at', 'exception'] : []), ...(usageCols.length ? ['usage'] : [])]
    const rel = this.store.relation(req.project_id, { filter: req.filter }, params, {
      where: [`m.started_at >= ${ts(wlo)} AND m.started_at < ${ts(whi)}`],
      parts: [ids],
      only,
    })
    const metricSql = [...TOKEN_NAMES, 'input_cost', 'output_cost', 'total_cost']
    const pcts = usageCols.filter((c) => c.p !== undefined)
    const parts: string[] = []
    if (callCols.length) {
      parts.push(`SELECT 'c' AS kind, bucket, k, grouping(k) AS g, count(*) AS n, count(lat) AS lat_n, coalesce(sum(lat), 0)::BIGINT AS lat_sum, min(lat) AS lat_min, max(lat) AS lat_max, sum(err)::BIGINT AS err
        FROM (SELECT epoch_ms(b.ts) AS bucket, ${binSql('lat')} AS k, lat, err FROM
          (SELECT t, epoch_ms(ended_at) - epoch_ms(t) AS lat, (exception IS NOT NULL)::INTEGER AS err FROM mm) c ASOF JOIN b ON c.t >= b.ts)
        GROUP BY GROUPING SETS ((bucket), (bucket, k))`)
    }
    if (usageCols.length) {
      parts.push(`SELECT 'u' AS kind, epoch_ms(b.ts) AS bucket, model, count(*) AS n,
          ${metricSql.map((m) => `coalesce(sum(${m}), 0)::DOUBLE AS ${m}_sum, count(${m}) AS ${m}_n, min(${m})::DOUBLE AS ${m}_min, max(${m})::DOUBLE AS ${m}_max`).join(',\n          ')}
          ${pcts.map((c, i) => `, quantile_cont(${c.metric}, ${c.p! / 100}) AS p${i}`).join('')}
        FROM (SELECT v.*, input_tokens * sp.pc AS input_cost, output_tokens * sp.cc AS output_cost, input_tokens * sp.pc + output_tokens * sp.cc AS total_cost
          FROM (SELECT t, u.model AS model, ${TOKEN_NAMES.map((m) => `(${TOKEN_METRICS[m]})::BIGINT AS ${m}`).join(', ')}
            FROM (SELECT t, unnest(usage) AS u FROM mm) WHERE u.model IS NOT NULL) v
          LEFT JOIN sp ON sp.llm = v.model AND v.t >= sp.f AND v.t < sp.t) w
        ASOF JOIN b ON w.t >= b.ts GROUP BY 2, 3`)
    }
    const cols = ['m.started_at AS t', ...(callCols.length ? ['m.ended_at', 'm.exception'] : []), ...(usageCols.length ? ['m.usage'] : [])]
    const rows = await this.store.rows(
      `${ctes}, mm AS MATERIALIZED (SELECT ${cols.join(', ')} FROM ${rel}) ${parts.join(' UNION ALL BY NAME ')}`,
      params,
    )
    for (const r of rows) {
      if (r.kind === 'c') {
        const a = acc.call(Number(r.bucket))
        if (Number(r.g) === 1) {
          a.n += Number(r.n)
          a.err += Number(r.err)
          addAgg(a.lat, r.lat_sum, r.lat_n, r.lat_min, r.lat_max)
        } else if (r.k !== null && Number(r.lat_n) > 0) a.bins.set(Number(r.k), (a.bins.get(Number(r.k)) ?? 0) + Number(r.lat_n))
      } else {
        const a = acc.use(Number(r.bucket), String(r.model))
        a.n += Number(r.n)
        for (const m of metricSql) addAgg(a.m[m]!, r[`${m}_sum`], r[`${m}_n`], r[`${m}_min`], r[`${m}_max`])
        pcts.forEach((c, i) => a.pct.set(c.name, r[`p${i}`] === null ? null : Number(r[`p${i}`])))
      }
    }
  }

  /**
   * The rows of one tier's `table` (and the fresh parts' correction) inside a piece, as a SELECT
   * with the table's columns, `bucket` and `at` (the row's time: its slot's start, or its call's
   * start). An aggregated tier's slots (whole hours or minutes) map to their bucket through a list
   * made here (an equality join, not a range join), added to `withs`; the call tier's rows by start time.
   */
  private pieceRows(
    piece: Piece,
    table: Table,
    p: string,
    conds: string[],
    params: Params,
    starts: number[],
    withs: string[],
    tokens: readonly TokenMetric[],
  ): string {
    const tier = piece.tier
    const time = timeDim(tier)
    const fresh = this.rollups!.fresh(table, tier, p)
    const t = tableName(storedAs(table, tier), tier)
    if ('slots' in piece) {
      const unit = slotMs(tier as Exclude<Tier, 'call'>)
      // Runs of adjacent slots, each read by its own range (the minutes at both ends of a day are
      // ~1,400 minutes apart: one range over both would read every minute between). Many runs (buckets
      // off whole hours): one range over all.
      const runs: [number, number][] = []
      for (const [h] of piece.slots) {
        const last = runs[runs.length - 1]
        if (last && last[1] === h) last[1] = h + unit
        else runs.push([h, h + unit])
      }
      const ranges = runs.length <= 8 ? runs : [[runs[0]![0], runs[runs.length - 1]![1]] as [number, number]]
      const where = ([lo, hi]: [number, number]) =>
        [`project_id = ${p}`, `${time} >= ${ts(lo)}`, `${time} < ${ts(hi)}`, ...conds].join(' AND ')
      const branches = ranges.map((r) => `SELECT * FROM ${t} WHERE ${where(r)}`)
      if (fresh) branches.push(`SELECT * FROM (${fresh}) WHERE ${ranges.map((r) => `(${where(r)})`).join(' OR ')}`)
      const sb = `sb${withs.length}`
      withs.push(
        `${sb} AS (SELECT make_timestamp(unnest(${params.add(listValue(piece.slots.map(([h]) => BigInt(h) * 1000n)))}::BIGINT[])) AS ${time}, unnest(${params.add(listValue(piece.slots.map(([, b]) => BigInt(b))))}::BIGINT[]) AS bucket)`,
      )
      return `SELECT *, ${time} AS at FROM (${branches.join(' UNION ALL ')}) JOIN ${sb} USING (${time})`
    }
    // One branch per window: each gets its own range filter, which the table's zone maps prune by.
    const where = (w: [number, number]) => [`project_id = ${p}`, `t >= ${ts(w[0])}`, `t < ${ts(w[1])}`, ...conds].join(' AND ')
    const any = (ws: [number, number][]) => `(${ws.map((w) => `(${where(w)})`).join(' OR ')})`
    // Few pieces each inside one bucket (the ends of a range, mostly): the bucket is a constant per
    // branch. Many (buckets off whole hours): rows find their bucket by time (an ASOF join).
    const cut = inBuckets(piece.windows, starts)
    if (cut.length <= 8) {
      const branches = cut.map(
        ([lo, hi, b]) =>
          `SELECT ${b}::BIGINT AS bucket, *, t AS at FROM (${shaped(`SELECT * FROM ${t} WHERE ${where([lo, hi])}`, table, tier, tokens)})`,
      )
      if (fresh) {
        const cases = cut.map(([lo, hi, b]) => `WHEN t >= ${ts(lo)} AND t < ${ts(hi)} THEN ${b}::BIGINT`).join(' ')
        branches.push(
          `SELECT CASE ${cases} END AS bucket, *, t AS at FROM (${shaped(`SELECT * FROM (${fresh}) WHERE ${any(cut.map(([lo, hi]) => [lo, hi]))}`, table, tier, tokens)})`,
        )
      }
      return branches.join(' UNION ALL ')
    }
    const branches = piece.windows.map((w) => `SELECT * FROM ${t} WHERE ${where(w)}`)
    if (fresh) branches.push(`SELECT * FROM (${fresh}) WHERE ${any(piece.windows)}`)
    return `SELECT epoch_ms(b.ts) AS bucket, r.*, r.t AS at FROM (${shaped(branches.join(' UNION ALL '), table, tier, tokens)}) r ASOF JOIN b ON r.t >= b.ts`
  }

  /**
   * The pieces' rows of every table asked for, added into the request's buckets: one statement per
   * table over all the pieces (each statement costs milliseconds to plan and start whatever it reads).
   */
  private async fromPieces(
    acc: Accumulator,
    req: StatsRequest,
    pieces: Piece[],
    starts: number[],
    callCols: Column<CallMetric>[],
    usageCols: Column<UsageMetric>[],
    spans: PriceSpan[],
  ): Promise<void> {
    if (!pieces.length) return
    /** The WITH list (bucket starts b, price spans sp, slot lists) and the pieces' rows of `table` as `src`. */
    const rows = (table: Table, params: Params, withSpans: boolean, tokens: readonly TokenMetric[] = []) => {
      const ctes = this.ctes(params, starts, withSpans ? spans : [])
      const { conds } = dimFilter(req.filter, params)!
      const p = params.add(req.project_id)
      const withs: string[] = []
      const parts = pieces.map((piece) => `SELECT * FROM (${this.pieceRows(piece, table, p, conds, params, starts, withs, tokens)})`)
      return `${ctes}${withs.map((w) => `, ${w}`).join('')}, src AS (${parts.join(' UNION ALL BY NAME ')})`
    }
    const tasks: Promise<void>[] = []
    if (callCols.length)
      tasks.push(
        (async () => {
          const params = new Params()
          const got = await this.store.rows(
            `${rows('calls', params, false)}
        SELECT bucket, sum(n)::BIGINT AS n, sum(err)::BIGINT AS err, sum(lat_sum)::BIGINT AS lat_sum, sum(lat_n)::BIGINT AS lat_n,
          min(lat_min) AS lat_min, max(lat_max) AS lat_max, bool_or(dirty) AS dirty FROM src GROUP BY bucket`,
            params,
          )
          for (const r of got) {
            const a = acc.call(Number(r.bucket))
            a.n += Number(r.n)
            a.err += Number(r.err)
            addAgg(a.lat, r.lat_sum, r.lat_n, r.lat_min, r.lat_max)
            if (r.dirty) acc.dirty = true
          }
        })(),
      )
    if (callCols.some((c) => c.metric === 'latency_ms' && c.p !== undefined))
      tasks.push(
        (async () => {
          const params = new Params()
          const bins = await this.store.rows(
            `${rows('latency', params, false)} SELECT bucket, k, sum(n)::BIGINT AS n FROM src GROUP BY bucket, k`,
            params,
          )
          for (const r of bins) {
            const a = acc.call(Number(r.bucket))
            a.bins.set(Number(r.k), (a.bins.get(Number(r.k)) ?? 0) + Number(r.n))
          }
        })(),
      )
    if (usageCols.length)
      tasks.push(
        (async () => {
          const params = new Params()
          const cost = (name: string, tokens: string, price: string) =>
            `sum(${tokens}_sum * ${price}) AS ${name}_sum, sum(CASE WHEN ${price} IS NOT NULL THEN ${tokens}_n END)::BIGINT AS ${name}_n, min(${tokens}_min * ${price}) AS ${name}_min, max(${tokens}_max * ${price}) AS ${name}_max`
          // Only the metrics asked for (costs need the input and output tokens): a shorter query to plan and run.
          const asked = new Set(usageCols.map((c) => c.metric))
          const costs = ['input_cost', 'output_cost', 'total_cost'].some((m) => asked.has(m as UsageMetric))
          const tokens = TOKEN_NAMES.filter((m) => asked.has(m) || (costs && (m === 'input_tokens' || m === 'output_tokens')))
          const aggs = [
            'sum(n)::BIGINT AS n',
            ...tokens.map(
              (m) =>
                `sum(${m}_sum)::DOUBLE AS ${m}_sum, sum(${m}_n)::BIGINT AS ${m}_n, min(${m}_min)::DOUBLE AS ${m}_min, max(${m}_max)::DOUBLE AS ${m}_max`,
            ),
            ...(costs
              ? [
                  cost('input_cost', 'input_tokens', 'pc'),
                  cost('output_cost', 'output_tokens', 'cc'),
                  'sum(input_tokens_sum * pc + output_tokens_sum * cc)::DOUBLE AS total_cost_sum, sum(CASE WHEN pc IS NOT NULL AND cc IS NOT NULL THEN n END)::BIGINT AS total_cost_n',
                ]
              : []),
            'bool_or(dirty) AS dirty',
          ]
          // The price of a row is the one in effect at its time (an aggregated tier's rows: their slot's; no price changes inside one).
          const got = await this.store.rows(
            `${rows('usage', params, costs, tokens)},
        y AS (${costs ? `SELECT src.*, sp.pc, sp.cc FROM src LEFT JOIN sp ON sp.llm = src.model AND src.at >= sp.f AND src.at < sp.t` : 'SELECT * FROM src'})
        SELECT bucket, model, ${aggs.join(', ')} FROM y GROUP BY bucket, model`,
            params,
          )
          for (const r of got) {
            const a = acc.use(Number(r.bucket), String(r.model))
            a.n += Number(r.n)
            for (const m of USAGE_METRICS) addAgg(a.m[m]!, r[`${m}_sum`], r[`${m}_n`], r[`${m}_min`], r[`${m}_max`])
            if (r.dirty) acc.dirty = true
          }
        })(),
      )
    await Promise.all(tasks)
  }

  private callBuckets(acc: Accumulator, starts: number[], cols: Column<CallMetric>[]): Record<string, unknown>[] {
    return starts.map((t) => {
      const a = acc.calls.get(t)
      const row: Record<string, unknown> = { timestamp: iso(t) }
      for (const c of cols) row[c.name] = a && a.n > 0 ? callValue(a, c) : emptyValue(c)
      row.count = a?.n ?? 0
      return row
    })
  }

  private usageBuckets(acc: Accumulator, starts: number[], cols: Column<UsageMetric>[]): Record<string, unknown>[] {
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

  /**
   * The number of live calls matching an answerable filter, from the rollups; null when the
   * rollups cannot say (not built yet, or a filter they do not hold).
   */
  async count(project: string, filter: CallFilter | null | undefined): Promise<number | null> {
    if (!this.rollups?.ready) return null
    const params = new Params()
    const dims = dimFilter(filter, params)
    if (dims === null) return null
    const conds = dims.conds
    const p = params.add(project)
    const fresh = this.rollups.fresh('calls', dims.tier, p)
    const where = conds.length ? ` WHERE ${conds.join(' AND ')}` : ''
    const rows = await this.store.rows(
      `SELECT coalesce(sum(n), 0)::BIGINT AS n FROM (SELECT * FROM ${tableName('calls', dims.tier)} WHERE project_id = ${p}${fresh ? ` UNION ALL ${fresh}` : ''})${where}`,
      params,
    )
    return Number(rows[0]!.n)
  }
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
