import { createHash } from 'node:crypto'
import type { AsciiTexts, TableList } from './table-chunks.js'

/**
 * Tables created lately, found by their first row digest, with their stored chunk lists. The Python SDK saves a
 * big dataset as ~10 MB chunks, each created as a table of its own, then one `/table/create_from_digests` listing
 * every row digest of them all in order (1M rows: ~100 chunk tables). A run of those digests that is a recent
 * table's whole row list takes that table's chunks as they are (a chunk is named by its rows, not its position:
 * table-chunks.ts), instead of every row's seq being looked up and the list chunked again. The run is checked by
 * its SHA-256, which is the recent table's digest; a table not remembered (a restart, a table pushed out) costs
 * only the lookup the rows would have had anyway.
 *
 * Entries are immutable facts about committed tables (nothing deletes or changes tables or chunks), so a kept
 * entry cannot go stale. What is kept is bounded by chunks listed (MAX_CHUNKS), and what one request may hash to
 * check runs by `budget` (a list whose digests all start some table but match none would otherwise hash ~n²/4).
 */
export interface RecentTable {
  digest: string
  list: TableList
}

/**
 * Chunks listed by the tables kept, ~100 bytes each (~20 MB): a 1M-row dataset's ~100 chunk tables list ~200, the
 * table made of them ~200 more. The least recently written tables go first.
 */
const MAX_CHUNKS = 200_000
/** Tables kept under one first row digest (most recent first): each is a hash of its rows to try. */
const PER_FIRST = 4

export class RecentTables {
  private readonly byFirst = new Map<string, RecentTable[]>()
  private chunks = 0

  /** A table just committed whose first row digest is `first`. */
  remember(project: string, first: string | undefined, t: RecentTable): void {
    if (first === undefined || t.list.n === 0) return
    const key = `${project}\0${first}`
    const kept = (this.byFirst.get(key) ?? []).filter((x) => x.digest !== t.digest)
    this.chunks -= weight(this.byFirst.get(key) ?? [])
    kept.unshift(t)
    if (kept.length > PER_FIRST) kept.length = PER_FIRST
    this.byFirst.delete(key)
    this.byFirst.set(key, kept)
    this.chunks += weight(kept)
    while (this.chunks > MAX_CHUNKS) {
      const [oldest, tables] = this.byFirst.entries().next().value!
      this.byFirst.delete(oldest)
      this.chunks -= weight(tables)
    }
  }

  /**
   * The longest recent table whose row digests are exactly digests [at, at + n) of `all`, or null. Digest i of
   * `all` is its bytes [ends[i - 1] ?? 0, ends[i]); a table's digest is the SHA-256 (hex) of its row digests joined.
   * Each check spends its bytes from `budget.bytes`; none is tried past it.
   */
  match(project: string, all: AsciiTexts, at: number, budget: { bytes: number }): RecentTable | null {
    const { text, ends } = all
    const from = at === 0 ? 0 : ends[at - 1]!
    const first = Buffer.from(text.buffer, text.byteOffset + from, ends[at]! - from).toString('latin1')
    const tables = this.byFirst.get(`${project}\0${first}`)
    if (!tables) return null
    let best: RecentTable | null = null
    for (const t of tables) {
      if (at + t.list.n > ends.length || (best && best.list.n >= t.list.n)) continue
      const to = ends[at + t.list.n - 1]!
      if ((budget.bytes -= to - from) < 0) return best
      if (createHash('sha256').update(text.subarray(from, to)).digest('hex') === t.digest) best = t
    }
    return best
  }
}

const weight = (tables: RecentTable[]) => tables.reduce((n, t) => n + t.list.chunks.length + 1, 0)
