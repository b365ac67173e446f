import { DomainError } from '../core/errors.js'

/** A row as ClickHouse's JSONEachRow gives it (64-bit integers as strings: see BASE_SETTINGS). */
export type Row = Record<string, unknown>

/**
 * ClickHouse settings passed with a statement. The ones that decide when a write is acknowledged:
 * - `insert_quorum` (replicated tables): the insert returns once this many replicas have it
 *   (`'auto'`: a majority); with `insert_quorum_parallel: 0` a read never sees a write the quorum lacks.
 * - `async_insert: 1`: the server buffers small inserts and writes them in batches (fewer parts);
 *   with `wait_for_async_insert: 1` (the default when async inserts are on) the insert still returns
 *   only once its batch is written, so an acknowledged write stays durable; with `0` it returns on
 *   receipt and a crash of the server can lose it.
 */
export type Settings = Record<string, string | number | boolean>

/**
 * Where the ClickHouse backend's SQL runs: a ClickHouse server over HTTP (http-executor.ts) or chdb,
 * ClickHouse in a process of its own (chdb-executor.ts). Every user value is a bound parameter: SQL
 * names it as `{name:Type}` and `params` holds its value.
 */
export interface Executor {
  readonly kind: 'http' | 'chdb'
  /** A statement without a result (DDL, INSERT … SELECT). */
  command(sql: string, params?: Row, settings?: Settings): Promise<void>
  /** A query's rows, all at once. */
  query(sql: string, params?: Row, settings?: Settings): Promise<Row[]>
  /** A query's rows a batch at a time, as the consumer pulls. Stop early with `return()`. */
  stream(sql: string, params?: Row, settings?: Settings): AsyncGenerator<Row[]>
  /** Rows into a table (`db.table`, plain identifiers) as JSONEachRow (acknowledged when ClickHouse acknowledges: see Settings). */
  insert(table: string, rows: Row[], settings?: Settings): Promise<void>
  /** The server's version (`SELECT version()`). */
  version(): Promise<string>
  close(): Promise<void>
}

/**
 * Settings every statement runs with, on both executors, so their answers have one shape: 64-bit
 * integers as JSON strings (exact past 2^53; toCall reads them with BigInt/Number) and UTC times.
 */
export const BASE_SETTINGS: Settings = {
  output_format_json_quote_64bit_integers: 1,
  session_timezone: 'UTC',
}

const IDENT = /^[A-Za-z_][A-Za-z0-9_]{0,63}$/

/** A database, cluster or table name as SQL: checked against a plain identifier's form, then back-quoted. */
export function ident(name: string): string {
  if (!IDENT.test(name)) throw new DomainError(400, `Not a ClickHouse identifier: ${JSON.stringify(name.slice(0, 80))}`)
  return '`' + name + '`'
}

/** A setting's name and value as SQL (`SETTINGS a = 1`), for chdb, which has no settings argument. */
export function settingsClause(settings: Settings): string {
  const items = Object.entries(settings).map(([k, v]) => {
    if (!/^[a-z_][a-z0-9_]*$/.test(k)) throw new DomainError(400, `Not a ClickHouse setting name: ${JSON.stringify(k)}`)
    if (typeof v === 'boolean') return `${k} = ${v ? 1 : 0}`
    if (typeof v === 'number' && Number.isFinite(v)) return `${k} = ${v}`
    if (typeof v === 'string' && /^[A-Za-z0-9_./:+-]*$/.test(v)) return `${k} = '${v}'`
    throw new DomainError(400, `Setting ${k} has a value ClickHouse settings cannot take here`)
  })
  return items.length ? ` SETTINGS ${items.join(', ')}` : ''
}
