import fs from 'node:fs/promises'
import path from 'node:path'
import type { DuckDBConnection } from '@duckdb/node-api'
import { hit } from '../../core/failpoints.js'
import { FOLDED } from '../model.js'
import { segmentFiles, sqlPath } from './parquet.js'
import { blockFileReadable, forgetBlockFile } from './page-blocks.js'
import { checkName, fileName, fsyncPath, ownFiles, writeManifest, type Manifest, type Segment } from './segments.js'
import type { StorageState } from './state.js'

/** Large JSON columns: a page fetches them for its own calls only, so the index leaves them out. */
const HEAVY = new Set(['attributes', 'inputs', 'output', 'summary', 'usage'])

/** The folded columns a page index holds: all a page filters and sorts on, but the JSON columns and ref lists. */
export const INDEX_FOLDED = FOLDED.filter((c) => !HEAVY.has(c))

/** `WEFT_PAGE_INDEX=off` leaves the index unused and unbuilt (pages merge as before): a way to compare, and out. */
export const pageIndexEnabled = process.env.WEFT_PAGE_INDEX !== 'off'

/** An index row: a compacted call's light columns, with the seq its merge with later parts needs. */
export const INDEX_COLUMNS = ['project_id', 'id', 'seq', ...INDEX_FOLDED, 'deleted_at']

/**
 * Rows per row group. A newest-first page reads a project's newest groups until it has its calls:
 * smaller groups read less past the page (16k rows are ~0.4 MB of light columns). Tests make it small.
 */
export const pageIndexLayout = {
  rowGroup: 16_384,
  /**
   * Parts the store must hold before compaction writes page indexes. Below it a page merges in tens of
   * milliseconds anyway, and an index file per small id range made compaction-heavy runs of small stores
   * several times slower (one COPY and fsync per range). `WEFT_PAGE_INDEX_MIN_PARTS`; tests set 0.
   */
  minParts: Number(process.env.WEFT_PAGE_INDEX_MIN_PARTS ?? 200_000),
}

/** Whether the store is large enough for page indexes (and they are not turned off). */
export function pageIndexWanted(segments: readonly Segment[]): boolean {
  return pageIndexEnabled && segments.reduce((a, x) => a + x.rows, 0) >= pageIndexLayout.minParts
}

/** A compacted segment's derived files: its page index and its block file. */
export interface IndexFiles {
  index: string
  blocks: string
}

/** Index columns locating each call's answer row in the block file (page-blocks.ts): its name and row. */
export const BLOCK_COLUMNS = ['blk_file', 'blk_row']

/**
 * Writes the page index of one compacted segment (one row per call there, so nothing to merge): its
 * light columns ordered by project, then newest first, so row-group statistics on `started_at` let a
 * page skip what is older than it needs; and its block file, each call's answer row at its row in the
 * segment (which the index row keeps as `blk_row`). Both are written, fsynced and renamed before a manifest names them (a crash leaves stray
 * files, which the next start removes).
 */
export async function writeSegmentIndex(
  maint: DuckDBConnection,
  s: Pick<StorageState, 'dir' | 'manifest' | 'blockFiles'>,
  segment: string,
): Promise<IndexFiles> {
  const { dir } = s
  const name = fileName('idx', s.manifest.next_file++)
  const blocks = fileName('blk', s.manifest.next_file++)
  const file = path.join(dir, name)
  const tmp = file + '.tmp'
  const seg = path.join(dir, checkName(segment))
  await s.blockFiles.write(seg, path.join(dir, blocks))
  await maint.run(
    `COPY (SELECT ${INDEX_COLUMNS.join(', ')}, ${sqlPath(blocks)} AS blk_file,
          file_row_number::INTEGER AS blk_row
        FROM read_parquet(${sqlPath(seg)}, file_row_number = true) ORDER BY project_id, started_at DESC NULLS LAST, id)
      TO ${sqlPath(tmp)} (FORMAT parquet, COMPRESSION zstd, ROW_GROUP_SIZE ${pageIndexLayout.rowGroup})`,
  )
  await fsyncPath(tmp)
  hit('page-index.before-rename')
  await fs.rename(tmp, file)
  return { index: name, blocks }
}

/** Whether a Parquet file's footer reads (a missing or torn index file is then rebuilt, not used). */
async function readable(maint: DuckDBConnection, file: string): Promise<boolean> {
  try {
    await maint.run(`SELECT count(*) FROM parquet_metadata(${sqlPath(file)})`)
    return true
  } catch {
    return false
  }
}

/** Whether a compacted segment's page index and block file are both there and read. */
async function derivedReadable(maint: DuckDBConnection, dir: string, x: Segment): Promise<boolean> {
  if (!x.index || !x.blocks) return false
  return (await blockFileReadable(path.join(dir, checkName(x.blocks)))) && (await readable(maint, path.join(dir, checkName(x.index))))
}

/**
 * Points the page-index relations at the segments' index files, in one transaction so a query sees
 * the index and the parts newer than it from the same moment:
 * - `page_index`: the index rows of every compacted segment;
 * - `newer_parts`: the parts no index holds (flushed segments, the tail);
 * - `page_index_groups`: per index row group its projects' and `started_at`'s range and rows.
 * Used only when every compacted segment has a readable index; otherwise `page_index_groups` is empty
 * (queries take the merge path) and the segments lacking one are returned, to be rebuilt.
 */
export async function attachPageIndex(maint: DuckDBConnection, dir: string, segments: readonly Segment[]): Promise<Segment[]> {
  const compacted = segments.filter((x) => x.level)
  const missing: Segment[] = []
  for (const x of compacted) if (!(await derivedReadable(maint, dir, x))) missing.push(x)
  const use = compacted.length > 0 && missing.length === 0
  const index = compacted.map((x) => sqlPath(path.join(dir, x.index ?? ''))).join(', ')
  const groups = `SELECT file_name, row_group_id, max(row_group_num_rows) AS rows,
        max(stats_min) FILTER (WHERE path_in_schema = 'project_id') AS project_min,
        max(stats_max) FILTER (WHERE path_in_schema = 'project_id') AS project_max,
        max(TRY_CAST(stats_min AS TIMESTAMP)) FILTER (WHERE path_in_schema = 'started_at') AS t_min,
        max(TRY_CAST(stats_max AS TIMESTAMP)) FILTER (WHERE path_in_schema = 'started_at') AS t_max
      FROM parquet_metadata([${index}]) GROUP BY file_name, row_group_id`
  await maint.run('BEGIN')
  try {
    // Either way: a page asks for the groups and whether `newer_parts` holds its project in one statement.
    await maint.run(newerPartsView(dir, segments))
    if (use) {
      // `filename`: a page leaves out the files whose rows are all older than its window (read/page-index.ts).
      await maint.run(`CREATE OR REPLACE VIEW page_index AS SELECT * FROM read_parquet([${index}], filename = true)`)
      // The same calls by id: the compacted segments, ordered by id (a page merges the few with newer parts from here).
      const indexedFiles = segmentFiles(dir, compacted).join(', ')
      await maint.run(`CREATE OR REPLACE VIEW indexed_parts AS SELECT * FROM read_parquet([${indexedFiles}], union_by_name = true)`)
      await maint.run(`CREATE OR REPLACE TABLE page_index_groups AS ${groups}`)
    } else
      await maint.run(
        `CREATE OR REPLACE TABLE page_index_groups (file_name VARCHAR, row_group_id BIGINT, rows BIGINT,
          project_min VARCHAR, project_max VARCHAR, t_min TIMESTAMP, t_max TIMESTAMP)`,
      )
    await maint.run('COMMIT')
  } catch (e) {
    await maint.run('ROLLBACK')
    throw e
  }
  return missing
}

/** `newer_parts`: the parts of the flushed (not yet compacted) segments and of the tail. */
function newerPartsView(dir: string, segments: readonly Segment[]): string {
  const flushed = segmentFiles(
    dir,
    segments.filter((x) => !x.level),
  )
  const tail = 'SELECT * EXCLUDE (wal_gen) FROM call_parts'
  const files = flushed.length ? `SELECT * FROM read_parquet([${flushed.join(', ')}], union_by_name = true) UNION ALL BY NAME ` : ''
  return `CREATE OR REPLACE VIEW newer_parts AS ${files}${tail}`
}

/**
 * After a flush only the parts newer than the index change (the index files do not): one view, no footers read.
 * The new segment joins them before the tail lets go of its parts, so a page never misses them.
 */
export async function refreshNewerParts(maint: DuckDBConnection, dir: string, segments: readonly Segment[]): Promise<void> {
  await maint.run(newerPartsView(dir, segments))
}

/**
 * Writes the index and block file of every compacted segment lacking a readable pair (a store from before
 * page indexes or block files, a lost or damaged file), then names them in the manifest and attaches them. Run in turn
 * with flushes and compactions, as they change the segments.
 */
export async function ensurePageIndex(s: StorageState): Promise<void> {
  if (!pageIndexEnabled) return
  const missing = await attachPageIndex(s.maint, s.dir, s.manifest.segments)
  if (missing.length === 0 || s.closed || !pageIndexWanted(s.manifest.segments)) return
  const made = new Map<string, IndexFiles>()
  for (const x of missing) made.set(x.file, await writeSegmentIndex(s.maint, s, x.file))
  await fsyncPath(s.dir)
  const replaced = missing.flatMap((x) => ownFiles(x).slice(1))
  s.manifest = { ...s.manifest, segments: s.manifest.segments.map((x) => (made.has(x.file) ? { ...x, ...made.get(x.file)! } : x)) }
  await writeManifest(s.dir, s.manifest)
  await attachPageIndex(s.maint, s.dir, s.manifest.segments)
  for (const f of replaced) {
    await fs.rm(path.join(s.dir, f), { force: true })
    forgetBlockFile(path.join(s.dir, f))
  }
}
