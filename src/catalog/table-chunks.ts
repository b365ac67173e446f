import { BIGINT, VARCHAR, type DuckDBValue } from '@duckdb/node-api'
import { ROW_GROUP_SIZE, type Tx } from './db.js'
import { asciiTexts, bigints, constantText } from './append-columns.js'
import { tableDigest } from './digest.js'
import { keysOf, storedSeqs, type RowIndex } from './table-row-index.js'
import { DIGEST } from './table-texts.js'

/** Rows per stored chunk of a table's row list: a page reads one or two chunks whatever the table's size. */
export const CHUNK_ROWS = 8192
/** Above this many values a list is bound as one JSON parameter rather than one parameter each. */
const MAX_INLINE_PARAMS = 2048

/** Anything that reads: the catalog (committed state) or a transaction. */
export interface Reader {
  all<T>(sql: string, params?: DuckDBValue[]): Promise<T[]>
}

/** A table as stored (docs/tables.md): its length and its chunks in order, each with the position of its first row. */
export interface TableList {
  n: number
  chunks: string[]
  starts: number[]
}

/** Row digests and their `table_rows.seq`, in table order. */
export interface Entries {
  digests: string[]
  seqs: number[]
}

export interface StoredRow {
  digest: string
  val_dump: string
}

/**
 * Rows to store, column-wise: digest i and its compact JSON text i, as strings or as ASCII bytes back to back in
 * one buffer (a worker's scan, table-scan.ts: the appender takes them as they are, with no 10 MB string made of
 * them on the event loop).
 */
export type Rows = { digests: string[]; texts: string[] } | { digests: string[]; ascii: AsciiTexts }

/** Row texts of ASCII bytes back to back: text i is `text[ends[i - 1] ?? 0, ends[i])`. */
export interface AsciiTexts {
  text: Uint8Array
  ends: Int32Array
}

/** Text i of `rows` as a string (a row of ASCII bytes is the same text read as Latin-1). */
export function textAt(rows: Rows, i: number): string {
  if ('texts' in rows) return rows.texts[i]!
  const { text, ends } = rows.ascii
  const from = i === 0 ? 0 : ends[i - 1]!
  return Buffer.from(text.buffer, text.byteOffset + from, ends[i]! - from).toString('latin1')
}

/** A list of strings bound as one JSON parameter: DuckDB cannot type an empty bound list. */
export const strList = (n: number) => `from_json($${n}::JSON, '["VARCHAR"]')`

export async function readList(q: Reader, project: string, digest: string): Promise<TableList | null> {
  const [r] = await q.all<{ n: bigint; c: string[]; s: bigint[] }>(
    'SELECT n_rows AS n, chunk_digests AS c, chunk_starts AS s FROM table_lists WHERE project_id = $1 AND digest = $2',
    [project, digest],
  )
  return r ? { n: Number(r.n), chunks: [...r.c], starts: r.s.map(Number) } : null
}

/**
 * A chunk's row digests and row seqs are stored as comma-joined text (catalog migration 12), not as DuckDB lists:
 * each commit that appended a row with list columns logged the lists of every chunk row stored before it again
 * (DuckDB 1.5; the log grew by 0.52 MB more per 10,000-row dataset chunk, 16 MB a commit at 300k rows and a
 * checkpoint every few commits at 1M). Digests are [A-Za-z0-9] and seqs integers, so a comma never occurs in either.
 */
export const joinEntries = (xs: readonly (string | number)[]): string => xs.join(',')
export const splitDigests = (text: string): string[] => (text === '' ? [] : text.split(','))
export const splitSeqs = (text: string): number[] => (text === '' ? [] : text.split(',').map(Number))

/** The texts of the named chunks, by digest: their seqs, and their row digests too unless `seqsOnly` (~6x the bytes). */
export function chunkTexts(q: Reader, project: string, digests: string[], seqsOnly = false) {
  return q.all<{ digest: string; d: string | null; s: string }>(
    `SELECT digest, ${seqsOnly ? 'NULL' : 'row_digests'} AS d, row_seqs AS s FROM table_chunks
      WHERE project_id = $1 AND list_contains(${strList(2)}, digest)`,
    [project, JSON.stringify([...new Set(digests)])],
  )
}

async function readChunks(q: Reader, project: string, digests: string[]): Promise<Map<string, Entries>> {
  const rows = await chunkTexts(q, project, digests)
  return new Map(rows.map((r) => [r.digest, { digests: splitDigests(r.d ?? ''), seqs: splitSeqs(r.s) }]))
}

/** Index of the chunk holding position `pos` (0 ≤ pos < n). */
export function chunkAt(list: TableList, pos: number): number {
  let lo = 0
  let hi = list.starts.length - 1
  while (lo < hi) {
    const mid = (lo + hi + 1) >> 1
    if (list.starts[mid]! <= pos) lo = mid
    else hi = mid - 1
  }
  return lo
}

/**
 * The entries at positions [from, to): only the chunks that hold them are read, each whole (their texts cut here).
 * (A page reads only seqs, through table-read-cache.ts: a chunk's row digests are ~6x the bytes of its seqs.)
 */
export async function slice(q: Reader, project: string, list: TableList, from: number, to: number): Promise<Entries> {
  const end = Math.min(to, list.n)
  if (from >= end) return { digests: [], seqs: [] }
  const first = chunkAt(list, from)
  const last = chunkAt(list, end - 1)
  const reads: Promise<{ d: string; s: string }[]>[] = []
  for (let k = first; k <= last; k++) {
    // One point read per chunk (a page spans one or two); the part wanted is cut from its texts here.
    reads.push(
      q.all<{ d: string; s: string }>('SELECT row_digests AS d, row_seqs AS s FROM table_chunks WHERE project_id = $1 AND digest = $2', [
        project,
        list.chunks[k]!,
      ]),
    )
  }
  const rows = (await Promise.all(reads)).map((r) => r[0]!)
  const out: Entries = { digests: [], seqs: [] }
  rows.forEach((r, i) => {
    const start = list.starts[first + i]!
    const [a, b] = [Math.max(from - start, 0), end - start]
    for (const d of splitDigests(r.d).slice(a, b)) out.digests.push(d)
    for (const x of splitSeqs(r.s).slice(a, b)) out.seqs.push(x)
  })
  return out
}

/** The entries at arbitrary positions (each < n), in the order asked. */
export async function entriesAt(q: Reader, project: string, list: TableList, positions: number[]): Promise<Entries> {
  const ks = positions.map((p) => chunkAt(list, p))
  const chunks = await readChunks(
    q,
    project,
    ks.map((k) => list.chunks[k]!),
  )
  const out: Entries = { digests: [], seqs: [] }
  positions.forEach((p, i) => {
    const c = chunks.get(list.chunks[ks[i]!]!)!
    out.digests.push(c.digests[p - list.starts[ks[i]!]!]!)
    out.seqs.push(c.seqs[p - list.starts[ks[i]!]!]!)
  })
  return out
}

/** Writes `e` as chunks of at most CHUNK_ROWS (shared with any table that already has them); `base` is the first one's position. */
export async function writeChunks(tx: Tx, project: string, e: Entries, base: number): Promise<Pick<TableList, 'chunks' | 'starts'>> {
  const out: Pick<TableList, 'chunks' | 'starts'> = { chunks: [], starts: [] }
  const fresh = new Map<string, Entries>()
  for (let at = 0; at < e.digests.length; at += CHUNK_ROWS) {
    const digests = e.digests.slice(at, at + CHUNK_ROWS)
    const d = tableDigest(digests)
    fresh.set(d, { digests, seqs: e.seqs.slice(at, at + CHUNK_ROWS) })
    out.chunks.push(d)
    out.starts.push(base + at)
  }
  if (fresh.size === 0) return out
  // Chunks already stored (shared with another table) are left as they are; the rest go through the appender:
  // an INSERT … ON CONFLICT of the same lists, split from joined strings, cost ~7x more per 10 MB dataset chunk.
  const stored = await tx.all<{ digest: string }>(
    `SELECT digest FROM table_chunks WHERE project_id = $1 AND digest IN (SELECT unnest(${splitList(2)}))`,
    [project, [...fresh.keys()].join(',')],
  )
  for (const r of stored) fresh.delete(r.digest)
  const entries = [...fresh]
  await tx.append(
    'table_chunks',
    [VARCHAR, VARCHAR, VARCHAR, VARCHAR],
    [
      entries.map(() => project),
      entries.map(([d]) => d),
      entries.map(([, x]) => joinEntries(x.digests)),
      entries.map(([, x]) => joinEntries(x.seqs)),
    ],
  )
  return out
}

export async function insertList(tx: Tx, project: string, digest: string, list: TableList): Promise<void> {
  await tx.run(
    `INSERT INTO table_lists VALUES ($1, $2, $3, ${strList(4)}, from_json($5::JSON, '["BIGINT"]'), now()) ON CONFLICT DO NOTHING`,
    [project, digest, list.n, JSON.stringify(list.chunks), JSON.stringify(list.starts)],
  )
}

/** Every entry of a table, in order (updates that are not pure appends, and hashing a table not in memory). */
export async function allEntries(q: Reader, project: string, list: TableList): Promise<Entries> {
  return slice(q, project, list, 0, list.n)
}

/**
 * Rows by `seq`, through its index: cost follows the rows asked, not the project's size. Up to MAX_INLINE_PARAMS
 * seqs go as a constant IN list on `seq` alone, which DuckDB answers by an index scan (its default allows one
 * below 2,048 matches); any other condition on the scan turned it into a full scan of the project's rows (1,000
 * scattered rows of 100k: 70-250 ms against 35-70). `seq` is unique across projects, so the project is checked
 * on the rows found.
 */
export async function rowsBySeq(q: Reader, project: string, seqs: number[]): Promise<Map<number, StoredRow>> {
  const unique = [...new Set(seqs)]
  if (unique.length === 0) return new Map()
  if (unique.length <= MAX_INLINE_PARAMS) {
    const rows = await q.all<{ seq: bigint; project_id: string; digest: string; val_dump: string }>(
      `SELECT seq, project_id, digest, val_dump FROM table_rows WHERE seq IN (${unique.map((_, i) => `$${i + 1}`).join(', ')})`,
      unique.map((s) => BigInt(s)),
    )
    const out = new Map<number, StoredRow>()
    for (const r of rows) if (r.project_id === project) out.set(Number(r.seq), { digest: r.digest, val_dump: r.val_dump })
    return out
  }
  // The range lets DuckDB skip row groups by their min/max: a long run of a table in order is mostly one run of seqs.
  let lo = unique[0]!
  let hi = lo
  for (const x of unique) [lo, hi] = [Math.min(lo, x), Math.max(hi, x)]
  const rows = await q.all<{ seq: bigint; digest: string; val_dump: string }>(
    `SELECT seq, digest, val_dump FROM table_rows WHERE project_id = $1 AND seq BETWEEN $2 AND $3
      AND seq IN (SELECT unnest(from_json($4::JSON, '["BIGINT"]')))`,
    [project, BigInt(lo), BigInt(hi), JSON.stringify(unique)],
  )
  return new Map(rows.map((r) => [Number(r.seq), { digest: r.digest, val_dump: r.val_dump }]))
}

/** Where a large append's rows wait, in memory, for the INSERT that writes them (insertRows). */
const STAGE = 'temp.table_rows_stage'

/** A comma-joined list bound at $n, split by DuckDB: far cheaper than parsing a JSON list of the same strings. */
const splitList = (n: number) => `string_split($${n}, ',')`

/** The `seq` of each named row of the project that exists (a string that is no digest names none). */
export async function seqsOf(q: Reader, project: string, digests: string[]): Promise<Map<string, number>> {
  const valid = digests.filter((d) => DIGEST.test(d))
  if (valid.length === 0) return new Map()
  // One row holding two lists, each found digest's place in `valid` (from 1) and its seq, not a row object per
  // found digest: 100,000 digests (a table made from its rows' digests) cost the event loop ~190 ms as row objects.
  const [r] = await q.all<{ i: bigint[] | null; s: bigint[] | null }>(
    `SELECT list(w.i ORDER BY w.i, t.seq) AS i, list(t.seq ORDER BY w.i, t.seq) AS s
       FROM (SELECT unnest(l) AS d, generate_subscripts(l, 1) AS i FROM (SELECT ${splitList(2)} AS l)) w
       JOIN table_rows t ON t.project_id = $1 AND t.digest = w.d`,
    [project, valid.join(',')],
  )
  const out = new Map<string, number>()
  r?.i?.forEach((at, k) => out.set(valid[Number(at) - 1]!, Number(r.s![k])))
  return out
}

/**
 * The `seq` of each named row the project stores: through the project's row index (table-row-index.ts) when it
 * has one, else by digest in the catalog (a scan of the project's digests).
 */
export async function storedRows(q: Reader, project: string, digests: string[], index: RowIndex | null): Promise<Map<string, number>> {
  if (!index) return seqsOf(q, project, digests)
  const valid = digests.filter((d) => DIGEST.test(d))
  return storedSeqs(q, project, index, valid, await keysOf(q, valid), (ds) => seqsOf(q, project, ds))
}

/**
 * Rows not yet stored, appended (db.ts `append`); answers every row's seq. This lookup is what stores each row once
 * per project and digest: `table_rows` has no key on them (migration 9: its index was checked on every append and
 * never used for a lookup), and writes are serialised, so nothing slips in between the lookup and the append. The
 * seqs are drawn from the sequence first, as the appender fills no defaults; the new rows go into the index before
 * the commit (an index entry is a hint, checked on use). The project and the seqs go in whole per data chunk
 * (append-columns.ts), not value by value.
 */
export async function insertRows(tx: Tx, project: string, rows: Rows, index: RowIndex | null): Promise<Map<string, number>> {
  // Each distinct digest and the first row that has it.
  const unique = new Map<string, number>()
  for (let i = 0; i < rows.digests.length; i++) if (!unique.has(rows.digests[i]!)) unique.set(rows.digests[i]!, i)
  const digests = [...unique.keys()]
  const keys = index ? await keysOf(tx, digests) : []
  const seqs = index
    ? await storedSeqs(tx, project, index, digests, keys, (ds) => seqsOf(tx, project, ds))
    : await seqsOf(tx, project, digests)
  const fresh = digests.flatMap((d, i) => (seqs.has(d) ? [] : [i]))
  if (fresh.length === 0) return seqs
  const newSeqs = await drawSeqs(tx, fresh.length)
  const at = fresh.map((i) => unique.get(digests[i]!)!)
  // Rows enough to fill a row group of the catalog file (db.ts ROW_GROUP_SIZE) are compressed and written to the
  // file as they are appended. The appender runs on the event loop, so such rows go to an in-memory stage first and
  // on with one INSERT, which DuckDB runs on its own threads.
  const staged = fresh.length >= ROW_GROUP_SIZE
  if (staged) await tx.run(`CREATE TEMP TABLE ${STAGE} (project_id VARCHAR, digest VARCHAR, val_dump VARCHAR, seq BIGINT)`)
  await tx.append(
    staged ? STAGE : 'table_rows',
    [VARCHAR, VARCHAR, VARCHAR, BIGINT],
    [
      constantText(project, fresh.length),
      fresh.map((i) => digests[i]!),
      'texts' in rows ? at.map((r) => rows.texts[r]!) : asciiTexts(rows.ascii.text, rows.ascii.ends, at),
      bigints(newSeqs),
    ],
  )
  if (staged) {
    await tx.run(`INSERT INTO table_rows SELECT * FROM ${STAGE}`)
    // Dropped, not emptied: an in-memory table frees deleted rows only at a checkpoint.
    await tx.run(`DROP TABLE ${STAGE}`)
  }
  fresh.forEach((i, k) => {
    seqs.set(digests[i]!, Number(newSeqs[k]))
    index?.add(keys[i]!, Number(newSeqs[k]))
  })
  return seqs
}

/**
 * `n` new values of `table_row_seq`. They come back as their least and greatest, which is all of them when they
 * are consecutive, as they are when one writer draws them (catalog writes are serialised): 10,000 drawn values
 * read back as rows cost the event loop ~10,000 objects. If they ever are not consecutive, they are drawn again
 * and read in full (a seq is only a unique number: the gap costs nothing).
 */
async function drawSeqs(tx: Tx, n: number): Promise<BigInt64Array> {
  const out = new BigInt64Array(n)
  const [r] = await tx.all<{ lo: bigint; hi: bigint }>(
    `SELECT min(s) AS lo, max(s) AS hi FROM (SELECT nextval('table_row_seq') AS s FROM range($1))`,
    [n],
  )
  if (r && r.hi - r.lo === BigInt(n - 1)) {
    for (let k = 0; k < n; k++) out[k] = r.lo + BigInt(k)
    return out
  }
  const drawn = await tx.all<{ s: bigint }>(`SELECT nextval('table_row_seq') AS s FROM range($1)`, [n])
  drawn.forEach((x, k) => (out[k] = x.s))
  return out
}
