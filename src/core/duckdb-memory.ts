import fs from 'node:fs/promises'
import path from 'node:path'
import type { DuckDBConnection, DuckDBInstance } from '@duckdb/node-api'
import { sizeBytes } from './config.js'

/**
 * The process's DuckDB memory budget (`--memory-limit`), shared between its two instances. The calls store gets
 * most: its tail is an in-memory table and its page queries merge parts; the catalog is a database file, so
 * DuckDB can evict its pages to it, and it needs room only for a table's sort or a large insert.
 */
export const BUDGET_SHARES = { calls: 0.75, catalog: 0.25 } as const
export type DuckDBRole = keyof typeof BUDGET_SHARES
/** Spill directories: one per instance's role, and one for the reader threads' instances (see readerSplit). */
type SpillRole = DuckDBRole | 'readers' | 'blocks' | 'compaction'

/** Where an instance spills past its limit: under the data directory (the disk the operator sized), one per role. */
export function spillDir(dataDir: string, role: SpillRole): string {
  return path.join(dataDir, 'spill', role)
}

/**
 * The settings that hold an instance to its share: past `memory_limit` DuckDB writes buffers to `temp_directory`
 * (sorts, hash tables and in-memory tables alike) rather than growing, and fails a query only when even that
 * cannot free enough.
 */
export function duckdbMemorySettings(budget: number, role: DuckDBRole, dir: string): Record<string, string> {
  return { memory_limit: memoryLimitSetting(budget * BUDGET_SHARES[role]), temp_directory: dir }
}

/** `memory_limit` as DuckDB takes it (whole KiB, so a computed share never needs quoting rules). */
export function memoryLimitSetting(bytes: number): string {
  return `${Math.max(1, Math.floor(bytes / 1024))}KiB`
}

/**
 * The store's share when reader threads (WEFT_READERS) run its exports, each in a DuckDB of its own: the readers
 * take half of it, split evenly, and the store's instance keeps the other half. An export would otherwise run in
 * the store's instance, so the work is the same and the process stays within its budget.
 */
export function readerSplit(budget: number, threads: number): { store: number; perReader: number } {
  const share = budget * BUDGET_SHARES.calls
  return { store: share / 2, perReader: share / 2 / Math.max(1, threads) }
}

/** Spill files a killed process left behind: nothing reads them again, so a start (holding the lock) removes them. */
export async function cleanSpill(dir: string): Promise<void> {
  await fs.rm(dir, { recursive: true, force: true })
  // DuckDB creates the last level itself but not its parents: without them the first spill fails.
  await fs.mkdir(dir, { recursive: true })
}

const instances = new Map<DuckDBRole, DuckDBInstance>()

/** Registers the instance /admin/stats reports for a role (the latest opened; an embedding process has one server). */
export function reportMemory(role: DuckDBRole, instance: DuckDBInstance): void {
  instances.set(role, instance)
}

export function forgetMemory(role: DuckDBRole, instance: DuckDBInstance): void {
  if (instances.get(role) === instance) instances.delete(role)
}

export interface DuckDBMemory {
  limit_bytes: number
  /** Bytes DuckDB's buffer manager holds in memory now (tables, sorts, hash tables, caches). */
  in_use_bytes: number
  /** Bytes written to the spill directory now. */
  spilled_bytes: number
  /** What holds them: DuckDB's tags (IN_MEMORY_TABLE, HASH_TABLE, ORDER_BY, …) with any memory or spill. */
  by_tag: Record<string, { in_use_bytes: number; spilled_bytes: number }>
}

/** Each registered instance's limit and use, read from DuckDB itself (`duckdb_memory()`). */
export async function duckdbMemory(): Promise<Partial<Record<DuckDBRole, DuckDBMemory>>> {
  const out: Partial<Record<DuckDBRole, DuckDBMemory>> = {}
  for (const [role, instance] of instances) {
    try {
      const conn = await instance.connect()
      try {
        out[role] = await readMemory(conn)
      } finally {
        conn.closeSync()
      }
    } catch {
      // Closed meanwhile (a server stopped in an embedding process): nothing to report.
      instances.delete(role)
    }
  }
  return out
}

async function readMemory(conn: DuckDBConnection): Promise<DuckDBMemory> {
  const limit = (await conn.runAndReadAll("SELECT current_setting('memory_limit')")).getRows()[0]![0]
  const tags = (await conn.runAndReadAll('SELECT tag, memory_usage_bytes, temporary_storage_bytes FROM duckdb_memory()')).getRows()
  const out: DuckDBMemory = { limit_bytes: sizeBytes(String(limit)), in_use_bytes: 0, spilled_bytes: 0, by_tag: {} }
  for (const [tag, used, spilled] of tags) {
    out.in_use_bytes += Number(used)
    out.spilled_bytes += Number(spilled)
    if (Number(used) || Number(spilled)) out.by_tag[String(tag)] = { in_use_bytes: Number(used), spilled_bytes: Number(spilled) }
  }
  return out
}
