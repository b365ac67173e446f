import fs from 'node:fs/promises'
import path from 'node:path'
import { DuckDBDataChunk, DuckDBInstance, type DuckDBConnection, type DuckDBType, type DuckDBValue } from '@duckdb/node-api'
import { MIGRATIONS } from './migrations.js'
import { defaultMemoryLimit } from '../core/config.js'
import { cleanSpill, duckdbMemorySettings, forgetMemory, reportMemory, spillDir } from '../core/duckdb-memory.js'
import { hit } from '../core/failpoints.js'
import { checkCatalogWal, WalGuard } from './wal-guard.js'

export const CATALOG_FILE = 'catalog.duckdb'

export class CatalogLockedError extends Error {}

/**
 * WAL size past which a commit checkpoints. DuckDB's 16 MB made every other 10 MB dataset chunk checkpoint, and a
 * checkpoint writes the row indexes whole, so a big table's ingest slowed with its size (seconds per commit near
 * 100k rows). Replaying a larger WAL after a crash costs a little more at the next start.
 */
const CHECKPOINT_THRESHOLD = '256MB'

/**
 * Rows per row group of the catalog file. DuckDB writes an append that fills whole row groups straight into the
 * database file, compressed, at its commit ("optimistic writes"), and logs only where it put them; smaller appends
 * go through the log and are compressed and written again at the next checkpoint. With DuckDB's 122,880 a dataset
 * chunk (~10,000 rows of ~1 KB) took the second way: every row written twice, and a 1.4-1.9 s checkpoint on one
 * commit per 256 MB. At 2,048 (DuckDB's least, its vector size) an append of 2,048 rows or more takes the first:
 * in process, 60 such chunks wrote no log and no checkpoint, took 16 % less wall time and 22 % less CPU, and the
 * file grew 35 % (smaller row groups compress less); scans and lookups by `seq` took the same time
 * (bench/README.md, 2026-12-06). DuckDB keeps the size per attachment, not in the file, so every open sets it.
 * Large table appends are staged so that the compression runs on DuckDB's threads (table-chunks.ts insertRows).
 */
export const ROW_GROUP_SIZE = 2048

/**
 * The catalog: a DuckDB database file holding small transactional state (keys now; objects,
 * tables, feedback and prices later). DuckDB runs statements on its own threads, so awaiting a
 * query here does not block the event loop. One process owns the file at a time.
 */
export class Catalog {
  private queue: Promise<unknown> = Promise.resolve()

  private constructor(
    private readonly instance: DuckDBInstance,
    /** Writes and transactions, one at a time (see transaction()). */
    private readonly conn: DuckDBConnection,
    /** Reads outside transactions: DuckDB's MVCC shows them only committed state. */
    private readonly readConn: DuckDBConnection,
    readonly file: string,
    /** Sums of the log's acknowledged stretches (wal-guard.ts): DuckDB alone drops a damaged last entry silently. */
    private readonly walGuard: WalGuard,
  ) {}

  /** `memoryLimit`: the process's DuckDB budget in bytes (`--memory-limit`); the catalog takes its share. */
  static async open(dataDir: string, opts: { memoryLimit?: number } = {}): Promise<Catalog> {
    await fs.mkdir(dataDir, { recursive: true })
    const file = path.join(dataDir, CATALOG_FILE)
    await checkCatalogWal(file)
    let instance: DuckDBInstance
    try {
      const spill = spillDir(dataDir, 'catalog')
      const memory = duckdbMemorySettings(opts.memoryLimit ?? defaultMemoryLimit(), 'catalog', spill)
      // The file is attached to an in-memory database rather than opened as the main one: only ATTACH takes a row
      // group size. It keeps the name the file gives it, "catalog", and is every connection's default.
      instance = await DuckDBInstance.create(':memory:', { checkpoint_threshold: CHECKPOINT_THRESHOLD, ...memory })
      await attach(instance, file)
      // Only now, with the file's lock held, are leftover spill files surely no other process's.
      await cleanSpill(spill)
    } catch (e) {
      const msg = (e as Error).message
      if (/Could not set lock/i.test(msg)) throw new CatalogLockedError(msg)
      // DuckDB's checksum errors do not say which database: a start refusing a damaged catalog names the file.
      throw new Error(`catalog ${file} cannot be opened: ${msg}`, { cause: e })
    }
    const cat = new Catalog(instance, await connect(instance), await connect(instance), file, await WalGuard.open(file))
    reportMemory('catalog', instance)
    await cat.migrate()
    return cat
  }

  /**
   * Applies, in order and in one transaction, the migrations this file has not seen: a start upgrades the catalog
   * wholly or not at all. One commit rather than one per migration also spares a fresh catalog (every test server's)
   * eight pairs of syncs to disk (DuckDB's log and the WAL guard's record).
   */
  private async migrate(): Promise<void> {
    await this.conn.run(
      'CREATE TABLE IF NOT EXISTS schema_migrations (version INTEGER PRIMARY KEY, name VARCHAR NOT NULL, applied_at TIMESTAMP NOT NULL)',
    )
    const rows = await this.all<{ version: number }>('SELECT version FROM schema_migrations')
    const applied = new Set(rows.map((r) => Number(r.version)))
    const pending = MIGRATIONS.filter((m) => !applied.has(m.version))
    if (!pending.length) return
    await this.transaction(async (tx) => {
      for (const m of pending) {
        for (const stmt of m.statements) await tx.run(stmt)
        await tx.run('INSERT INTO schema_migrations VALUES ($1, $2, now())', [m.version, m.name])
      }
    })
  }

  async schemaVersion(): Promise<number> {
    const [r] = await this.all<{ v: number | null }>('SELECT max(version) AS v FROM schema_migrations')
    return Number(r?.v ?? 0)
  }

  /** A single write statement, in its own transaction. */
  run(sql: string, params: DuckDBValue[] = []): Promise<void> {
    return this.transaction((tx) => tx.run(sql, params))
  }

  async all<T>(sql: string, params: DuckDBValue[] = []): Promise<T[]> {
    return rows<T>(this.readConn, sql, params)
  }

  /**
   * Runs fn inside BEGIN/COMMIT on the write connection. Transactions are serialised: two
   * BEGINs interleaved on one connection would merge their statements.
   */
  transaction<T>(fn: (tx: Tx) => Promise<T>): Promise<T> {
    const conn = this.conn
    const tx: Tx = {
      run: async (sql, params = []) => {
        await conn.run(sql, params)
      },
      all: (sql, params = []) => rows(conn, sql, params),
      append: (table, types, columns) => append(conn, table, types, columns),
    }
    const next = this.queue.then(async () => {
      await conn.run('BEGIN TRANSACTION')
      try {
        const out = await fn(tx)
        hit('catalog.before-commit')
        await this.conn.run('COMMIT')
        hit('catalog.after-commit')
        await this.walGuard.record()
        return out
      } catch (e) {
        await this.conn.run('ROLLBACK').catch(() => {})
        throw e
      }
    })
    this.queue = next.catch(() => {})
    return next
  }

  async close(): Promise<void> {
    await this.queue
    // A checkpoint folds the WAL into the file so the next open does not replay it.
    await this.conn.run('CHECKPOINT').catch(() => {})
    await this.walGuard.close()
    forgetMemory('catalog', this.instance)
    this.readConn.closeSync()
    this.conn.closeSync()
    this.instance.closeSync()
  }
}

export interface Tx {
  run(sql: string, params?: DuckDBValue[]): Promise<void>
  all<T>(sql: string, params?: DuckDBValue[]): Promise<T[]>
  /**
   * Appends rows to `table` (every column, in table order; `columns[c][r]` is row r's value of column c) through
   * DuckDB's appender: no SQL text to parse, several times faster than an INSERT of the same rows. It runs in
   * this transaction, so a failure later in it stores none of them.
   */
  append(table: string, types: DuckDBType[], columns: AppendColumn[]): Promise<void>
}

/**
 * A column written into each data chunk by the caller (append-columns.ts) rather than value by value: the values
 * of `setColumnValues` are converted one by one on the event loop. `fill` writes rows [at, at + size) of the
 * column into column `column` of `chunk`, whose rows start at 0.
 */
export interface ColumnFill {
  readonly length: number
  fill(chunk: DuckDBDataChunk, column: number, at: number, size: number): void
}

export type AppendColumn = readonly DuckDBValue[] | ColumnFill

/** DuckDB's vector size: a data chunk holds at most this many rows. */
const CHUNK_CAPACITY = 2048

async function append(conn: DuckDBConnection, table: string, types: DuckDBType[], columns: AppendColumn[]): Promise<void> {
  const n = columns[0]?.length ?? 0
  if (n === 0) return
  // `temp.<name>`: a temporary table (DuckDB's `temp` database); any other name is the catalog's.
  const [catalog, name] = table.startsWith('temp.') ? ['temp', table.slice(5)] : [null, table]
  const appender = await conn.createAppender(name, catalog && 'main', catalog)
  try {
    for (let at = 0; at < n; at += CHUNK_CAPACITY) {
      const size = Math.min(CHUNK_CAPACITY, n - at)
      const chunk = DuckDBDataChunk.create(types, size)
      columns.forEach((col, c) => (isFill(col) ? col.fill(chunk, c, at, size) : chunk.setColumnValues(c, col.slice(at, at + size))))
      appender.appendDataChunk(chunk)
    }
    appender.flushSync()
  } finally {
    try {
      appender.closeSync()
    } catch {
      // A failed flush leaves rows the close would flush again; the error already thrown is the one that counts.
    }
  }
}

const isFill = (col: AppendColumn): col is ColumnFill => !Array.isArray(col)

/** The catalog's name in SQL, as DuckDB names a file opened directly (`catalog.duckdb`). */
const DB_NAME = '"catalog"'

async function attach(instance: DuckDBInstance, file: string): Promise<void> {
  // ATTACH takes no bound parameter for its path: the data directory's path (configuration, not a request) goes in
  // as a quoted string.
  const quoted = `'${file.replaceAll("'", "''")}'`
  const conn = await instance.connect()
  try {
    await conn.run(`ATTACH ${quoted} AS ${DB_NAME} (ROW_GROUP_SIZE ${ROW_GROUP_SIZE})`) // sql: the data directory's path, quoted
  } finally {
    conn.closeSync()
  }
}

/** A connection whose statements name the catalog's tables without a database. */
async function connect(instance: DuckDBInstance): Promise<DuckDBConnection> {
  const conn = await instance.connect()
  await conn.run(`USE ${DB_NAME}`)
  return conn
}

async function rows<T>(conn: DuckDBConnection, sql: string, params: DuckDBValue[]): Promise<T[]> {
  const reader = await conn.runAndReadAll(sql, params)
  return reader.getRowObjectsJS() as T[]
}
