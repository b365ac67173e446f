import { ClickHouseLogLevel, createClient, type ClickHouseClient, type ClickHouseSettings } from '@clickhouse/client'
import { BASE_SETTINGS, type Executor, type Row, type Settings } from './executor.js'

export interface HttpOptions {
  /** `http://host:8123` */
  url: string
  username?: string
  password?: string
  /** The database statements run in unless they name one (the backend names its tables in full). */
  database?: string
  /** Settings for every statement, on top of BASE_SETTINGS. */
  settings?: Settings
  requestTimeoutMs?: number
}

/**
 * The network path: ClickHouse's official client over HTTP. Parameters travel as `param_<name>`
 * URL parameters (never in the SQL text), settings as URL parameters, rows as JSONEachRow both ways;
 * `stream` reads the response body a chunk at a time, so a large result is never held whole.
 */
export class HttpExecutor implements Executor {
  readonly kind = 'http' as const
  private readonly client: ClickHouseClient

  constructor(opts: HttpOptions) {
    this.client = createClient({
      url: opts.url,
      username: opts.username,
      password: opts.password,
      database: opts.database,
      request_timeout: opts.requestTimeoutMs ?? 30_000,
      clickhouse_settings: { ...BASE_SETTINGS, ...opts.settings } as ClickHouseSettings,
      // Failures reach the caller as errors; the client's own log of them would say it twice.
      log: { level: ClickHouseLogLevel.OFF },
    })
  }

  async command(sql: string, params: Row = {}, settings: Settings = {}): Promise<void> {
    await this.client.command({ query: sql, query_params: params, clickhouse_settings: settings as ClickHouseSettings })
  }

  async query(sql: string, params: Row = {}, settings: Settings = {}): Promise<Row[]> {
    const rs = await this.client.query({
      query: sql,
      query_params: params,
      format: 'JSONEachRow',
      clickhouse_settings: settings as ClickHouseSettings,
    })
    return rs.json<Row>()
  }

  async *stream(sql: string, params: Row = {}, settings: Settings = {}): AsyncGenerator<Row[]> {
    const rs = await this.client.query({
      query: sql,
      query_params: params,
      format: 'JSONEachRow',
      clickhouse_settings: settings as ClickHouseSettings,
    })
    const body = rs.stream<Row>()
    try {
      for await (const rows of body) yield rows.map((r) => r.json<Row>())
    } finally {
      // A consumer that stops early must not leave the socket half read.
      body.destroy()
    }
  }

  async insert(table: string, rows: Row[], settings: Settings = {}): Promise<void> {
    if (rows.length === 0) return
    await this.client.insert({ table, values: rows, format: 'JSONEachRow', clickhouse_settings: settings as ClickHouseSettings })
  }

  async version(): Promise<string> {
    const [r] = await this.query('SELECT version() AS v')
    return String(r!.v)
  }

  close(): Promise<void> {
    return this.client.close()
  }
}
