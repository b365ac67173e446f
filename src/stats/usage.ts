import { listValue } from '@duckdb/node-api'
import { DomainError } from '../core/errors.js'
import { Params } from '../query/expr.js'
import { USAGE_FIELDS, type CallFilter, type QueryOptions } from '../calls/model.js'
import { rangeOf } from '../query/list-filters.js'
import type { CallSource } from '../calls/source.js'
import { callCost, selectPrice, type PriceRow, type Prices } from '../catalog/prices.js'
import type { Rollups } from './rollups.js'

export interface Usage {
  requests: number
  prompt_tokens: number
  completion_tokens: number
  total_tokens: number
  cache_read_input_tokens: number
  cache_creation_input_tokens: number
  prompt_tokens_total_cost: number | null
  completion_tokens_total_cost: number | null
  cache_read_input_tokens_total_cost: number | null
  cache_creation_input_tokens_total_cost: number | null
}
export type UsageMap = Record<string, Usage>

/** A fetched call: its id (when the caller needs it), and its parent as an index into the same fetch (-1: none fetched). */
export interface Fetched {
  id: string | null
  parent: number
  started_ms: number
  ended: boolean
  usage: Record<string, number | string | null>[]
}

const COSTS = [
  'prompt_tokens_total_cost',
  'completion_tokens_total_cost',
  'cache_read_input_tokens_total_cost',
  'cache_creation_input_tokens_total_cost',
] as const
const COUNTS = [
  'requests',
  'prompt_tokens',
  'completion_tokens',
  'total_tokens',
  'cache_read_input_tokens',
  'cache_creation_input_tokens',
] as const

const int = (v: unknown) => (typeof v === 'number' || typeof v === 'bigint' ? Math.trunc(Number(v)) || 0 : 0)

/** One call's usage per model (docs/statistics.md): both token spellings summed; entries with nothing in them dropped. */
function ownUsage(c: Fetched, project: string, prices: readonly PriceRow[] | null): UsageMap {
  const out: UsageMap = {}
  for (const u of c.usage ?? []) {
    const model = u.model
    if (typeof model !== 'string') continue
    const prompt = int(u.prompt_tokens) + int(u.input_tokens)
    const completion = int(u.completion_tokens) + int(u.output_tokens)
    const e: Usage = {
      requests: int(u.requests),
      prompt_tokens: prompt,
      completion_tokens: completion,
      total_tokens: int(u.total_tokens) || prompt + completion,
      cache_read_input_tokens: int(u.cache_read_input_tokens),
      cache_creation_input_tokens: int(u.cache_creation_input_tokens),
      prompt_tokens_total_cost: null,
      completion_tokens_total_cost: null,
      cache_read_input_tokens_total_cost: null,
      cache_creation_input_tokens_total_cost: null,
    }
    let keep = COUNTS.some((k) => e[k] !== 0)
    if (prices) {
      // Costs as include_costs reports them on the call (ended calls only, docs/statistics.md), 0 when unpriced.
      const row = c.ended ? selectPrice(prices, project, model, c.started_ms) : null
      const cost = row ? callCost(row, u as Record<string, unknown>) : null
      for (const k of COSTS) e[k] = cost ? Number(cost[k]) : 0
      keep ||= COSTS.some((k) => e[k] !== 0)
    }
    if (keep) out[model] = e
  }
  return out
}

function add(into: UsageMap, from: UsageMap): void {
  for (const [model, u] of Object.entries(from)) {
    const t = into[model]
    if (!t) {
      into[model] = { ...u }
      continue
    }
    for (const k of COUNTS) t[k] += u[k]
    for (const k of COSTS) t[k] = u[k] === null && t[k] === null ? null : (t[k] ?? 0) + (u[k] ?? 0)
  }
}

/** `/trace/usage`'s answer from the fetched calls (each rolled up with its descendants), on every backend. */
export function traceUsageAnswer(
  calls: Fetched[],
  project: string,
  prices: readonly PriceRow[] | null,
): { call_usage: Record<string, UsageMap>; unfinished_call_ids: string[] } {
  const totals = rollUp(calls, project, prices)
  return {
    call_usage: Object.fromEntries(calls.map((c, i) => [c.id!, totals[i]!])),
    unfinished_call_ids: calls
      .filter((c) => !c.ended)
      .map((c) => c.id!)
      .sort(),
  }
}

/**
 * `/calls/usage`'s batching, on every backend: the traces are read `limit + 1` calls at a time at most, a
 * batch that holds more is halved, and a single trace over the limit is 413 — never a partial answer.
 * `read` fetches a batch, `size` counts its calls, `use` takes a complete one.
 */
export async function inTraceBatches<T>(
  traces: string[],
  limit: number,
  read: (batch: string[], max: number) => Promise<T>,
  size: (got: T) => number,
  use: (got: T, batch: string[]) => Promise<void> | void,
): Promise<void> {
  const queue: string[][] = traces.length ? [traces] : []
  while (queue.length) {
    const batch = queue.shift()!
    const got = await read(batch, limit + 1)
    if (size(got) > limit) {
      if (batch.length === 1)
        throw new DomainError(
          413,
          `Cannot compute complete usage: a single trace exceeds the ${limit}-call aggregation limit. Increase limit and retry.`,
        )
      const half = Math.ceil(batch.length / 2)
      queue.unshift(batch.slice(0, half), batch.slice(half))
      continue
    }
    await use(got, batch)
  }
}

/**
 * Each fetched call's usage plus that of all its fetched descendants (a parent outside the set is
 * not followed), by index. Bottom-up over the tree, without recursion.
 */
export function rollUp(calls: Fetched[], project: string, prices: readonly PriceRow[] | null): UsageMap[] {
  const total = calls.map((c) => ownUsage(c, project, prices))
  const pending = new Int32Array(calls.length)
  for (const [i, c] of calls.entries()) if (c.parent >= 0 && c.parent !== i) pending[c.parent]!++
  const ready: number[] = []
  for (let i = 0; i < calls.length; i++) if (pending[i] === 0) ready.push(i)
  while (ready.length) {
    const i = ready.pop()!
    const parent = calls[i]!.parent
    if (parent < 0 || parent === i) continue
    add(total[parent]!, total[i]!)
    if (--pending[parent]! === 0) ready.push(parent)
  }
  return total
}

export class UsageRollup {
  /** The ids of the calls of these traces that have not ended (few: only asked for when some are). */
  private async unfinished(project: string, traces: string[]): Promise<string[]> {
    const params = new Params()
    const rel = this.store.matching(project, { filter: { trace_ids: traces } }, params, { columns: ['ended_at'], open: true })
    return (await this.store.rows(`SELECT m.id FROM ${rel}`, params)).map((r) => String(r.id))
  }

  /** `rollups`: once ready, its usage_calls table answers in place of the segments (see Rollups.usageCalls). */
  constructor(
    private readonly store: CallSource,
    private readonly prices: Prices,
    private readonly rollups: Rollups | null = null,
  ) {}

  /** The live calls of these traces as (id, parent_id, ended, usage) rows, as SQL. */
  private traceCalls(project: string, traces: string[], params: Params): string {
    if (this.rollups?.ready) {
      const cond = `list_contains(${params.add(listValue(traces))}, trace_id)${rangeOf(traces, 'trace_id', params)}`
      return `SELECT id, parent_id, ended, usage FROM (${this.rollups.usageCalls(project, cond, params)})`
    }
    const rel = this.store.matching(project, { filter: { trace_ids: traces } }, params, {
      columns: ['parent_id', 'started_at', 'ended_at', 'usage'],
    })
    return `SELECT m.id, m.parent_id, m.ended_at IS NOT NULL AS ended, m.usage FROM ${rel}`
  }

  /** The traces of these calls (those that are live), sorted. */
  private async tracesOf(project: string, ids: string[]): Promise<string[]> {
    const params = new Params()
    let sql: string
    if (this.rollups?.ready) {
      const cond = `list_contains(${params.add(listValue(ids))}, id)${rangeOf(ids, 'id', params)}`
      sql = `SELECT DISTINCT trace_id FROM (${this.rollups.usageCalls(project, cond, params)})`
    } else {
      const rel = this.store.matching(project, { filter: { call_ids: ids } }, params, { columns: ['trace_id', 'started_at'] })
      sql = `SELECT DISTINCT trace_id FROM (SELECT m.trace_id FROM ${rel}) WHERE trace_id IS NOT NULL`
    }
    return (await this.store.rows(sql, params)).map((r) => String(r.trace_id)).sort()
  }

  /**
   * The calls (up to limit) with their usage as flat rows, one per (call, model), a call without
   * usage once: nested lists cost far more to bring out of DuckDB than scalar columns. Calls are
   * numbered in SQL and parents given by number, so no id string comes out but those asked for
   * (`ids`: the given ones; all when null).
   */
  private async fetch(
    project: string,
    filter: CallFilter,
    query: QueryOptions['query'],
    limit: number,
    ids: string[] | null,
  ): Promise<Fetched[]> {
    const params = new Params()
    const rel = this.store.matching(project, { filter, query }, params, { columns: ['parent_id', 'started_at', 'ended_at', 'usage'] })
    const fields = ['model', ...USAGE_FIELDS]
    const id = ids === null ? 'k.id' : `CASE WHEN list_contains(${params.add(listValue(ids))}, k.id) THEN k.id END`
    const rows = await this.store.rows(
      `WITH k AS MATERIALIZED (SELECT (row_number() OVER ()) - 1 AS idx, * FROM (
          SELECT m.id, m.parent_id, epoch_ms(m.started_at) AS started_ms, m.ended_at IS NOT NULL AS ended, m.usage
          FROM ${rel} ORDER BY m.started_at, m.id LIMIT ${params.add(limit)}))
      SELECT idx, pidx, id, started_ms, ended, ${fields.map((f) => `u.${f} AS u_${f}`).join(', ')}
      FROM (SELECT k.idx, coalesce(p.idx, -1) AS pidx, ${id} AS id, k.started_ms, k.ended,
          unnest(CASE WHEN k.usage IS NULL OR len(k.usage) = 0 THEN [NULL] ELSE k.usage END) AS u
        FROM k LEFT JOIN k p ON p.id = k.parent_id)`,
      params,
    )
    const calls: Fetched[] = []
    for (const r of rows) {
      const i = Number(r.idx)
      let c = calls[i]
      if (!c)
        calls[i] = c = {
          id: (r.id as string | null) ?? null,
          parent: Number(r.pidx),
          started_ms: Number(r.started_ms),
          ended: Boolean(r.ended),
          usage: [],
        }
      if (r.u_model === null || r.u_model === undefined) continue
      const u: Record<string, number | string | null> = {}
      for (const f of fields) {
        const v = r[`u_${f}`]
        u[f] = typeof v === 'bigint' ? Number(v) : (v as number | string | null)
      }
      c.usage.push(u)
    }
    return calls
  }

  /**
   * The same roll-up for requested calls only, done in SQL: without costs (whose prices are chosen per
   * call), the descendants' usage is summed per requested call and model where the calls are, and
   * only those sums come out — bringing 10,000 calls' usage rows to JavaScript cost more than all the
   * rest. The entries summed are those ownUsage keeps; the descent follows parents within the fetched
   * calls, as rollUp does. (No order before the limit: past it the answer is 413 or smaller batches,
   * whichever calls were cut.)
   */
  private async rolledUp(
    project: string,
    traces: string[],
    limit: number,
    ids: string[],
  ): Promise<{ calls: number; open: number; usage: Record<string, UsageMap> }> {
    const params = new Params()
    const calls = this.traceCalls(project, traces, params)
    const wanted = params.add(listValue(ids))
    const prompt = 'coalesce(u.prompt_tokens, 0) + coalesce(u.input_tokens, 0)'
    const completion = 'coalesce(u.completion_tokens, 0) + coalesce(u.output_tokens, 0)'
    const rows = await this.store.rows(
      `WITH RECURSIVE k AS MATERIALIZED (${calls} LIMIT ${params.add(limit)}),
        d(root, id) AS (
          SELECT id, id FROM k WHERE id IN (SELECT unnest(${wanted}))
          UNION SELECT d.root, k.id FROM d JOIN k ON k.parent_id = d.id AND k.id <> d.id),
        e AS (
          SELECT id, u.model AS model, coalesce(u.requests, 0) AS requests, ${prompt} AS prompt, ${completion} AS completion,
            CASE WHEN coalesce(u.total_tokens, 0) <> 0 THEN u.total_tokens ELSE ${prompt} + ${completion} END AS total,
            coalesce(u.cache_read_input_tokens, 0) AS cache_read, coalesce(u.cache_creation_input_tokens, 0) AS cache_creation
          FROM (SELECT id, unnest(usage) AS u FROM k WHERE usage IS NOT NULL) WHERE u.model IS NOT NULL),
        s AS (
          SELECT d.root, e.model, sum(requests) AS requests, sum(prompt) AS prompt, sum(completion) AS completion, sum(total) AS total,
            sum(cache_read) AS cache_read, sum(cache_creation) AS cache_creation
          FROM d JOIN e USING (id)
          WHERE requests <> 0 OR prompt <> 0 OR completion <> 0 OR total <> 0 OR cache_read <> 0 OR cache_creation <> 0
          GROUP BY ALL)
      SELECT n.calls, n.open, s.* FROM (SELECT count(*) AS calls, count(*) FILTER (WHERE NOT ended) AS open FROM k) n LEFT JOIN s ON true`,
      params,
    )
    const usage: Record<string, UsageMap> = {}
    for (const r of rows) {
      if (r.root === null || r.root === undefined) continue
      ;(usage[String(r.root)] ??= {})[String(r.model)] = {
        requests: Number(r.requests),
        prompt_tokens: Number(r.prompt),
        completion_tokens: Number(r.completion),
        total_tokens: Number(r.total),
        cache_read_input_tokens: Number(r.cache_read),
        cache_creation_input_tokens: Number(r.cache_creation),
        prompt_tokens_total_cost: null,
        completion_tokens_total_cost: null,
        cache_read_input_tokens_total_cost: null,
        cache_creation_input_tokens_total_cost: null,
      }
    }
    return { calls: Number(rows[0]?.calls ?? 0), open: Number(rows[0]?.open ?? 0), usage }
  }

  /** One batch of traces: the requested calls' totals, from SQL without prices, per call in JavaScript with them. */
  private async batchUsage(
    project: string,
    traces: string[],
    limit: number,
    ids: string[],
    prices: readonly PriceRow[] | null,
  ): Promise<{ calls: number; open: number; usage: Record<string, UsageMap> }> {
    if (!prices) return this.rolledUp(project, traces, limit, ids)
    const calls = await this.fetch(project, { trace_ids: traces }, null, limit, ids)
    const totals = rollUp(calls, project, prices)
    const usage: Record<string, UsageMap> = {}
    for (const [i, c] of calls.entries()) if (c.id !== null) usage[c.id] = totals[i]!
    return { calls: calls.length, open: calls.filter((c) => !c.ended).length, usage }
  }

  /**
   * `/calls/usage`: each requested call with all its descendants. Traces are fetched in batches of
   * at most `limit` calls (a batch over it is halved); a single trace over it is 413 — never a
   * partial answer.
   */
  async calls(
    project: string,
    ids: string[],
    includeCosts: boolean,
    limit: number,
  ): Promise<{ call_usage: Record<string, UsageMap>; unfinished_call_ids: string[] }> {
    if (!Number.isInteger(limit) || limit < 1) throw new DomainError(400, 'limit must be at least 1')
    const wanted = [...new Set(ids)]
    const result: Record<string, UsageMap> = Object.fromEntries(wanted.map((id) => [id, {}]))
    if (wanted.length === 0) return { call_usage: result, unfinished_call_ids: [] }
    const traces = await this.tracesOf(project, wanted)
    const prices = includeCosts ? await this.prices.forProject(project) : null
    const unfinished = new Set<string>()
    await inTraceBatches(
      traces,
      limit,
      (batch, max) => this.batchUsage(project, batch, max, wanted, prices),
      (got) => got.calls,
      async (got, batch) => {
        Object.assign(result, got.usage)
        if (got.open > 0) for (const id of await this.unfinished(project, batch)) unfinished.add(id)
      },
    )
    return { call_usage: result, unfinished_call_ids: [...unfinished].sort() }
  }

  /** `/trace/usage`: the calls matching filter and query (up to limit), each with its fetched descendants. */
  async traces(
    project: string,
    filter: CallFilter | null | undefined,
    query: QueryOptions['query'],
    includeCosts: boolean,
    limit: number,
  ): Promise<{ call_usage: Record<string, UsageMap>; unfinished_call_ids: string[] }> {
    if (!Number.isInteger(limit) || limit < 1) throw new DomainError(400, 'limit must be at least 1')
    const calls = await this.fetch(project, filter ?? {}, query, limit, null)
    return traceUsageAnswer(calls, project, includeCosts ? await this.prices.forProject(project) : null)
  }
}
