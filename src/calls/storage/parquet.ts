import path from 'node:path'
import type { DuckDBConnection } from '@duckdb/node-api'
import { checkName, type Segment } from './segments.js'

/** Segment files. (Row groups of 16,384 instead of the default 122,880 made compaction 2-3× slower and statistics no faster.) */
export const PARQUET = 'FORMAT parquet, COMPRESSION zstd'

/**
 * A file path as a quoted SQL string. Paths are the operator's data directory plus checked file names, never a
 * client's value; the quotes are doubled so a directory named with a quote still works.
 */
export const sqlPath = (file: string) => `'${file.replaceAll("'", "''")}'`

/** The segments' files as quoted SQL strings. File names come from the manifest and are checked. */
export function segmentFiles(dir: string, segments: readonly Segment[]): string[] {
  return segments.map((s) => sqlPath(path.join(dir, checkName(s.file))))
}

/** The number of parts and the lowest and highest seq of a Parquet file just written. */
export async function fileStats(maint: DuckDBConnection, file: string): Promise<{ n: number; lo: number; hi: number }> {
  const stats = (
    await maint.runAndReadAll(`SELECT count(*)::BIGINT AS n, min(seq) AS lo, max(seq) AS hi FROM read_parquet(${sqlPath(file)})`)
  ).getRowObjectsJS()[0]!
  return { n: Number(stats.n), lo: Number(stats.lo ?? 0), hi: Number(stats.hi ?? 0) }
}

/** The relation queries read: every segment, then the tail. */
export async function refreshView(maint: DuckDBConnection, dir: string, segments: readonly Segment[]): Promise<void> {
  const files = segmentFiles(dir, segments)
  const sql = files.length
    ? `CREATE OR REPLACE VIEW all_parts AS SELECT * FROM read_parquet([${files.join(', ')}], union_by_name = true) UNION ALL BY NAME SELECT * EXCLUDE (wal_gen) FROM call_parts`
    : 'CREATE OR REPLACE VIEW all_parts AS SELECT * EXCLUDE (wal_gen) FROM call_parts'
  await maint.run(sql)
}
