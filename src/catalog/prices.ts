import { randomUUID } from 'node:crypto'
import { readFileSync } from 'node:fs'
import path from 'node:path'
import { listValue } from '@duckdb/node-api'
import { DomainError } from '../core/errors.js'
import { ROOT_DIR } from '../core/version.js'
import type { Catalog } from './db.js'

/** One price of a model: USD (or `*_unit`) per token, from `effective_date` on. */
export interface PriceRow {
  id: string
  pricing_level: 'default' | 'project'
  pricing_level_id: string
  provider_id: string
  llm_id: string
  /** Milliseconds since the epoch. */
  effective_ms: number
  prompt_token_cost: number
  completion_token_cost: number
  cache_read_input_token_cost: number
  cache_creation_input_token_cost: number
  prompt_token_cost_unit: string
  completion_token_cost_unit: string
  created_by: string | null
  created_at_ms: number
}

export interface CostInput {
  prompt_token_cost: number
  completion_token_cost: number
  cache_read_input_token_cost?: number
  cache_creation_input_token_cost?: number
  prompt_token_cost_unit?: string | null
  completion_token_cost_unit?: string | null
  effective_date?: string | null
  provider_id?: string | null
}

const BOOK = path.join(ROOT_DIR, 'assets', 'prices.json')

/**
 * The default price book: `assets/prices.json` (common hosted models), then `extra` entries
 * (`model=prompt,completion[,cache_read,cache_creation]` separated by `;`, USD per token), which
 * add models or replace the book's price — the models weft serves are priced this way.
 */
export function defaultPrices(extra = ''): PriceRow[] {
  const book = JSON.parse(readFileSync(BOOK, 'utf8')) as { prices: (CostInput & { llm_id: string })[] }
  const rows = new Map<string, PriceRow>()
  const add = (llm: string, c: CostInput) =>
    rows.set(llm, {
      id: `default:${llm}`,
      pricing_level: 'default',
      pricing_level_id: 'default',
      provider_id: c.provider_id ?? 'default',
      llm_id: llm,
      effective_ms: c.effective_date ? Date.parse(c.effective_date) : 0,
      prompt_token_cost: c.prompt_token_cost,
      completion_token_cost: c.completion_token_cost,
      cache_read_input_token_cost: c.cache_read_input_token_cost ?? 0,
      cache_creation_input_token_cost: c.cache_creation_input_token_cost ?? 0,
      prompt_token_cost_unit: 'USD',
      completion_token_cost_unit: 'USD',
      created_by: null,
      created_at_ms: 0,
    })
  for (const p of book.prices) add(p.llm_id, p)
  for (const entry of extra
    .split(';')
    .map((s) => s.trim())
    .filter(Boolean)) {
    const m = /^([^=]+)=([0-9.eE+-]+),([0-9.eE+-]+)(?:,([0-9.eE+-]+))?(?:,([0-9.eE+-]+))?$/.exec(entry)
    const nums = m ? [m[2], m[3], m[4] ?? '0', m[5] ?? '0'].map(Number) : []
    if (!m || nums.some((n) => !Number.isFinite(n) || n < 0))
      throw new Error(
        `bad price entry ${JSON.stringify(entry)}: expected model=prompt,completion[,cache_read,cache_creation] in USD per token`,
      )
    add(m[1]!.trim(), {
      prompt_token_cost: nums[0]!,
      completion_token_cost: nums[1]!,
      cache_read_input_token_cost: nums[2]!,
      cache_creation_input_token_cost: nums[3]!,
    })
  }
  return [...rows.values()]
}

/** How a price applies to a call at `at` (docs/statistics.md): prices already in effect first, then project over default, then newest. */
function rank(row: PriceRow, project: string, at: number): [number, number, number] {
  const level = row.pricing_level === 'project' && row.pricing_level_id === project ? 2 : row.pricing_level === 'default' ? 3 : 4
  return [at >= row.effective_ms ? 0 : 1, level, -row.effective_ms]
}

function better(a: [number, number, number], b: [number, number, number]): boolean {
  for (let i = 0; i < 3; i++) if (a[i] !== b[i]) return a[i]! < b[i]!
  return false
}

/** The price of `model` for a call of `project` started at `at` (ms), or null. */
export function selectPrice(rows: readonly PriceRow[], project: string, model: string, at: number): PriceRow | null {
  let best: PriceRow | null = null
  let bestRank: [number, number, number] | null = null
  for (const r of rows) {
    if (r.llm_id !== model) continue
    const k = rank(r, project, at)
    if (!bestRank || better(k, bestRank)) [best, bestRank] = [r, k]
  }
  return best
}

/** A stretch of time over which one price row applies to a model: [from_ms, to_ms). */
export interface PriceSpan {
  llm_id: string
  from_ms: number
  to_ms: number
  row: PriceRow
}

/**
 * The choice of selectPrice as spans of time: it can change only at an effective date, so
 * evaluating it once per interval between a model's effective dates covers every instant. SQL
 * then joins calls to spans instead of ranking prices per call.
 */
export function priceSpans(rows: readonly PriceRow[], project: string): PriceSpan[] {
  const byModel = new Map<string, PriceRow[]>()
  for (const r of rows) byModel.set(r.llm_id, [...(byModel.get(r.llm_id) ?? []), r])
  const spans: PriceSpan[] = []
  const MIN = -8.64e15
  const MAX = 8.64e15
  for (const [llm, rs] of byModel) {
    const cuts = [...new Set(rs.map((r) => r.effective_ms))].sort((a, b) => a - b)
    const edges = [MIN, ...cuts, MAX]
    for (let i = 0; i + 1 < edges.length; i++) {
      const row = selectPrice(rs, project, llm, edges[i]!)
      if (row) spans.push({ llm_id: llm, from_ms: edges[i]!, to_ms: edges[i + 1]!, row })
    }
  }
  return spans
}

type Expr = Record<string, unknown>

/** SQL's three-valued logic, as the call and feedback queries (query/expr.ts): null is "unknown". */
function and3(xs: unknown[]): boolean | null {
  if (xs.some((x) => x === false)) return false
  return xs.some((x) => x === null || x === undefined) ? null : true
}
function or3(xs: unknown[]): boolean | null {
  if (xs.some((x) => x === true)) return true
  return xs.some((x) => x === null || x === undefined) ? null : false
}
const isNull = (x: unknown) => x === null || x === undefined

/** `$convert` as ClickHouse's conversions: a value that does not convert is null. */
function convert(x: unknown, to: unknown): unknown {
  if (to === 'exists') return !isNull(x)
  if (isNull(x)) return null
  const n = typeof x === 'number' ? x : typeof x === 'string' && x.trim() !== '' ? Number(x) : NaN
  if (to === 'double') return Number.isNaN(n) ? null : n
  if (to === 'int') return typeof x === 'string' ? (/^[+-]?\d+$/.test(x) ? n : null) : Number.isFinite(n) ? Math.trunc(n) : null
  if (to === 'string') return String(x)
  if (to === 'bool') return x === 'true' || x === true ? true : x === 'false' || x === false ? false : Number.isNaN(n) ? null : n !== 0
  throw new DomainError(400, `$convert "to" must be one of double, int, string, bool, exists`)
}

/** A comparison: null when either side is (a row is then left out, also under `$not`). */
function compare(op: string, a: unknown, b: unknown): boolean | null {
  if (isNull(a) || isNull(b)) return null
  const [x, y] = [a as number | string, b as number | string]
  return op === '$eq' ? x === y : op === '$gt' ? x > y : op === '$gte' ? x >= y : op === '$lt' ? x < y : x <= y
}

/** `$expr` over price rows (few per project, so evaluated here rather than in SQL); a row matches when true. */
function evaluate(e: unknown, row: Record<string, unknown>): unknown {
  if (e === null || typeof e !== 'object') return e
  if (Array.isArray(e)) return e.map((x) => evaluate(x, row))
  const [[op, arg]] = Object.entries(e as Expr) as [[string, unknown]]
  const args = () => {
    if (!Array.isArray(arg)) throw new DomainError(400, `${op} takes a list of operands`)
    return arg.map((a) => evaluate(a, row))
  }
  switch (op) {
    case '$literal':
      return arg
    case '$getField':
      if (typeof arg !== 'string' || !(arg in row)) throw new DomainError(400, `Unknown cost field ${JSON.stringify(arg)}`)
      return row[arg]
    case '$convert': {
      const c = (arg ?? {}) as { input?: unknown; to?: unknown }
      return convert(evaluate(c.input, row), c.to)
    }
    case '$and':
      return and3(args())
    case '$or':
      return or3(args())
    case '$not': {
      const x = args()[0]
      return isNull(x) ? null : !x
    }
    case '$eq': {
      const [a, b] = args()
      if ((arg as Expr[])[1]?.$literal === null) return isNull(a)
      return compare(op, a, b)
    }
    case '$gt':
    case '$gte':
    case '$lt':
    case '$lte':
      return compare(op, ...(args() as [unknown, unknown]))
    case '$in': {
      const [a, list] = args() as [unknown, unknown[]]
      return isNull(a) ? null : Array.isArray(list) && list.includes(a)
    }
    case '$contains': {
      const c = arg as { input: unknown; substr: unknown; case_insensitive?: boolean }
      const [s, sub] = [evaluate(c.input, row), evaluate(c.substr, row)]
      if (isNull(s) || isNull(sub)) return null
      return c.case_insensitive ? String(s).toLowerCase().includes(String(sub).toLowerCase()) : String(s).includes(String(sub))
    }
    default:
      throw new DomainError(400, `Unsupported operator ${op} in a cost query`)
  }
}

/** Ids named by a purge query: `$eq` on id, `$in` on id, or an `$or` of such `$eq`s (docs/statistics.md); feedback purges the same way. */
export function purgeIds(q: unknown, what = 'costs', idName = 'cost'): string[] {
  const fail = () => new DomainError(400, `Can only purge ${what} by specifying one or more ${idName} ids`)
  const e = (q as { $expr?: Expr } | null)?.$expr
  const idOf = (x: unknown) => {
    if ((x as Expr)?.$getField !== 'id') throw fail()
  }
  const lit = (x: unknown): string => {
    const v = (x as Expr)?.$literal
    if (typeof v !== 'string') throw fail()
    return v
  }
  const eq = (x: unknown): string => {
    const a = (x as Expr)?.$eq
    if (!Array.isArray(a) || a.length !== 2) throw fail()
    idOf(a[0])
    return lit(a[1])
  }
  if (!e || typeof e !== 'object') throw fail()
  if ('$eq' in e) return [eq(e)]
  if ('$in' in e) {
    const a = e.$in
    if (!Array.isArray(a) || a.length !== 2 || !Array.isArray(a[1])) throw fail()
    idOf(a[0])
    return a[1].map(lit)
  }
  if ('$or' in e && Array.isArray(e.$or)) return e.$or.map(eq)
  throw fail()
}

export const COST_FIELDS = [
  'id',
  'llm_id',
  'prompt_token_cost',
  'completion_token_cost',
  'cache_read_input_token_cost',
  'cache_creation_input_token_cost',
  'prompt_token_cost_unit',
  'completion_token_cost_unit',
  'effective_date',
  'provider_id',
] as const

/** Prices: the default book in memory, project prices in the catalog (`llm_token_prices`). */
export class Prices {
  private readonly cache = new Map<string, PriceRow[]>()
  /** Bumped on every write: caches built on prices (statistics) know when to drop what they hold. */
  version = 0

  constructor(
    private readonly catalog: Catalog,
    readonly defaults: readonly PriceRow[],
  ) {}

  /** The project's own prices and the defaults: every row selectPrice may pick for the project. */
  async forProject(project: string): Promise<PriceRow[]> {
    const hit = this.cache.get(project)
    if (hit) return hit
    const own = await this.catalog.all<Record<string, unknown>>(
      `SELECT *, epoch_ms(effective_date) AS effective_ms, epoch_ms(created_at) AS created_at_ms FROM llm_token_prices WHERE pricing_level_id = $1`,
      [project],
    )
    const rows = [...own.map(fromDb), ...this.defaults]
    if (this.cache.size > 10_000) this.cache.clear()
    this.cache.set(project, rows)
    return rows
  }

  async create(project: string, userId: string, costs: Record<string, CostInput>): Promise<[string, string][]> {
    const ids: [string, string][] = []
    const now = Date.now()
    await this.catalog.transaction(async (tx) => {
      for (const [llm, c] of Object.entries(costs)) {
        const id = randomUUID()
        const eff = c.effective_date ? Date.parse(c.effective_date) : now
        if (!Number.isFinite(eff)) throw new DomainError(400, `costs.${llm}.effective_date is not a date`)
        await tx.run(
          `INSERT INTO llm_token_prices VALUES ($1, 'project', $2, $3, $4, make_timestamp($5::BIGINT * 1000), $6, $7, $8, $9, $10, $11, $12, make_timestamp($13::BIGINT * 1000))`,
          [
            id,
            project,
            c.provider_id ?? 'default',
            llm,
            eff,
            c.prompt_token_cost,
            c.completion_token_cost,
            c.cache_read_input_token_cost ?? 0,
            c.cache_creation_input_token_cost ?? 0,
            c.prompt_token_cost_unit ?? 'USD',
            c.completion_token_cost_unit ?? 'USD',
            userId,
            now,
          ],
        )
        ids.push([id, llm])
      }
    })
    this.cache.delete(project)
    this.version++
    return ids
  }

  /** The project's own prices (docs/statistics.md: project level only), filtered, sorted and paged. */
  async query(
    project: string,
    req: {
      fields?: string[] | null
      query?: { $expr: unknown } | null
      sort_by?: { field: string; direction: 'asc' | 'desc' }[] | null
      limit?: number | null
      offset?: number | null
    },
  ): Promise<Record<string, unknown>[]> {
    const own = (await this.forProject(project)).filter((r) => r.pricing_level === 'project').map(toOutput)
    for (const f of [...(req.fields ?? []), ...(req.sort_by ?? []).map((s) => s.field)]) {
      if (!(COST_FIELDS as readonly string[]).includes(f))
        throw new DomainError(400, `Unknown cost field ${JSON.stringify(f)}; fields are ${COST_FIELDS.join(', ')}`)
    }
    let rows = req.query ? own.filter((r) => evaluate(req.query!.$expr, r) === true) : own
    const sort = req.sort_by?.length ? req.sort_by : [{ field: 'effective_date', direction: 'desc' as const }]
    rows = [...rows].sort((a, b) => {
      for (const s of sort) {
        const [x, y] = [a[s.field] as string | number, b[s.field] as string | number]
        if (x === y) continue
        const lt = x === null ? false : y === null ? true : x < y
        return (lt ? -1 : 1) * (s.direction === 'desc' ? -1 : 1)
      }
      return 0
    })
    const offset = req.offset ?? 0
    rows = rows.slice(offset, req.limit === null || req.limit === undefined ? undefined : offset + req.limit)
    if (req.fields?.length) rows = rows.map((r) => Object.fromEntries(req.fields!.map((f) => [f, r[f]])))
    return rows
  }

  async purge(project: string, query: unknown): Promise<void> {
    const ids = purgeIds(query)
    if (ids.length === 0) return
    await this.catalog.run(
      `DELETE FROM llm_token_prices WHERE pricing_level = 'project' AND pricing_level_id = $1 AND list_contains($2, id)`,
      [project, listValue(ids)],
    )
    this.cache.delete(project)
    this.version++
  }
}

/** A price row as a database answers it (numbers possibly as bigints or text): the catalog's and ClickHouse's. */
export function fromDb(r: Record<string, unknown>): PriceRow {
  return {
    id: String(r.id),
    pricing_level: r.pricing_level as 'project',
    pricing_level_id: String(r.pricing_level_id),
    provider_id: String(r.provider_id),
    llm_id: String(r.llm_id),
    effective_ms: Number(r.effective_ms),
    prompt_token_cost: Number(r.prompt_token_cost),
    completion_token_cost: Number(r.completion_token_cost),
    cache_read_input_token_cost: Number(r.cache_read_input_token_cost),
    cache_creation_input_token_cost: Number(r.cache_creation_input_token_cost),
    prompt_token_cost_unit: String(r.prompt_token_cost_unit),
    completion_token_cost_unit: String(r.completion_token_cost_unit),
    created_by: (r.created_by as string | null) ?? null,
    created_at_ms: Number(r.created_at_ms),
  }
}

function toOutput(r: PriceRow): Record<string, unknown> {
  return {
    id: r.id,
    llm_id: r.llm_id,
    prompt_token_cost: r.prompt_token_cost,
    completion_token_cost: r.completion_token_cost,
    cache_read_input_token_cost: r.cache_read_input_token_cost,
    cache_creation_input_token_cost: r.cache_creation_input_token_cost,
    prompt_token_cost_unit: r.prompt_token_cost_unit,
    completion_token_cost_unit: r.completion_token_cost_unit,
    effective_date: new Date(r.effective_ms).toISOString(),
    provider_id: r.provider_id,
  }
}

/** `summary.weave.costs[model]` for one call's usage of one model (docs/statistics.md). */
export function callCost(row: PriceRow, usage: Record<string, unknown>): Record<string, unknown> {
  const num = (v: unknown) => (typeof v === 'number' && Number.isFinite(v) ? v : 0)
  const prompt = usage.prompt_tokens !== undefined && usage.prompt_tokens !== null ? num(usage.prompt_tokens) : num(usage.input_tokens)
  const completion =
    usage.completion_tokens !== undefined && usage.completion_tokens !== null ? num(usage.completion_tokens) : num(usage.output_tokens)
  const cacheRead = num(usage.cache_read_input_tokens)
  const cacheCreation = num(usage.cache_creation_input_tokens)
  return {
    prompt_tokens: prompt,
    completion_tokens: completion,
    requests: num(usage.requests),
    total_tokens: num(usage.total_tokens) || prompt + completion,
    cache_read_input_tokens: cacheRead,
    cache_creation_input_tokens: cacheCreation,
    prompt_token_cost: row.prompt_token_cost,
    completion_token_cost: row.completion_token_cost,
    cache_read_input_token_cost: row.cache_read_input_token_cost,
    cache_creation_input_token_cost: row.cache_creation_input_token_cost,
    prompt_tokens_total_cost: prompt * row.prompt_token_cost,
    completion_tokens_total_cost: completion * row.completion_token_cost,
    cache_read_input_tokens_total_cost: cacheRead * row.cache_read_input_token_cost,
    cache_creation_input_tokens_total_cost: cacheCreation * row.cache_creation_input_token_cost,
    prompt_token_cost_unit: row.prompt_token_cost_unit,
    completion_token_cost_unit: row.completion_token_cost_unit,
    effective_date: new Date(row.effective_ms).toISOString(),
    provider_id: row.provider_id,
    pricing_level: row.pricing_level,
    pricing_level_id: row.pricing_level_id,
    created_by: row.created_by,
    created_at: new Date(row.created_at_ms).toISOString(),
  }
}

/** Adds `summary.weave.costs` to a call read with include_costs (none when nothing is priced). */
export function withCosts(call: Record<string, unknown>, rows: readonly PriceRow[]): Record<string, unknown> {
  const summary = call.summary as Record<string, unknown> | undefined
  const usage = summary?.usage as Record<string, unknown> | undefined
  if (!summary || !usage || typeof usage !== 'object' || !call.ended_at) return call
  const at = Date.parse(String(call.started_at))
  const costs: Record<string, unknown> = {}
  for (const [model, u] of Object.entries(usage)) {
    if (!u || typeof u !== 'object') continue
    const row = selectPrice(rows, String(call.project_id), model, at)
    if (row) costs[model] = callCost(row, u as Record<string, unknown>)
  }
  if (Object.keys(costs).length === 0) return call
  return { ...call, summary: { ...summary, weave: { ...(summary.weave as object), costs } } }
}
