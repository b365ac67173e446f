import fs from 'node:fs/promises'
import path from 'node:path'
import { DuckDBInstance, type DuckDBConnection } from '@duckdb/node-api'
import { progress } from '../../core/progress.js'
import { Params } from '../../query/expr.js'
import { FOLDED, latest } from '../model.js'
import { PARQUET, fileStats, refreshView, segmentFiles, sqlPath } from './parquet.js'
import { fileName, fsyncPath, ownFiles, writeManifest, type Segment } from './segments.js'
import type { StorageState } from './state.js'
import { failpointCount, hit } from '../../core/failpoints.js'
import { BUDGET_SHARES, cleanSpill, memoryLimitSetting, spillDir } from '../../core/duckdb-memory.js'
import { outOfMemory } from '../../core/errors.js'
import { attachPageIndex, ensurePageIndex, pageIndexWanted, writeSegmentIndex } from './page-index.js'

/** Whether a flush should be followed by a compaction: past `maxSegments` flushed (not yet compacted) segments. */
export function overSegmentLimit(segments: readonly Segment[], maxSegments: number): boolean {
  return segments.filter((x) => !x.level).length > maxSegments
}

/** A segment's lowest and highest call id (its Parquet footer's statistics); null for an empty file. */
export type IdSpan = [string, string] | null

/**
 * The merge selector: which segments a compaction folds together, or null for none. The flushed segments
 * (since the last compaction) and every compacted segment whose id span meets one of theirs: a call's
 * parts can only be in segments whose spans hold its id, so a compacted segment outside every flushed
 * span has none of their calls and stays as it is. With time-ordered ids (UUIDv7, as the SDKs make them)
 * new calls fall past the compacted spans, and a compaction rewrites the newest range or two instead of
 * the whole store (it rewrote everything, every 8 flushes, so its cost grew with the store). Random ids
 * span everything: every segment, as before.
 */
export function selectMerge(segments: readonly Segment[], spans: ReadonlyMap<string, IdSpan>): readonly Segment[] | null {
  const flushed = segments.filter((x) => !x.level)
  if (flushed.length === 0) return null
  const meets = (a: IdSpan, b: IdSpan) => a === null || b === null || (a[0] <= b[1] && b[0] <= a[1])
  const flushedSpans = flushed.map((x) => spans.get(x.file) ?? null)
  return segments.filter((x) => !x.level || flushedSpans.some((f) => meets(f, spans.get(x.file) ?? null)))
}

/** Each segment's id span, from the footers (no data is read). */
async function idSpans(maint: DuckDBConnection, dir: string, segments: readonly Segment[]): Promise<Map<string, IdSpan>> {
  const out = new Map<string, IdSpan>(segments.map((x) => [x.file, null]))
  if (segments.length === 0) return out
  const files = segmentFiles(dir, segments).join(', ')
  const rows = (
    await maint.runAndReadAll(
      `SELECT file_name AS f, min(stats_min) AS lo, max(stats_max) AS hi FROM parquet_metadata([${files}])
        WHERE path_in_schema = 'id' GROUP BY file_name`,
    )
  ).getRowObjectsJS()
  for (const r of rows) if (r.lo !== null && r.hi !== null) out.set(path.basename(String(r.f)), [String(r.lo), String(r.hi)])
  return out
}

/**
 * Folds the selected segments into compacted ones, each call's parts merged into a single part row
 * whose seq is its parts' highest, so parts arriving later still win field by field. Deleted calls
 * stay, as tombstones: a late part of a deleted call must not bring it back. The work is split into
 * id ranges, one output segment each, so memory stays bounded whatever the store's size (a single
 * GROUP BY over 10M calls ran DuckDB out of memory): ranges of at most `compactParts` parts and of at
 * most rangeBytes of data. A range that still runs out of memory is split again (see compactInRanges).
 *
 * Three steps. Choosing the segments (planCompaction) and naming the result in the manifest
 * (swapCompacted) run in turn with flushes; folding them (foldSegments), minutes of work on a large store,
 * runs beside flushes on a connection of its own, so the tail keeps flushing meanwhile. (It did not: in a
 * 30-minute soak at 2,500 calls/s compactions took 3-7 minutes, the tail grew to 1.3M parts meanwhile, and
 * every read over it slowed, bench/README.md Soak.) Folding changes no segment the manifest names: it
 * writes new files, and a flush meanwhile adds a segment the swap keeps.
 */
export async function compactSegments(s: StorageState): Promise<boolean> {
  const old = await planCompaction(s)
  return old !== null && swapCompacted(s, old, await foldSegments(s, old))
}

/** The segments a compaction folds (selectMerge), or null when there is none to fold (the page index may then be written). */
export async function planCompaction(s: StorageState): Promise<readonly Segment[] | null> {
  if (s.closed) return null
  const old = s.manifest.segments.some((x) => !x.level)
    ? selectMerge(s.manifest.segments, await idSpans(s.maint, s.dir, s.manifest.segments))
    : null
  // Nothing to fold: the derived page index may still need writing (a store from before it, a lost file).
  if (!old) await ensurePageIndex(s)
  return old
}

/**
 * The compacted segments of `old`, written and fsynced but not yet named by the manifest (see compactInRanges), folded in
 * a DuckDB of their own with one thread (foldInstance), closed after.
 */
export async function foldSegments(s: StorageState, old: readonly Segment[]): Promise<Segment[]> {
  const memory = foldMemory(s.opts.memoryLimit)
  await s.lendMemory(memory)
  try {
    const db = await foldInstance(s, memory)
    try {
      const conn = await db.connect()
      try {
        s.foldThreads = Number((await conn.runAndReadAll(`SELECT current_setting('threads')::INTEGER`)).getRowsJS()[0]![0])
        const made = await compactInRanges(s, conn, old)
        await fsyncPath(s.dir)
        return made
      } finally {
        conn.closeSync()
      }
    } finally {
      db.closeSync()
    }
  } finally {
    await s.lendMemory(0)
  }
}

/**
 * The instance a fold runs in. The fold reads only segment files and writes new ones, so it needs nothing of the
 * store's instance; in one of its own it gets one thread, where in the store's it took all of DuckDB's threads (two
 * here) for tens of seconds, and every read's statements queued behind it: in a 5-minute soak at 2,900 calls/s the
 * reads' p99 per 10 s was 1.4-2.4 s through a 40-second fold and 0.2-0.4 s after it (bench/README, 2026-12-07 fifth
 * session). Its memory: a quarter of the store's share (a range is an eighth, and its sort spills past that), which the
 * store's instance lends it for the fold (at most half of its own limit goes), so the process keeps to its budget;
 * spilled under the data directory; closed after each fold, so what the fold held goes back at once.
 */
async function foldInstance(s: StorageState, memory: number): Promise<DuckDBInstance> {
  const spill = spillDir(path.dirname(s.dir), 'compaction')
  await cleanSpill(spill)
  return DuckDBInstance.create(':memory:', {
    threads: '1',
    memory_limit: memoryLimitSetting(memory),
    temp_directory: spill,
    // As the store's instance (open.ts): the OS page cache holds the segments' bytes already.
    enable_external_file_cache: 'false',
  })
}

/** A fold's DuckDB limit: twice a range (rangeBytes), a quarter of the store's share, at least 64 MiB. */
export function foldMemory(memoryLimit: number): number {
  return Math.max(64 * 2 ** 20, 2 * rangeBytes(memoryLimit))
}

/**
 * The manifest swaps the folded segments for the compacted ones (keeping any a flush added meanwhile), the
 * views follow, and the old files are retired. False, with the new files removed, when the store closed meanwhile.
 */
export async function swapCompacted(s: StorageState, old: readonly Segment[], made: Segment[]): Promise<boolean> {
  if (s.closed) {
    for (const x of made) for (const f of ownFiles(x)) await fs.rm(path.join(s.dir, f), { force: true })
    return false
  }
  // The flushed segments' highest seq must survive in the manifest (a restart numbers new parts after it).
  if (made.length) made[made.length - 1]!.max_seq = Math.max(made[made.length - 1]!.max_seq, ...old.map((x) => x.max_seq))
  hit('compact.before-manifest')
  const kept = s.manifest.segments.filter((x) => !old.includes(x))
  s.manifest = { ...s.manifest, segments: [...kept, ...made] }
  await writeManifest(s.dir, s.manifest)
  hit('compact.after-manifest')
  await refreshView(s.maint, s.dir, s.manifest.segments)
  await attachPageIndex(s.maint, s.dir, s.manifest.segments)
  // Queries that bound the old view may still be reading the old files (and their page indexes): remove
  // them a little later, and not while a pooled read holds them (pins.ts; a restart removes any that are left).
  s.pins.retire(old.flatMap(ownFiles).map((f) => path.join(s.dir, f)))
  return true
}

/** Times a compaction out of memory is retried with ranges RESPLIT times smaller before it fails. */
const RESPLITS = 3
const RESPLIT = 4
/** WEFT_FAILPOINTS=compact-oom:N (tests): the first N compactions fail out of memory after their first range. */
let oomFailpoint = failpointCount('compact-oom') ?? 0

/**
 * The data one range may fold: an eighth of the store's memory share. A merge keeps each call's latest
 * value of every field (large JSON included) in memory until its group is done. A 30-minute soak at a
 * 4 GiB budget folded ~1.4M parts in one range: from the sixth minute on no compaction finished (the
 * segments went from 2 to 41 and reads slowed), the failures logged as warnings only. 168 MB of calls
 * under a 256 MiB budget fold in 16 ranges, not 4 (measured).
 */
export function rangeBytes(memoryLimit: number): number {
  return Math.max(8 * 2 ** 20, Math.floor((memoryLimit * BUDGET_SHARES.calls) / 8))
}

/**
 * The compacted segments of `old`, written range by range (not yet in the manifest). Out of memory, the
 * files written so far are removed and the whole fold runs again in ranges RESPLIT times smaller.
 */
async function compactInRanges(s: StorageState, conn: DuckDBConnection, old: readonly Segment[]): Promise<Segment[]> {
  const files = segmentFiles(s.dir, old).join(', ')
  const totalRows = old.reduce((a, x) => a + x.rows, 0)
  const bytes = await uncompressedBytes(conn, s.dir, old)
  let ranges = Math.max(Math.ceil(totalRows / s.opts.compactParts), Math.ceil(bytes / rangeBytes(s.opts.memoryLimit)))
  for (let attempt = 0; ; attempt++) {
    const bounds = await idBounds(conn, s.dir, old, ranges)
    const made: Segment[] = []
    // At 100M parts this is minutes of work, one id range at a time: reported per range.
    const task = progress.start('calls compaction', {
      total: bounds.length + 1,
      unit: 'ranges',
      fields: { segments: old.length, parts: totalRows, bytes, attempt },
    })
    try {
      await task.run(async () => {
        for (let i = 0; i <= bounds.length; i++) {
          if (s.closed) throw new Error('the calls store closed during a compaction')
          const seg = await compactRange(s, conn, files, i > 0 ? bounds[i - 1]! : null, i < bounds.length ? bounds[i]! : null)
          if (seg) made.push(seg)
          if (oomFailpoint > 0 && oomFailpoint--) throw new Error('Out of Memory Error: failpoint compact-oom')
          hit('compact.after-range')
          task.update(i + 1)
        }
      })
      return made
    } catch (e) {
      // Not named by the manifest: nothing reads these yet.
      for (const x of made) for (const f of ownFiles(x)) await fs.rm(path.join(s.dir, f), { force: true })
      if (!outOfMemory(e) || attempt >= RESPLITS || s.closed) throw e
      ranges = Math.max(ranges, bounds.length + 1) * RESPLIT
      s.compactionResplits++
    }
  }
}

/** The segments' data as DuckDB reads it (uncompressed column chunks, from the Parquet footers). */
async function uncompressedBytes(maint: DuckDBConnection, dir: string, segments: readonly Segment[]): Promise<number> {
  const files = segmentFiles(dir, segments).join(', ')
  const r = await maint.runAndReadAll(`SELECT coalesce(sum(total_uncompressed_size), 0)::BIGINT AS b FROM parquet_metadata([${files}])`)
  return Number(r.getRowObjectsJS()[0]!.b)
}

/** One id range [lo, hi) of the files folded into a new segment; null when the range holds no call. */
async function compactRange(
  s: StorageState,
  conn: DuckDBConnection,
  files: string,
  lo: string | null,
  hi: string | null,
): Promise<Segment | null> {
  const params = new Params()
  const range = [lo !== null ? `id >= ${params.add(lo)}` : 'true', hi !== null ? `id < ${params.add(hi)}` : 'true'].join(' AND ')
  const segName = fileName('seg', s.manifest.next_file++)
  const segPath = path.join(s.dir, segName)
  const tmp = segPath + '.tmp'
  hit('compact.before-copy')
  const copy = await conn.prepare(`COPY (${foldStatement(files, range)}) TO ${sqlPath(tmp)} (${PARQUET})`)
  copy.bind(params.values)
  try {
    await copy.run()
  } finally {
    copy.destroySync()
  }
  const stats = await fileStats(conn, tmp)
  if (stats.n === 0) {
    await fs.rm(tmp, { force: true })
    return null
  }
  await fsyncPath(tmp)
  await fs.rename(tmp, segPath)
  const bytes = (await fs.stat(segPath)).size
  // Its page index and block file are written beside it, before the manifest names any (see page-index.ts).
  const derived = pageIndexWanted(s.manifest.segments) ? await writeSegmentIndex(conn, s, segName) : {}
  return { file: segName, rows: stats.n, min_seq: stats.lo, max_seq: stats.hi, bytes, level: 1, ...derived }
}

/** The compacted row of each call (see FOLD_OUT): the columns of a call's only part, or its parts folded. */
const SINGLE_OUT = [
  'seq',
  `'merged' AS kind`,
  'project_id',
  'id',
  ...FOLDED,
  'deleted_at',
  ...['input_refs', 'output_refs'].map((c) => `nullif(list_distinct(${c}), []) AS ${c}`),
]
const FOLD_OUT = [
  'max(seq) AS seq',
  `'merged' AS kind`,
  'project_id',
  'id',
  ...FOLDED.map(latest),
  'max(deleted_at) AS deleted_at',
  ...['input_refs', 'output_refs'].map((c) => `nullif(list_distinct(flatten(list(${c}) FILTER (WHERE ${c} IS NOT NULL))), []) AS ${c}`),
]

/**
 * The fold of one id range, ordered by (project_id, id). Only calls with more than one part go through the
 * aggregate; a call with one part (an SDK's start and end in one batch are folded into one part by the ingest worker,
 * so that is most calls) is its own folded row and is passed through with the same expressions the aggregate
 * gives one row. The aggregate copied every string of every call into its states (arg_max), then the sort copied
 * them again: on 605,500 one-part calls 8.1-12.7 s of CPU against 4.1 with the pass-through, the files equal row
 * for row; with every call in two parts both ~6-8 s (bench/README, 2026-12-06 night). The parts are read again by
 * each branch (NOT MATERIALIZED: cheaper than holding them, 4.1 against 4.6 s).
 */
function foldStatement(files: string, range: string): string {
  return `WITH parts AS NOT MATERIALIZED (SELECT * FROM read_parquet([${files}], union_by_name = true) WHERE ${range}),
      several AS (SELECT project_id, id FROM parts GROUP BY project_id, id HAVING count(*) > 1)
    SELECT ${SINGLE_OUT.join(', ')} FROM parts ANTI JOIN several USING (project_id, id)
    UNION ALL
    SELECT ${FOLD_OUT.join(', ')} FROM parts SEMI JOIN several USING (project_id, id) GROUP BY project_id, id
    ORDER BY project_id, id`
}

/** Ids sampled to place range bounds: enough for even ranges, read from the id column alone. */
const BOUND_SAMPLE = 20_000

/**
 * Up to n - 1 ids splitting the segments' parts into n ranges of similar size, from a sample of the
 * id column (before, the row groups' minimum ids: a flushed segment is one or two row groups whose
 * ids span the whole id space, so most ranges came out nearly empty and one held almost every part).
 */
export async function idBounds(maint: DuckDBConnection, dir: string, segments: readonly Segment[], n: number): Promise<string[]> {
  if (n <= 1 || segments.length === 0) return []
  const files = segmentFiles(dir, segments).join(', ')
  const sample = (
    await maint.runAndReadAll(
      `SELECT id FROM (SELECT id FROM read_parquet([${files}], union_by_name = true) USING SAMPLE reservoir(${BOUND_SAMPLE} ROWS) REPEATABLE (7)) ORDER BY id`,
    )
  )
    .getRowObjectsJS()
    .map((r) => String(r.id))
  const out: string[] = []
  for (let i = 1; i < n; i++) {
    const b = sample[Math.floor((i * sample.length) / n)]
    if (b !== undefined && b > (out[out.length - 1] ?? '')) out.push(b)
  }
  return out
}
