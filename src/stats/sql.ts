import { listValue } from '@duckdb/node-api'
import { Params } from '../query/expr.js'
import type { CallColumn, CallSource, IdSpan } from '../calls/source.js'
import type { PriceSpan } from '../catalog/prices.js'
import { USAGE_METRICS } from '../schemas/calls.js'
import type { CallFilter } from '../schemas/common.js'
import { dimFilter } from './dims.js'
import type { Column, UsageMetric } from './metrics.js'
import { inBuckets, type Piece, type StatsContext } from './plan.js'
import {
  TOKEN_METRICS,
  TOKEN_NAMES,
  correctionColumns,
  slotMs,
  storedAs,
  tableName,
  timeDim,
  type Rollups,
  type Table,
  type Tier,
  type TokenMetric,
} from './rollups.js'
import { TOKEN_PARTS, shaped, shapedSelect, type TokenPart } from './rollups-shape.js'
import { binSql } from './sketch.js'

/** Timestamps SQL can hold: price spans open to ±infinity are clipped to these. */
const MIN_MS = Date.UTC(1900, 0, 1)
const MAX_MS = Date.UTC(2300, 0, 1)

const ts = (ms: number) => `make_timestamp(${Math.round(ms) * 1000})`

/** One statement and its parameters. */
export interface Statement {
  sql: string
  params: Params
}

/** Shared SQL: the bucket boundaries, and the price spans (`sp`) when costs are asked for. */
function ctesSql(params: Params, starts: number[], spans: PriceSpan[]): string {
  const b = `b AS (SELECT make_timestamp(unnest(${params.add(listValue(starts.map((t) => BigInt(t) * 1000n)))})::BIGINT) AS ts)`
  if (!spans.length)
    return `WITH ${b}, sp AS (SELECT NULL::VARCHAR AS llm, NULL::TIMESTAMP AS f, NULL::TIMESTAMP AS t, NULL::DOUBLE AS pc, NULL::DOUBLE AS cc WHERE false)`
  const col = <T>(f: (s: PriceSpan) => T) => params.add(listValue(spans.map(f) as never[]))
  return `WITH ${b}, sp AS (SELECT unnest(${col((s) => s.llm_id)}) AS llm,
      make_timestamp(unnest(${col((s) => BigInt(Math.max(MIN_MS, s.from_ms)) * 1000n)})::BIGINT) AS f,
      make_timestamp(unnest(${col((s) => BigInt(Math.min(MAX_MS, s.to_ms)) * 1000n)})::BIGINT) AS t,
      unnest(${col((s) => s.row.prompt_token_cost)})::DOUBLE AS pc, unnest(${col((s) => s.row.completion_token_cost)})::DOUBLE AS cc)`
}

// ---- Scans of merged calls ----

/** The call groups of a scan (`kind` c): per bucket (`g` 1), and per bucket and latency bin `k`. */
const SCAN_CALLS = `SELECT 'c' AS kind, bucket, k, grouping(k) AS g, count(*) AS n, count(lat) AS lat_n, coalesce(sum(lat), 0)::BIGINT AS lat_sum, min(lat) AS lat_min, max(lat) AS lat_max, sum(err)::BIGINT AS err
        FROM (SELECT epoch_ms(b.ts) AS bucket, ${binSql('lat')} AS k, lat, err FROM
          (SELECT t, epoch_ms(ended_at) - epoch_ms(t) AS lat, (exception IS NOT NULL)::INTEGER AS err FROM mm) c ASOF JOIN b ON c.t >= b.ts)
        GROUP BY GROUPING SETS ((bucket), (bucket, k))`

/** The usage groups of a scan (`kind` u): per bucket and model, with the percentiles asked for as `p0`, `p1`, … */
function scanUsageSql(pcts: Column<UsageMetric>[]): string {
  return `SELECT 'u' AS kind, epoch_ms(b.ts) AS bucket, model, count(*) AS n,
          ${USAGE_METRICS.map((m) => `coalesce(sum(${m}), 0)::DOUBLE AS ${m}_sum, count(${m}) AS ${m}_n, min(${m})::DOUBLE AS ${m}_min, max(${m})::DOUBLE AS ${m}_max`).join(',\n          ')}
          ${pcts.map((c, i) => `, quantile_cont(${c.metric}, ${c.p! / 100}) AS p${i}`).join('')}
        FROM (SELECT v.*, input_tokens * sp.pc AS input_cost, output_tokens * sp.cc AS output_cost, input_tokens * sp.pc + output_tokens * sp.cc AS total_cost
          FROM (SELECT t, u.model AS model, ${TOKEN_NAMES.map((m) => `(${TOKEN_METRICS[m]})::BIGINT AS ${m}`).join(', ')}
            FROM (SELECT t, unnest(usage) AS u FROM mm) WHERE u.model IS NOT NULL) v
          LEFT JOIN sp ON sp.llm = v.model AND v.t >= sp.f AND v.t < sp.t) w
        ASOF JOIN b ON w.t >= b.ts GROUP BY 2, 3`
}

/** The usage columns a scan computes as percentiles (`p{i}` in its rows, in this order). */
export const scanPercentiles = (usageCols: Column<UsageMetric>[]) => usageCols.filter((c) => c.p !== undefined)

/**
 * One window, one merge: the calls starting in it (ids in [lo, hi]) are merged once (a materialised
 * CTE) and both the call groups (with latency bins) and the usage groups are computed from it,
 * returned together (`kind` c or u; UNION ALL BY NAME fills the other side's columns with NULL).
 */
export function scanWindowStatement(
  source: Pick<CallSource, 'matching'>,
  ctx: StatsContext,
  [wlo, whi]: [number, number],
  [loId, hiId]: [string, string],
): Statement {
  const { callCols, usageCols } = ctx
  const params = new Params()
  const ctes = ctesSql(params, ctx.starts, usageCols.length ? ctx.spans : [])
  const columns: CallColumn[] = [
    'started_at',
    ...(callCols.length ? (['ended_at', 'exception'] as const) : []),
    ...(usageCols.length ? (['usage'] as const) : []),
  ]
  const rel = source.matching(ctx.project_id, { filter: ctx.filter }, params, { columns, started: [wlo, whi], ids: [loId, hiId] })
  const parts: string[] = []
  if (callCols.length) parts.push(SCAN_CALLS)
  if (usageCols.length) parts.push(scanUsageSql(scanPercentiles(usageCols)))
  const cols = ['m.started_at AS t', ...(callCols.length ? ['m.ended_at', 'm.exception'] : []), ...(usageCols.length ? ['m.usage'] : [])]
  return { sql: `${ctes}, mm AS MATERIALIZED (SELECT ${cols.join(', ')} FROM ${rel}) ${parts.join(' UNION ALL BY NAME ')}`, params }
}

// ---- Reads of the rollups ----

/** What the statements over a plan's pieces read: the request, the pieces, and the rollups (for their fresh parts). */
export interface PiecesInput {
  ctx: StatsContext
  pieces: Piece[]
  rollups: Pick<Rollups, 'freshInputs' | 'freshOf'>
  /** The id span of the calls with parts past the rollups' mark, read before the statements (fresh-span.ts). */
  span?: IdSpan | null
}

/** What the SQL of every piece of one statement shares. */
interface PieceSql {
  input: PiecesInput
  table: Table
  params: Params
  /** The project, as a parameter. */
  p: string
  /** The filter, as conditions on the tiers' dimension columns. */
  conds: string[]
  /** The slot lists made so far, for the statement's WITH list. */
  withs: string[]
  tokens: readonly TokenMetric[]
}

/**
 * The rows of one tier's `table` inside a piece, as a SELECT of rowColumns (its bucket, its time `at` when costs
 * need it, the columns the aggregates read). The fresh parts are not here: correctionStatement adds them once per
 * request.
 */
function pieceRowsSql(piece: Piece, q: PieceSql): string {
  const t = tableName(storedAs(q.table, piece.tier), piece.tier)
  if ('slots' in piece) return slotRowsSql(piece.tier as Exclude<Tier, 'call'>, piece.slots, t, q)
  return windowRowsSql(piece.windows, t, q)
}

/** The columns the aggregates of q's table read, in the order the call tier's shapedSelect gives them. */
function aggColumns(q: PieceSql): string[] {
  const parts = partsOf(q)
  if (q.table === 'latency') return ['k', 'n']
  if (q.table === 'calls') return ['n', ...parts.map((part) => `lat_${part}`), 'err', 'dirty']
  return ['model', 'n', ...q.tokens.flatMap((m) => parts.map((part) => `${m}_${part}`)), 'dirty']
}

/** The parts of each metric q's statement reads: the latency's (calls), the token metrics' (usage). */
const partsOf = (q: Pick<PieceSql, 'input' | 'table'>): readonly TokenPart[] =>
  q.table === 'usage' ? usageShape(q.input.ctx).parts : q.table === 'calls' ? latencyParts(q.input.ctx) : []

/**
 * What every piece's rows of q's table carry, in this order: they combine by a plain UNION ALL. (Each piece's
 * `SELECT *` combined BY NAME, its bucket joined from a list: the last 24 hours' calls statement took 1.6x as
 * long, nearly all of it planning.)
 */
function rowColumns(q: PieceSql): string[] {
  // AT is a keyword in DuckDB's grammar (time travel): a bare name in a select list fails to parse.
  return ['bucket', ...(atNeeded(q) ? ['"at"'] : []), ...aggColumns(q)]
}

/** A row's time is read only to price it. */
const atNeeded = (q: PieceSql) => q.table === 'usage' && usageShape(q.input.ctx).costs

/**
 * The bucket of a time column as arithmetic on the first bucket's start, when the buckets are of one width (any UTC
 * range, and local ones without a clock change); null otherwise.
 */
function uniformBucket(starts: readonly number[]): ((col: string) => string) | null {
  if (starts.length === 0) return null
  const o = starts[0]!
  if (starts.length === 1) return () => `${o}::BIGINT`
  const g = starts[1]! - o
  for (let i = 2; i < starts.length; i++) if (starts[i]! - starts[i - 1]! !== g) return null
  return (col) => `(${o} + (epoch_ms(${col}) - ${o}) // ${g} * ${g})`
}

/**
 * An aggregated tier's rows in whole slots ([slot start, bucket start]) of `t`: each run of adjacent slots read by
 * its own range (the minutes at both ends of a day are ~1,400 minutes apart: one range over both would read every
 * minute between), its bucket computed from the slot's time. Buckets of several widths, or many runs (buckets off
 * whole hours: one range over all), join the slots to their buckets through a list made here (an equality join,
 * not a range join), added to `withs`.
 */
function slotRowsSql(tier: Exclude<Tier, 'call'>, slots: [number, number][], t: string, q: PieceSql): string {
  const { p, conds, params, withs } = q
  const time = timeDim(tier)
  const unit = slotMs(tier)
  const runs: [number, number][] = []
  for (const [h] of slots) {
    const last = runs[runs.length - 1]
    if (last && last[1] === h) last[1] = h + unit
    else runs.push([h, h + unit])
  }
  const where = ([lo, hi]: [number, number]) => [`project_id = ${p}`, `${time} >= ${ts(lo)}`, `${time} < ${ts(hi)}`, ...conds].join(' AND ')
  const bucket = uniformBucket(q.input.ctx.starts)
  if (bucket && runs.length <= 8) {
    const head = `${bucket(time)} AS bucket${atNeeded(q) ? `, ${time} AS at` : ''}, ${aggColumns(q).join(', ')}`
    return runs.map((r) => `SELECT ${head} FROM ${t} WHERE ${where(r)}`).join(' UNION ALL ')
  }
  const ranges = runs.length <= 8 ? runs : [[runs[0]![0], runs[runs.length - 1]![1]] as [number, number]]
  const branches = ranges.map((r) => `SELECT * FROM ${t} WHERE ${where(r)}`)
  const sb = `sb${withs.length}`
  withs.push(
    `${sb} AS (SELECT make_timestamp(unnest(${params.add(listValue(slots.map(([h]) => BigInt(h) * 1000n)))}::BIGINT[])) AS ${time}, unnest(${params.add(listValue(slots.map(([, b]) => BigInt(b))))}::BIGINT[]) AS bucket)`,
  )
  const cols = rowColumns(q).join(', ')
  return `SELECT ${cols} FROM (SELECT *, ${time} AS at FROM (${branches.join(' UNION ALL ')}) JOIN ${sb} USING (${time}))`
}

/**
 * The call tier's rows started in the windows, each with its bucket, from `from` (the tier's table), shaped into
 * the aggregated tiers' columns.
 */
function windowRowsSql(windows: [number, number][], from: string, q: PieceSql): string {
  const { p, conds, table, tokens } = q
  const parts = partsOf(q)
  // One branch per window: each gets its own range filter, which the table's zone maps prune by.
  const where = (w: [number, number]) => [`project_id = ${p}`, `t >= ${ts(w[0])}`, `t < ${ts(w[1])}`, ...conds].join(' AND ')
  // Few pieces each inside one bucket (the ends of a range, mostly): the bucket is a constant per
  // branch. Many (buckets off whole hours): rows find their bucket by time (an ASOF join).
  const cut = inBuckets(windows, q.input.ctx.starts)
  if (cut.length <= 8) {
    const { cols, cond } = shapedSelect(table, tokens, parts)
    const at = atNeeded(q) ? ', t AS at' : ''
    return cut
      .map(
        ([lo, hi, b]) =>
          `SELECT ${b}::BIGINT AS bucket${at}, ${cols} FROM ${from} WHERE ${[where([lo, hi]), ...(cond ? [cond] : [])].join(' AND ')}`,
      )
      .join(' UNION ALL ')
  }
  const branches = windows.map((w) => `SELECT * FROM ${from} WHERE ${where(w)}`)
  const cols = rowColumns(q).join(', ')
  return `SELECT ${cols} FROM (SELECT epoch_ms(b.ts) AS bucket, r.*, r.t AS at FROM (${shaped(branches.join(' UNION ALL '), table, 'call', tokens, parts)}) r ASOF JOIN b ON r.t >= b.ts)`
}

/**
 * One statement over the pieces for one table: the WITH list (bucket starts b, price spans sp, slot lists), the
 * pieces' rows as `src` and `extra` items, and `select` over them. A request's statements run at once, each
 * costing milliseconds to plan and start whatever it reads.
 */
function tableStatement(
  input: PiecesInput,
  table: Table,
  select: string,
  extra: string[] = [],
  tokens: readonly TokenMetric[] = [],
): Statement {
  const params = new Params()
  const costs = table === 'usage' && usageShape(input.ctx).costs
  const ctes = ctesSql(params, input.ctx.starts, costs ? input.ctx.spans : [])
  const q = pieceSql(input, params, table, tokens)
  addPieces(q, 'src')
  return { sql: `${ctes}, ${[...q.withs, ...extra].join(', ')} ${select}`, params }
}

/** What the pieces of one statement share: its parameters, the project, the filter's conditions and its WITH list. */
function pieceSql(input: PiecesInput, params: Params, table: Table, tokens: readonly TokenMetric[] = []): PieceSql {
  const { conds } = dimFilter(input.ctx.filter, params)!
  return { input, table, params, p: params.add(input.ctx.project_id), conds, withs: [], tokens }
}

/** Adds `name AS (…)` to q's WITH list: the pieces' rows of q's table (after the slot lists they need) and `more`. */
function addPieces(q: PieceSql, name: string, more: string[] = []): void {
  const cols = rowColumns(q).join(', ')
  const parts = [...q.input.pieces.map((piece) => pieceRowsSql(piece, q)), ...more.map((rows) => `SELECT ${cols} FROM (${rows})`)]
  q.withs.push(`${name} AS (${parts.join(' UNION ALL ')})`)
}

/** Calls, errors and latency aggregates per bucket of the rows of `src`. */
const callsAggSql = (src: string, parts: readonly TokenPart[]) =>
  `SELECT bucket, sum(n)::BIGINT AS n, sum(err)::BIGINT AS err, ${parts.map((part) => LATENCY_AGG[part]).join(', ')}${parts.length ? ', ' : ''}bool_or(dirty) AS dirty FROM ${src} GROUP BY bucket`

/** Each part of the latency summed up over a bucket's rows. */
const LATENCY_AGG: Record<TokenPart, string> = {
  sum: 'sum(lat_sum)::BIGINT AS lat_sum',
  n: 'sum(lat_n)::BIGINT AS lat_n',
  min: 'min(lat_min) AS lat_min',
  max: 'max(lat_max) AS lat_max',
}

/**
 * The parts of the latency a request's calls statements read: its aggregations' (as PARTS_OF), and the extremes
 * for percentiles (assemble.ts: an estimate is clamped to them).
 */
function latencyParts(ctx: StatsContext): TokenPart[] {
  const cols = ctx.callCols.filter((c) => c.metric === 'latency_ms')
  const wanted = new Set(cols.flatMap((c) => (c.p !== undefined ? (['min', 'max'] as const) : (PARTS_OF[c.agg ?? ''] ?? TOKEN_PARTS))))
  return TOKEN_PARTS.filter((part) => wanted.has(part))
}

/** Latency histogram bins per bucket of the rows of `src`. */
const latencyAggSql = (src: string) => `SELECT bucket, k, sum(n)::BIGINT AS n FROM ${src} GROUP BY bucket, k`

/** Each part of a token metric `m` summed up over a bucket's rows. */
const PART_AGG: Record<TokenPart, (m: string) => string> = {
  sum: (m) => `sum(${m}_sum)::DOUBLE AS ${m}_sum`,
  n: (m) => `sum(${m}_n)::BIGINT AS ${m}_n`,
  min: (m) => `min(${m}_min)::DOUBLE AS ${m}_min`,
  max: (m) => `max(${m}_max)::DOUBLE AS ${m}_max`,
}

/** The parts of a token metric an aggregation reads (assemble.ts aggValue: min and max are null without calls). */
const PARTS_OF: Record<string, readonly TokenPart[]> = {
  sum: ['sum'],
  count: ['n'],
  avg: ['sum', 'n'],
  min: ['n', 'min'],
  max: ['n', 'max'],
}

/**
 * The token metrics a request's usage statements carry (costs need the input and output tokens), the parts of
 * each they read, and whether costs are asked. Only what is asked: each column costs the statement's planning
 * (the last 24 h's token sums: 8.4 -> 5.6 ms with the sums alone).
 */
function usageShape(ctx: StatsContext): { tokens: TokenMetric[]; parts: readonly TokenPart[]; costs: boolean } {
  const asked = new Set(ctx.usageCols.map((c) => c.metric))
  const costs = ['input_cost', 'output_cost', 'total_cost'].some((m) => asked.has(m as UsageMetric))
  const wanted = new Set(costs ? TOKEN_PARTS : ctx.usageCols.flatMap((c) => PARTS_OF[c.agg ?? ''] ?? TOKEN_PARTS))
  return {
    costs,
    tokens: TOKEN_NAMES.filter((m) => asked.has(m) || (costs && (m === 'input_tokens' || m === 'output_tokens'))),
    parts: TOKEN_PARTS.filter((part) => wanted.has(part)),
  }
}

/**
 * Token and cost aggregates per bucket and model of the rows of `src`: a WITH item (`y`, the rows with their prices)
 * and the SELECT over it. The price of a row is the one in effect at its time (an aggregated tier's rows: their
 * slot's; no price changes inside one).
 */
function usageAggSql(ctx: StatsContext, src: string, y: string): { with: string; select: string } {
  const { tokens, parts, costs } = usageShape(ctx)
  const cost = (name: string, tokens: string, price: string) =>
    `sum(${tokens}_sum * ${price}) AS ${name}_sum, sum(CASE WHEN ${price} IS NOT NULL THEN ${tokens}_n END)::BIGINT AS ${name}_n, min(${tokens}_min * ${price}) AS ${name}_min, max(${tokens}_max * ${price}) AS ${name}_max`
  const aggs = [
    'sum(n)::BIGINT AS n',
    ...tokens.flatMap((m) => parts.map((part) => PART_AGG[part](m))),
    ...(costs
      ? [
          cost('input_cost', 'input_tokens', 'pc'),
          cost('output_cost', 'output_tokens', 'cc'),
          'sum(input_tokens_sum * pc + output_tokens_sum * cc)::DOUBLE AS total_cost_sum, sum(CASE WHEN pc IS NOT NULL AND cc IS NOT NULL THEN n END)::BIGINT AS total_cost_n',
        ]
      : []),
    'bool_or(dirty) AS dirty',
  ]
  return {
    with: `${y} AS (${costs ? `SELECT ${src}.*, sp.pc, sp.cc FROM ${src} LEFT JOIN sp ON sp.llm = ${src}.model AND ${src}.at >= sp.f AND ${src}.at < sp.t` : `SELECT * FROM ${src}`})`,
    select: `SELECT bucket, model, ${aggs.join(', ')} FROM ${y} GROUP BY bucket, model`,
  }
}

/** Whether a request's latency percentiles need the histogram bins. */
export const wantsBins = (ctx: StatsContext) => ctx.callCols.some((c) => c.metric === 'latency_ms' && c.p !== undefined)

/** Calls, errors and latency aggregates per bucket. */
export function callsStatement(input: PiecesInput): Statement {
  return tableStatement(input, 'calls', callsAggSql('src', latencyParts(input.ctx)))
}

/** Latency histogram bins per bucket. */
export function latencyStatement(input: PiecesInput): Statement {
  return tableStatement(input, 'latency', latencyAggSql('src'))
}

/** Token and cost aggregates per bucket and model. */
export function usageStatement(input: PiecesInput): Statement {
  const agg = usageAggSql(input.ctx, 'src', 'y')
  return tableStatement(input, 'usage', agg.select, [agg.with], usageShape(input.ctx).tokens)
}

/**
 * The fresh parts' correction (see Rollups) of every table a request asks for, over its whole range, in one
 * statement beside the statements per table: the calls touched past `x` are merged once, now and as they were at
 * `x`, and their signed call-tier rows in the range (one set for calls and latency, one for usage) find their
 * buckets by start time and are aggregated as those statements aggregate theirs: rows of `kind` c
 * (callsStatement's columns), l (latencyStatement's) and u (usageStatement's), which add into the same buckets.
 * When each statement per table merged them itself, a request merged the tail three times (25,000 touched calls:
 * ~300 → ~100 ms a request here, in process). The statements must all read the tables at one `x`: they run
 * through the rollups' gate (commit-gate.ts). `withPieces`: the pieces' rows of every table too, so one statement
 * answers the request at one `x` (slower: ~150 ms for the same request), for a request a commit overtook. Null when
 * no part is past `x`.
 */
export function correctionStatement(input: PiecesInput, withPieces = false): Statement | null {
  const { ctx, rollups } = input
  const params = new Params()
  const f = rollups.freshInputs(ctx.project_id, params, 'fr', input.span, correctionColumns(ctx.usageCols.length > 0))
  if (!f) return null
  const { tokens, costs } = usageShape(ctx)
  const ctes = ctesSql(params, ctx.starts, ctx.usageCols.length && costs ? ctx.spans : [])
  const q = pieceSql(input, params, 'calls', tokens)
  q.withs.push(...f.withs)
  const where = [`project_id = ${q.p}`, `t >= ${ts(ctx.start)}`, `t < ${ts(ctx.end)}`, ...q.conds].join(' AND ')
  // The correction's rows find their buckets by one ASOF join over the whole range: they are few.
  const bucketed = (rows: string, table: Table) =>
    `SELECT epoch_ms(b.ts) AS bucket, r.*, r.t AS at FROM (${shaped(`SELECT * FROM ${rows}`, table, 'call', tokens, partsOf({ input, table }))}) r ASOF JOIN b ON r.t >= b.ts`
  // `withPieces`: each table's pieces join its correction's rows.
  const rows = (name: string, table: Table, correction: string) =>
    withPieces ? addPieces({ ...q, table }, name, [correction]) : q.withs.push(`${name} AS (${correction})`)
  const selects: string[] = []
  if (ctx.callCols.length) {
    // The call tier keeps latencies in its calls rows (storedAs): the bins come from the same rows.
    q.withs.push(`fx AS MATERIALIZED (SELECT * FROM (${rollups.freshOf(f.now, f.atMark, 'calls', 'call')}) WHERE ${where})`)
    rows('fc', 'calls', bucketed('fx', 'calls'))
    selects.push(`SELECT 'c' AS kind, * FROM (${callsAggSql('fc', latencyParts(ctx))})`)
    if (wantsBins(ctx)) {
      rows('fl', 'latency', bucketed('fx', 'latency'))
      selects.push(`SELECT 'l' AS kind, * FROM (${latencyAggSql('fl')})`)
    }
  }
  if (ctx.usageCols.length) {
    const agg = usageAggSql(ctx, 'fu', 'fy')
    rows('fu', 'usage', bucketed(`(SELECT * FROM (${rollups.freshOf(f.now, f.atMark, 'usage', 'call')}) WHERE ${where})`, 'usage'))
    q.withs.push(agg.with)
    selects.push(`SELECT 'u' AS kind, * FROM (${agg.select})`)
  }
  return { sql: `${ctes}, ${q.withs.join(', ')} ${selects.join(' UNION ALL BY NAME ')}`, params }
}

/** The number of live calls matching an answerable filter, from the rollups; null for a filter they do not hold. */
export function countStatement(
  rollups: Pick<Rollups, 'freshInputs' | 'freshOf'>,
  project: string,
  filter: CallFilter | null | undefined,
  span?: IdSpan | null,
): Statement | null {
  const params = new Params()
  const dims = dimFilter(filter, params)
  if (dims === null) return null
  const conds = dims.conds
  const p = params.add(project)
  const f = rollups.freshInputs(project, params, 'fr', span, correctionColumns(false))
  const where = conds.length ? ` WHERE ${conds.join(' AND ')}` : ''
  const fresh = f ? ` UNION ALL ${rollups.freshOf(f.now, f.atMark, 'calls', dims.tier)}` : ''
  const withs = f ? `WITH ${f.withs.join(', ')} ` : ''
  const sql = `${withs}SELECT coalesce(sum(n), 0)::BIGINT AS n FROM (SELECT * FROM ${tableName('calls', dims.tier)} WHERE project_id = ${p}${fresh})${where}`
  return { sql, params }
}
