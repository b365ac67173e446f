import type { CallPart, CallRecord, QueryOptions } from '../calls/model.js'
import type { RecordBatch, Schema } from 'apache-arrow'
import { toCall } from '../calls/read/to-call.js'
import { chArrowPlan, rowsToBatch } from './arrow.js'
import type { Executor, Row, Settings } from './executor.js'
import { insertTarget, readSettings, writeSettings, type Layout } from './layout.js'
import { migrate } from './migrations.js'
import { partRow, SeqClock } from './parts.js'
import { chCountSql, chDistinctRefsSql, chLiveByIdsSql, chSelectSql } from './calls-sql.js'
import { ChParams } from './query/params.js'
import { mapTimeout, timeoutSettings, withTimeout } from './settings.js'

export interface ClickHouseCallsOptions extends Layout {
  /**
   * Settings for every insert: what ClickHouse must have done before a write is acknowledged
   * (`insert_quorum`, `async_insert` with `wait_for_async_insert`; see executor.ts Settings).
   */
  insertSettings?: Settings
  /** `--query-timeout-ms`: a read running longer is stopped by ClickHouse and answers 504 (settings.ts). */
  queryTimeoutMs?: number
}

/**
 * Calls on ClickHouse: parts are inserted into call_parts (a materialized view folds them into
 * calls_merged and their usage into call_usage), and reads merge calls_merged's rows per call. The
 * same parts in, the same calls out (toCall) as the embedded store (calls/store.ts).
 */
export class ClickHouseCalls {
  private readonly clock = new SeqClock()
  private readonly reads: Settings
  private readonly writes: Settings

  private constructor(
    readonly exec: Executor,
    private readonly opts: ClickHouseCallsOptions,
  ) {
    this.reads = { ...readSettings(opts), ...timeoutSettings(opts.queryTimeoutMs) }
    this.writes = { ...writeSettings(opts), ...opts.insertSettings }
  }

  /** Applies any pending migrations, then serves. */
  static async open(exec: Executor, opts: ClickHouseCallsOptions): Promise<ClickHouseCalls> {
    await migrate(exec, opts)
    // A misspelt setting (`--clickhouse-insert-settings`) fails the start, not the first acknowledged write.
    if (opts.insertSettings && Object.keys(opts.insertSettings).length > 0)
      await exec.query('SELECT 1', {}, opts.insertSettings).catch((e: Error) => {
        throw new Error(`clickhouse-insert-settings: ClickHouse refused them: ${e.message}`)
      })
    return new ClickHouseCalls(exec, opts)
  }

  /** Resolves once ClickHouse has acknowledged the parts (under the insert settings). Later parts win. */
  async ingest(parts: CallPart[]): Promise<void> {
    if (parts.length === 0) return
    const rows = parts.map((p) => partRow(p, this.clock.next()))
    await this.exec.insert(insertTarget(this.opts, 'call_parts'), rows, this.writes)
  }

  async query(project: string, opts: QueryOptions): Promise<CallRecord[]> {
    const params = new ChParams()
    const sql = chSelectSql(this.opts, project, opts, params)
    return (await this.rows(sql, params)).map(toCall)
  }

  /** A read's rows, under the read settings; ClickHouse's timeout becomes the embedded store's 504. */
  private rows(sql: string, params: ChParams): Promise<Row[]> {
    return withTimeout(this.opts.queryTimeoutMs, () => this.exec.query(sql, params.values, this.reads))
  }

  /**
   * The same as query, a batch at a time as the consumer pulls (see Executor.stream). The SQL is
   * built here, before the first pull, so a bad query fails at the call rather than mid-stream.
   */
  stream(project: string, opts: QueryOptions): AsyncGenerator<CallRecord[]> {
    const params = new ChParams()
    const sql = chSelectSql(this.opts, project, opts, params)
    return this.streamRows(sql, params)
  }

  private async *streamRows(sql: string, params: ChParams): AsyncGenerator<CallRecord[]> {
    for await (const rows of this.rowBatches(sql, params)) yield rows.map(toCall)
  }

  private async *rowBatches(sql: string, params: ChParams): AsyncGenerator<Row[]> {
    try {
      yield* this.exec.stream(sql, params.values, this.reads)
    } catch (e) {
      throw mapTimeout(e, this.opts.queryTimeoutMs)
    }
  }

  /** The same as stream, as Arrow record batches (arrow.ts): a batch per batch of rows ClickHouse streams. */
  streamArrow(
    project: string,
    opts: QueryOptions & { columns?: string[] | null },
  ): { schema: Schema; batches: AsyncGenerator<RecordBatch> } {
    const params = new ChParams()
    const sql = chSelectSql(this.opts, project, opts, params)
    const plan = chArrowPlan(opts.columns)
    const rows = this.rowBatches(sql, params)
    async function* batches() {
      for await (const r of rows) if (r.length) yield rowsToBatch(plan, r)
    }
    return { schema: plan.schema, batches: batches() }
  }

  async count(project: string, opts: QueryOptions): Promise<number> {
    const params = new ChParams()
    const [r] = await this.rows(chCountSql(this.opts, project, opts, params), params)
    return Number(r!.n)
  }

  /** The distinct refs at JSON paths of the calls a filter matches, at most `limit` (see CallBackend.distinctRefs). */
  async distinctRefs(project: string, filter: QueryOptions['filter'], paths: string[][], limit: number): Promise<string[]> {
    const params = new ChParams()
    const sql = chDistinctRefsSql(this.opts, project, filter, paths, limit, params)
    return (await this.rows(sql, params)).map((r) => String(r.r))
  }

  /** A call by id, merged; null when unknown or deleted. */
  async read(project: string, id: string): Promise<CallRecord | null> {
    const [call] = await this.query(project, { filter: { call_ids: [id] }, limit: 1 })
    return call ?? null
  }

  /** The given live calls and all their live descendants, a tree level per query. */
  async withDescendants(project: string, ids: string[]): Promise<string[]> {
    const seen = new Set<string>()
    let level = await this.liveIds(project, [...new Set(ids)], 'id')
    while (level.length) {
      for (const id of level) seen.add(id)
      level = (await this.liveIds(project, level, 'parent')).filter((id) => !seen.has(id))
    }
    return [...seen]
  }

  private async liveIds(project: string, ids: string[], by: 'id' | 'parent'): Promise<string[]> {
    const params = new ChParams()
    const sql = chLiveByIdsSql(this.opts, project, ids, by, params)
    return (await this.rows(sql, params)).map((r) => String(r.id))
  }
}
