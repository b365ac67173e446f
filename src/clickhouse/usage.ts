import { DomainError } from '../core/errors.js'
import { USAGE_FIELDS, type CallFilter, type QueryOptions } from '../calls/model.js'
import type { PriceRow } from '../catalog/prices.js'
import type { UsageAnswer, UsageEngine } from '../stats/backend.js'
import { inTraceBatches, rollUp, traceUsageAnswer, type Fetched, type UsageMap } from '../stats/usage.js'
import { chMatching } from './calls-sql.js'
import type { ClickHousePrices } from './costs.js'
import { ChParams } from './query/params.js'
import type { ChReader } from './stats.js'
import { chLatestUsageSql } from './stats-sql.js'

/**
 * `/calls/usage` and `/trace/usage` on ClickHouse: the calls of the requested traces (or the
 * matching calls) come out of ClickHouse with their usage rows, and are rolled up the embedded
 * engine's way (stats/usage.ts rollUp: the same per-call entries, prices and descent), with the same
 * batching by trace and the same 413 for a single trace past the limit.
 */
export class ClickHouseUsage implements UsageEngine {
  constructor(
    private readonly reader: ChReader,
    private readonly prices: Pick<ClickHousePrices, 'forProject'>,
  ) {}

  /** The calls (up to limit, by start) matching filter and query, with their usage; parents as indexes into the list. */
  private async fetch(project: string, opts: QueryOptions, limit: number): Promise<Fetched[]> {
    const params = new ChParams()
    const l = this.reader.opts
    const k = `SELECT m.id AS id, m.parent_id AS parent_id, toUnixTimestamp64Milli(m.started_at) AS started_ms, m.ended_at IS NOT NULL AS ended
      FROM ${chMatching(l, project, opts, params, [], ['parent_id', 'ended_at'])} ORDER BY m.started_at, m.id LIMIT ${params.add(limit, 'UInt64')}`
    const usage = chLatestUsageSql(l, params.add(project, 'String'), `(SELECT id FROM (${k}))`)
    const rows = await this.reader.rows(
      `SELECT k.id AS id, k.parent_id AS parent_id, k.started_ms AS started_ms, k.ended AS ended, u.model AS model,
        ${USAGE_FIELDS.map((f) => `u.${f} AS u_${f}`).join(', ')}
      FROM (${k}) AS k LEFT JOIN (${usage}) AS u ON u.id = k.id
      ORDER BY started_ms, id`,
      params,
      { join_use_nulls: 1 },
    )
    const calls: Fetched[] = []
    const index = new Map<string, number>()
    const parents: (string | null)[] = []
    for (const r of rows) {
      const id = String(r.id)
      let i = index.get(id)
      if (i === undefined) {
        index.set(id, (i = calls.length))
        calls.push({ id, parent: -1, started_ms: Number(r.started_ms), ended: Boolean(Number(r.ended)), usage: [] })
        parents.push((r.parent_id as string | null) ?? null)
      }
      if (r.model === null || r.model === undefined) continue
      const u: Record<string, number | string | null> = { model: String(r.model) }
      for (const f of USAGE_FIELDS) u[f] = r[`u_${f}`] === null ? null : Number(r[`u_${f}`])
      calls[i]!.usage.push(u)
    }
    parents.forEach((p, i) => (calls[i]!.parent = p === null ? -1 : (index.get(p) ?? -1)))
    return calls
  }

  /** The traces of these calls (those that are live), sorted. */
  private async tracesOf(project: string, ids: string[]): Promise<string[]> {
    const params = new ChParams()
    const rows = await this.reader.rows(
      `SELECT DISTINCT m.trace_id AS trace_id FROM ${chMatching(this.reader.opts, project, { filter: { call_ids: ids } }, params, [], ['trace_id'])} AND m.trace_id IS NOT NULL`,
      params,
    )
    return rows.map((r) => String(r.trace_id)).sort()
  }

  async calls(project: string, ids: string[], includeCosts: boolean, limit: number): Promise<UsageAnswer> {
    if (!Number.isInteger(limit) || limit < 1) throw new DomainError(400, 'limit must be at least 1')
    const wanted = [...new Set(ids)]
    const result: Record<string, UsageMap> = Object.fromEntries(wanted.map((id) => [id, {}]))
    if (wanted.length === 0) return { call_usage: result, unfinished_call_ids: [] }
    const want = new Set(wanted)
    const traces = await this.tracesOf(project, wanted)
    const prices = includeCosts ? await this.prices.forProject(project) : null
    const unfinished = new Set<string>()
    await inTraceBatches(
      traces,
      limit,
      (batch, max) => this.fetch(project, { filter: { trace_ids: batch } }, max),
      (calls) => calls.length,
      (calls) => {
        const totals = rollUp(calls, project, prices)
        calls.forEach((c, i) => {
          if (want.has(c.id!)) result[c.id!] = totals[i]!
          if (!c.ended) unfinished.add(c.id!)
        })
      },
    )
    return { call_usage: result, unfinished_call_ids: [...unfinished].sort() }
  }

  async traces(
    project: string,
    filter: CallFilter | null | undefined,
    query: QueryOptions['query'],
    includeCosts: boolean,
    limit: number,
  ): Promise<UsageAnswer> {
    if (!Number.isInteger(limit) || limit < 1) throw new DomainError(400, 'limit must be at least 1')
    const calls = await this.fetch(project, { filter: filter ?? {}, query }, limit)
    return traceUsageAnswer(calls, project, includeCosts ? await this.prices.forProject(project) : null)
  }
}
