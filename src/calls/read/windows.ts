import { Params } from '../../query/expr.js'
import type { QueryOptions } from '../model.js'
import { sqlPath } from '../storage/parquet.js'

type ReadAll = (sql: string, params: Params) => Promise<Record<string, unknown>[]>

/** A range of start times `[lo, hi)` (null: open), in microseconds since the epoch. */
export interface Window {
  lo: bigint | null
  hi: bigint | null
}

/**
 * Calls a window aims to answer. A whole query sorts its whole answer before the first row: a 1M-call export
 * held 1.7 GiB and sent nothing for 3.5 s. Each window is a statement of its own, and DuckDB plans each anew
 * (~25 ms for an export's statement, ~35 ms with nothing to read): windows of 32k calls made the export 40 % more
 * CPU than whole; of 128k, about the same CPU as whole, the first batch after 0.2-0.8 s and the process at ~600 MiB.
 */
const ANSWER = 131_072
/** The first window aims at an eighth of ANSWER (the first batch sooner); each may then double, to ANSWER. */
const FIRST = 8
const GROWTH = 2

/** A row group of the compacted segments: its lowest and highest start time and its calls. */
interface Group {
  lo: bigint
  hi: bigint
  n: number
}

/**
 * An export in start-time order (either way) read as one statement per window of start time, one after another,
 * when the compacted segments hold the project's calls in start-time order (UUIDv7 ids, as the SDKs make, sort by
 * time, and segments are sorted by id): each window then reads a few row groups and sorts a few thousand calls.
 * Windows are bounded by the row groups' own `started_at` statistics, so they partition every call (settled or
 * fresh) by its merged start time, and concatenated they are the whole answer in order. Null when the answer is
 * not a whole query in start-time order, or when the row groups' time ranges overlap so much (random ids) that
 * windows would read the segments over and over.
 */
export async function exportWindows(
  readAll: ReadAll,
  files: readonly string[],
  project: string,
  opts: QueryOptions,
): Promise<Windows | null> {
  const order = startOrder(opts)
  if (order === null || files.length === 0) return null
  if ((opts.limit !== undefined && opts.limit !== null) || opts.offset) return null
  const all = await rowGroups(readAll, files)
  // A project's row groups are those whose project_id range holds it (segments are sorted by project, then id).
  const key = Buffer.from(project)
  const held = all.filter((g) => Buffer.compare(g.pmin, key) <= 0 && Buffer.compare(key, g.pmax) <= 0)
  if (held.some((g) => g.lo === null || g.hi === null)) return null
  const groups = held.map((g) => ({ lo: g.lo!, hi: g.hi!, n: g.n })).sort((x, y) => (x.lo < y.lo ? -1 : x.lo > y.lo ? 1 : 0))
  const windows = new Windows(groups, order === 'desc')
  // A project of one window is read whole, as before.
  return windows.calls <= windows.answer || windows.overlapping() ? null : windows
}

/** A row group's project_id range (UTF-8, compared as DuckDB compares text), its start times and its calls. */
interface FileGroup {
  pmin: Buffer
  pmax: Buffer
  lo: bigint | null
  hi: bigint | null
  n: number
}

/**
 * The row groups of segment files, read from their footers once per file (segments never change): reading them for
 * every export took ~40 ms per 1M-call file, paid by every export of every project, small ones too.
 */
const footers = new Map<string, FileGroup[]>()

async function rowGroups(readAll: ReadAll, files: readonly string[]): Promise<FileGroup[]> {
  const live = new Set(files)
  for (const f of footers.keys()) if (!live.has(f)) footers.delete(f)
  const missing = files.filter((f) => !footers.has(f))
  if (missing.length) {
    const rows = await readAll(
      `SELECT file_name AS f, max(row_group_num_rows) AS n,
          max(stats_min) FILTER (WHERE path_in_schema = 'project_id') AS pmin,
          max(stats_max) FILTER (WHERE path_in_schema = 'project_id') AS pmax,
          epoch_us(TRY_CAST(max(stats_min) FILTER (WHERE path_in_schema = 'started_at') AS TIMESTAMP)) AS lo,
          epoch_us(TRY_CAST(max(stats_max) FILTER (WHERE path_in_schema = 'started_at') AS TIMESTAMP)) AS hi
        FROM parquet_metadata([${missing.map(sqlPath).join(', ')}])
        WHERE path_in_schema IN ('project_id', 'started_at') GROUP BY file_name, row_group_id`,
      new Params(),
    )
    for (const f of missing) footers.set(f, [])
    for (const r of rows)
      footers.get(String(r.f))?.push({
        pmin: Buffer.from(String(r.pmin ?? '')),
        pmax: Buffer.from(String(r.pmax ?? '')),
        lo: r.lo as bigint | null,
        hi: r.hi as bigint | null,
        n: Number(r.n),
      })
  }
  return files.flatMap((f) => footers.get(f)!)
}

/** A place windows may begin or end: a distinct row-group start time (null: either end), with the calls before it. */
interface Point {
  at: bigint | null
  before: number
}

/**
 * The windows of one export, made as it is read: each window's size follows the share of the calls read so far that
 * the query answered, so a filter that keeps one call in twenty reads twenty times the calls per window, and a
 * window's answer stays near ANSWER calls either way; from an eighth of that, each window at most doubles the last.
 */
export class Windows {
  private readonly points: Point[] = [{ at: null, before: 0 }]
  /** The index of the point the next window starts at (oldest first) or ends at (newest first). */
  private at: number
  /** Calls a window aims to answer (ANSWER; tests set it smaller). */
  readonly answer = Number(process.env.WEFT_EXPORT_WINDOW_CALLS ?? ANSWER)
  private last = this.answer / FIRST / GROWTH
  private read = 0
  private answered = 0

  constructor(
    private readonly groups: readonly Group[],
    private readonly desc: boolean,
  ) {
    let before = 0
    for (const g of groups) {
      const prev = this.points[this.points.length - 1]!
      if (before > 0 && (prev.at === null || g.lo > prev.at)) this.points.push({ at: g.lo, before })
      before += g.n
    }
    this.points.push({ at: null, before })
    this.at = desc ? this.points.length - 1 : 0
  }

  /** The calls of the project's row groups. */
  get calls(): number {
    return this.points[this.points.length - 1]!.before
  }

  /** The next window (null after the last) and the calls its row groups hold (for done). */
  next(): { window: Window; calls: number } | null {
    const share = this.read > 0 ? this.answered / this.read : 1
    const size = Math.min(share > 0 ? this.answer / share : Infinity, this.last * GROWTH)
    this.last = size
    const step = this.step(this.at, size)
    if (step === null) return null
    const [i, j] = this.desc ? [step, this.at] : [this.at, step]
    this.at = step
    const p = this.points
    return { window: { lo: p[i]!.at, hi: p[j]!.at }, calls: p[j]!.before - p[i]!.before }
  }

  /** Where a window of `size` calls from point `from` ends (null: no window is left). */
  private step(from: number, size: number, desc = this.desc): number | null {
    const p = this.points
    if (desc) {
      if (from === 0) return null
      for (let i = from - 1; i > 0; i--) if (p[i]!.before <= p[from]!.before - size) return i
      return 0
    }
    if (from === p.length - 1) return null
    for (let j = from + 1; j < p.length - 1; j++) if (p[j]!.before >= p[from]!.before + size) return j
    return p.length - 1
  }

  /** A window read: its calls (from next) and how many it answered. */
  done(calls: number, answered: number): void {
    this.read += calls
    this.answered += answered
  }

  /**
   * Whether windows of ANSWER calls would read the row groups half as often again as there are (their time ranges
   * overlap). In start-time order each window reads its own groups, ~1x; over random ids nearly every window reads
   * nearly every group.
   */
  overlapping(): boolean {
    let reads = 0
    for (let i = 0, j = this.step(0, this.answer, false); j !== null; i = j, j = this.step(j, this.answer, false)) {
      const w = { lo: this.points[i]!.at, hi: this.points[j]!.at }
      reads += this.groups.filter((g) => meets(w, g.lo, g.hi)).length
    }
    return reads > 1.5 * this.groups.length
  }
}

/** Whether a row group of start times `[lo, hi]` holds any time in the window. */
const meets = (w: Window, lo: bigint, hi: bigint) => (w.lo === null || hi >= w.lo) && (w.hi === null || lo < w.hi)

/** The direction of a start-time order (the default order is oldest first), or null for any other order. */
export function startOrder(opts: QueryOptions): 'asc' | 'desc' | null {
  if (opts.sort_by === undefined || opts.sort_by === null) return 'asc'
  if (opts.sort_by.length !== 1 || opts.sort_by[0]!.field !== 'started_at') return null
  return opts.sort_by[0]!.direction === 'desc' ? 'desc' : 'asc'
}
