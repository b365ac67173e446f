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
 * entry cannot go stale; only the first row digest and the count of them are bounded.
 */
export interface RecentTable {
  digest: string
  list: TableList
}

/** Tables kept (a 10M-row dataset in 10 MB chunks is ~1,000); each entry is its chunk list, ~100 bytes a chunk. */
const MAX_TABLES = 4096
/** Tables kept under one first row digest (most recent first): each is a hash of its rows to try. */
const PER_FIRST = 4

export class RecentTables {
  private readonly byFirst = new Map<string, RecentTable[]>()
  private count = 0

  /** A table just committed whose first row digest is `first`. */
  remember(project: string, first: string | undefined, t: RecentTable): void {
    if (first === undefined || t.list.n === 0) return
    const key = `${project}\0${first}`
    const kept = (this.byFirst.get(key) ?? []).filter((x) => x.digest !== t.digest)
    this.count -= this.byFirst.get(key)?.length ?? 0
    kept.unshift(t)
    if (kept.length > PER_FIRST) kept.length = PER_FIRST
    this.byFirst.delete(key)
    this.byFirst.set(key, kept)
    this.count += kept.length
    while (this.count > MAX_TABLES) {
      const [oldest, tables] = this.byFirst.entries().next().value!
      this.byFirst.delete(oldest)
      this.count -= tables.length
    }
  }

  /**
   * The longest recent table whose row digests are exactly digests [at, at + n) of `all`, or null. Digest i of
   * `all` is its bytes [ends[i - 1] ?? 0, ends[i]); a table's digest is the SHA-256 (hex) of its row digests joined.
   */
  match(project: string, all: AsciiTexts, at: number): RecentTable | null {
    const { text, ends } = all
    const from = at === 0 ? 0 : ends[at - 1]!
    const first = Buffer.from(text.buffer, text.byteOffset + from, ends[at]! - from).toString('latin1')
    const tables = this.byFirst.get(`${project}\0${first}`)
    if (!tables) return null
    let best: RecentTable | null = null
    for (const t of tables) {
      if (at + t.list.n > ends.length || (best && best.list.n >= t.list.n)) continue
      const to = ends[at + t.list.n - 1]!
      if (createHash('sha256').update(text.subarray(from, to)).digest('hex') === t.digest) best = t
    }
    return best
  }
}
