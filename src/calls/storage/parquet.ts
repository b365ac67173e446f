import path from 'node:path'
import type { DuckDBConnection } from '@duckdb/node-api'
import { checkName, type Segment } from './segments.js'

/**
 * Segment files. Row groups of 8,192 parts rather than DuckDB's 122,880: a read takes a row group's column chunks
 * whole, so with ~3 KB calls one group of a flushed segment was ~80 MB of JSON in memory per reading thread, and
 * a compaction under a 256 MiB budget ran out of memory however small its id ranges (it completes now: 60k calls,
 * 168 MB, in 16 ranges). Smaller groups also let an id range or an id lookup skip the groups outside it (segments
 * are sorted by project and id): a page's fetch of 100 whole calls took 0.10-0.13 s against 0.50 s (bench/README).
 * With memory to spare (2 GiB, 60k calls, one range) the fold took 14.1 / 14.0 s against 16.4 / 17.8 s with default
 * groups (load 6-8; an earlier trial of 16,384 had found compaction 2-3x slower); files are 0.2 % larger.
 */
export const PARQUET = 'FORMAT parquet, COMPRESSION zstd, ROW_GROUP_SIZE 8192'

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

/**
 * The parts in these segment files (quoted paths, as segmentFiles and sqlPath give them) followed by `rest`'s, by
 * column name: the shape of every parts view, the store's (refreshView) and a reader worker's (readers/worker-read.ts).
 */
export function partsOver(files: readonly string[], rest: string): string {
  return files.length ? `SELECT * FROM read_parquet([${files.join(', ')}], union_by_name = true) UNION ALL BY NAME ${rest}` : rest
}

/**
 * The relations queries read, replaced together in one transaction (a statement sees all of one moment):
 * `all_parts`, every segment then the tail; `tail_parts`, the tail alone; and two halves of all_parts, `settled_parts`, the compacted segments, where each
 * call is one merged row and no two segments share a call (compact.ts), and `fresh_parts`, the flushed segments and
 * the tail. A call without fresh parts is its settled row as it is, without a merge (read/merged.ts `settledSplit`).
 */
export async function refreshView(maint: DuckDBConnection, dir: string, segments: readonly Segment[]): Promise<void> {
  const tail = 'SELECT * EXCLUDE (wal_gen) FROM call_parts'
  const over = (list: readonly Segment[], rest: string) => partsOver(segmentFiles(dir, list), rest)
  const settled = segments.filter((x) => x.level)
  await maint.run('BEGIN')
  try {
    await maint.run(`CREATE OR REPLACE VIEW all_parts AS ${over(segments, tail)}`)
    await maint.run(`CREATE OR REPLACE VIEW tail_parts AS ${tail}`)
    await maint.run(`CREATE OR REPLACE VIEW settled_parts AS ${over(settled, `${tail} WHERE false`)}`)
    await maint.run(
      `CREATE OR REPLACE VIEW fresh_parts AS ${over(
        segments.filter((x) => !x.level),
        tail,
      )}`,
    )
    await maint.run('COMMIT')
  } catch (e) {
    await maint.run('ROLLBACK').catch(() => {})
    throw e
  }
}
