import { randomUUID } from 'node:crypto'
import { DomainError } from '../core/errors.js'
import { fromDb, Prices, purgeIds, type CostInput, type PriceRow } from '../catalog/prices.js'
import type { Catalog } from '../catalog/db.js'
import type { Executor, Row } from './executor.js'
import { insertTarget, localTable, onCluster, readSettings, table, writeSettings, type Layout } from './layout.js'
import { ChParams } from './query/params.js'

/** Milliseconds → DateTime64(6)'s plain text form (UTC). */
const dt = (ms: number) => new Date(ms).toISOString().replace('T', ' ').replace('Z', '')

/**
 * Prices with the project prices in ClickHouse's llm_token_prices (migration 2) instead of the
 * catalog: the same default book, ranking, `/cost/query` filtering and paging (inherited from
 * Prices, which reads rows through forProject), and the same errors. Nothing is cached: several
 * servers may share one ClickHouse, and a price one of them adds must count on all at once.
 */
export class ClickHousePrices extends Prices {
  constructor(
    private readonly exec: Executor,
    private readonly layout: Layout,
    defaults: readonly PriceRow[],
  ) {
    // The catalog is never touched: every method that would read it is overridden here.
    super(null as unknown as Catalog, defaults)
  }

  override async forProject(project: string): Promise<PriceRow[]> {
    const params = new ChParams()
    const rows = await this.exec.query(
      `SELECT id, pricing_level, pricing_level_id, provider_id, llm_id, toUnixTimestamp64Milli(effective_date) AS effective_ms,
        prompt_token_cost, completion_token_cost, cache_read_input_token_cost, cache_creation_input_token_cost,
        prompt_token_cost_unit, completion_token_cost_unit, created_by, toUnixTimestamp64Milli(created_at) AS created_at_ms
      FROM ${table(this.layout, 'llm_token_prices')}
      WHERE pricing_level = 'project' AND pricing_level_id = ${params.add(project, 'String')}`,
      params.values,
      readSettings(this.layout),
    )
    return [...rows.map(fromRow), ...this.defaults]
  }

  /** All the prices in one insert, after every date is checked: a request adds all of them or none. */
  override async create(project: string, userId: string, costs: Record<string, CostInput>): Promise<[string, string][]> {
    const now = Date.now()
    const rows: Row[] = []
    const ids: [string, string][] = []
    for (const [llm, c] of Object.entries(costs)) {
      const eff = c.effective_date ? Date.parse(c.effective_date) : now
      if (!Number.isFinite(eff)) throw new DomainError(400, `costs.${llm}.effective_date is not a date`)
      const id = randomUUID()
      rows.push({
        id,
        pricing_level: 'project',
        pricing_level_id: project,
        provider_id: c.provider_id ?? 'default',
        llm_id: llm,
        effective_date: dt(eff),
        prompt_token_cost: c.prompt_token_cost,
        completion_token_cost: c.completion_token_cost,
        cache_read_input_token_cost: c.cache_read_input_token_cost ?? 0,
        cache_creation_input_token_cost: c.cache_creation_input_token_cost ?? 0,
        prompt_token_cost_unit: c.prompt_token_cost_unit ?? 'USD',
        completion_token_cost_unit: c.completion_token_cost_unit ?? 'USD',
        created_by: userId,
        created_at: dt(now),
      })
      ids.push([id, llm])
    }
    if (rows.length) await this.exec.insert(insertTarget(this.layout, 'llm_token_prices'), rows, writeSettings(this.layout))
    this.version++
    return ids
  }

  /** A lightweight DELETE: the rows are hidden from every read at once (on a cluster, on every shard's table). */
  override async purge(project: string, query: unknown): Promise<void> {
    const ids = purgeIds(query)
    if (ids.length === 0) return
    const params = new ChParams()
    await this.exec.command(
      `DELETE FROM ${localTable(this.layout, 'llm_token_prices')}${onCluster(this.layout)}
      WHERE pricing_level = 'project' AND pricing_level_id = ${params.add(project, 'String')} AND has(${params.add(ids, 'Array(String)')}, id)`,
      params.values,
    )
    this.version++
  }
}

/** Project prices only live here (pricing_level is not a column of llm_token_prices). */
function fromRow(r: Row): PriceRow {
  return { ...fromDb(r), pricing_level: 'project' }
}
