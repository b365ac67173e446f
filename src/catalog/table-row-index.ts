import type { DuckDBValue } from '@duckdb/node-api'

/** Anything that reads (table-chunks.ts's Reader; not imported from there, which imports this file). */
interface Reader {
  all<T>(sql: string, params?: DuckDBValue[]): Promise<T[]>
}

/**
 * Which of a request's row digests the project already stores, without a scan. DuckDB answers a lookup of
 * `(project_id, digest)` pairs by scanning the project's every row digest (it never used the key's index that
 * migration 9 dropped: `EXPLAIN` shows a sequential scan; 10,000 digests at 1M rows took 0.17-1.1 s on a loaded
 * machine). This lookup is also what keeps a project's rows unique, as no key does any longer. So each
 * project written to gets an in-memory hash table of its rows' digest keys to their `seq`, built from the catalog at
 * its first write in this process and added to by every write after (writes are serialised, and nothing else writes
 * `table_rows`). A new project's index starts empty, so a dataset ingest never pays for the build.
 *
 * Entries are hints: a digest with no entry is surely not stored (every committed row has one), and a digest with
 * entries is checked against the rows at those seqs. So a write that rolls back and leaves entries behind, or two
 * digests sharing a key, cost a read, never a wrong answer.
 *
 * Memory: 16 bytes a slot (key and seq), at most 3/4 full: 16-32 MB at 1M rows (33.6 MB measured, 2^21 slots). All
 * projects' indexes together stay under INDEX_BUDGET_BYTES, the least recently written dropped first (rebuilt at
 * their next write); a project too big for the budget is not indexed and its writes look digests up as before.
 */
const INDEX_BUDGET_BYTES = 192 * 1024 * 1024
const SLOT_BYTES = 16
/** Seqs read per statement while building, so no answer list grows past ~2M numbers. */
const BUILD_SPAN = 1_000_000
const EMPTY = -1
const TWO_32 = 2 ** 32

/**
 * A digest's key: the top 53 bits of DuckDB's 64-bit `hash` of it, exact in a double. DuckDB computes it for the
 * stored rows (reading 1M digests into JavaScript to hash them there took twice as long) and for a request's
 * digests alike; the index lives in memory only, so the hash need only be stable within one process.
 */
const KEY_SQL = (col: string) => `(hash(${col}) >> 11)::DOUBLE`

export class RowIndex {
  /** Per slot: the digest's key (its low 32 bits pick the home slot; all 53 are compared) and its seq. */
  private keys: Float64Array
  private seqs: Float64Array
  private count = 0

  constructor(expected: number) {
    let cap = 1024
    while (cap * 0.75 < expected) cap *= 2
    this.keys = new Float64Array(cap)
    this.seqs = new Float64Array(cap).fill(EMPTY)
  }

  get bytes(): number {
    return this.seqs.length * SLOT_BYTES
  }

  add(key: number, seq: number): void {
    if (this.count + 1 > this.seqs.length * 0.75) this.grow()
    this.put(key, seq)
    this.count++
  }

  /** Adds to `out` the seqs whose digest may be the one of this key (none: surely not stored). */
  candidates(key: number, out: number[]): void {
    const mask = this.seqs.length - 1
    for (let i = (key % TWO_32) & mask; this.seqs[i] !== EMPTY; i = (i + 1) & mask) if (this.keys[i] === key) out.push(this.seqs[i]!)
  }

  private put(key: number, seq: number): void {
    const mask = this.seqs.length - 1
    let i = (key % TWO_32) & mask
    while (this.seqs[i] !== EMPTY) i = (i + 1) & mask
    this.keys[i] = key
    this.seqs[i] = seq
  }

  private grow(): void {
    const [keys, seqs] = [this.keys, this.seqs]
    this.keys = new Float64Array(seqs.length * 2)
    this.seqs = new Float64Array(seqs.length * 2).fill(EMPTY)
    for (let i = 0; i < seqs.length; i++) if (seqs[i] !== EMPTY) this.put(keys[i]!, seqs[i]!)
  }
}

/** The keys of `digests` (strings of [A-Za-z0-9], so a comma joins them), in order: one statement. */
export async function keysOf(q: Reader, digests: string[]): Promise<number[]> {
  if (digests.length === 0) return []
  const [r] = await q.all<{ k: number[] }>(`SELECT list_transform(string_split($1, ','), x -> ${KEY_SQL('x')}) AS k`, [digests.join(',')])
  return r!.k
}

/** The project's rows' keys and seqs, read a span of seqs at a time as one list of (key, seq) pairs. */
async function build(q: Reader, project: string): Promise<RowIndex | null> {
  const [r] = await q.all<{ n: bigint; lo: bigint | null; hi: bigint | null }>(
    'SELECT count(*) AS n, min(seq) AS lo, max(seq) AS hi FROM table_rows WHERE project_id = $1',
    [project],
  )
  const n = Number(r!.n)
  if (n * 2 * SLOT_BYTES > INDEX_BUDGET_BYTES) return null
  const index = new RowIndex(n)
  if (n === 0) return index
  for (let lo = Number(r!.lo); lo <= Number(r!.hi); lo += BUILD_SPAN) {
    const [page] = await q.all<{ kv: number[] | null }>(
      `SELECT flatten(list([${KEY_SQL('digest')}, seq::DOUBLE])) AS kv FROM table_rows WHERE project_id = $1 AND seq >= $2 AND seq < $3`,
      [project, BigInt(lo), BigInt(lo + BUILD_SPAN)],
    )
    const kv = page?.kv ?? []
    for (let i = 0; i < kv.length; i += 2) index.add(kv[i]!, kv[i + 1]!)
  }
  return index
}

/** The indexes of one catalog's projects, most recently written last. */
export class RowIndexes {
  private readonly byProject = new Map<string, RowIndex>()
  /** Projects too big for the budget: looked up in the catalog. */
  private readonly unindexed = new Set<string>()

  /** The project's index, built from the catalog if this process has none (null: too big to index). */
  async of(q: Reader, project: string): Promise<RowIndex | null> {
    const kept = this.byProject.get(project)
    if (kept) {
      this.byProject.delete(project)
      this.byProject.set(project, kept)
      return kept
    }
    if (this.unindexed.has(project)) return null
    const index = await build(q, project)
    if (!index) this.unindexed.add(project)
    else this.byProject.set(project, index)
    return index
  }

  /** Drops the least recently written projects' indexes past the budget (after a write may have grown one). */
  trim(): void {
    let total = 0
    for (const x of this.byProject.values()) total += x.bytes
    for (const [p, x] of this.byProject) {
      if (total <= INDEX_BUDGET_BYTES) break
      this.byProject.delete(p)
      total -= x.bytes
      if (x.bytes > INDEX_BUDGET_BYTES) this.unindexed.add(p)
    }
  }
}

const catalogs = new WeakMap<object, RowIndexes>()

/** The row indexes of `catalog` (any object standing for one catalog), shared by all its TableStores. */
export function rowIndexes(catalog: object): RowIndexes {
  let x = catalogs.get(catalog)
  if (!x) catalogs.set(catalog, (x = new RowIndexes()))
  return x
}

/**
 * Candidates read by seq at most. A constant IN list on `seq` alone is an index scan, but past a few hundred seqs
 * the lookup by digest is cheaper (1,000 stored digests of 1M rows: 50 / 54 / 264 ms by seq against 24 / 43 / 83 by
 * digest, min / median / max of 5, load ~11).
 */
const CHECK_BY_SEQ = 256

/**
 * The `seq` of each of `digests` the project stores (`keys` theirs, from keysOf): the index names candidates, the
 * catalog says which are real. Few candidates are read by seq; more (a dataset saved again) are looked up by digest
 * (`byDigest`, the lookup without the index). Digests with no candidate, the new rows, cost nothing either way.
 */
export async function storedSeqs(
  q: Reader,
  project: string,
  index: RowIndex,
  digests: string[],
  keys: number[],
  byDigest: (digests: string[]) => Promise<Map<string, number>>,
): Promise<Map<string, number>> {
  const candidates: number[] = []
  const maybe: string[] = []
  digests.forEach((d, i) => {
    const before = candidates.length
    index.candidates(keys[i]!, candidates)
    if (candidates.length > before) maybe.push(d)
  })
  const found = new Map<string, number>()
  if (candidates.length === 0) return found
  const unique = [...new Set(candidates)]
  if (unique.length > CHECK_BY_SEQ) return byDigest(maybe)
  const wanted = new Set(maybe)
  const rows = await q.all<{ seq: bigint; project_id: string; digest: string }>(
    `SELECT seq, project_id, digest FROM table_rows WHERE seq IN (${unique.map((_, i) => `$${i + 1}`).join(', ')})`,
    unique.map((x) => BigInt(x)),
  )
  for (const r of rows) if (r.project_id === project && wanted.has(r.digest)) found.set(r.digest, Number(r.seq))
  return found
}
