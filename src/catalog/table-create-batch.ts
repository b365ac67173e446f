import type { Catalog, Tx } from './db.js'
import { rowIndexes } from './table-row-index.js'
import { insertList, insertRows, textAt, writeChunks, type Rows, type TableList } from './table-chunks.js'

/** A create waiting for the catalog: its table's rows (checked and digested) and what its request awaits. */
interface Waiting {
  project: string
  digest: string
  rows: Rows
  done(list: TableList): void
  failed(e: unknown): void
}

/** Most creates one transaction takes (each at most MAX_REQUEST_ROWS rows and the body bound's bytes). */
const MAX_BATCH = 8

/**
 * `/table/create`s that arrive while the catalog is writing go in together: one transaction, one INSERT of all their
 * rows, one commit. The Python SDK uploads a big dataset as ~10 MB chunk tables several at a time, and catalog
 * writes are serialised, so while one chunk is written the next ones wait; each transaction of its own cost a
 * commit, a staging table and the lookups' fixed time. The batch is taken when the transaction starts, so it is
 * whatever queued behind the one before; a create that comes alone goes alone. If a batch fails, its creates are
 * tried again one by one, so one create's failure is its own.
 */
export class CreateBatches {
  private waiting: Waiting[] = []
  private queued = false

  constructor(private readonly catalog: Catalog) {}

  /** Stores the table (its rows, chunks and list) and answers its list once committed. */
  add(project: string, digest: string, rows: Rows): Promise<TableList> {
    return new Promise((done, failed) => {
      this.waiting.push({ project, digest, rows, done, failed })
      if (!this.queued) {
        this.queued = true
        void this.next()
      }
    })
  }

  private async next(): Promise<void> {
    let batch: Waiting[] = []
    let lists: TableList[]
    try {
      lists = await this.catalog.transaction(async (tx) => {
        batch = this.waiting.splice(0, MAX_BATCH)
        // Later creates queue the next transaction behind this one.
        this.queued = this.waiting.length > 0
        if (this.queued) void this.next()
        return write(this.catalog, tx, batch)
      })
    } catch (e) {
      if (batch.length <= 1) return batch[0]?.failed(e)
      for (const w of batch) {
        await this.catalog
          .transaction((tx) => write(this.catalog, tx, [w]))
          .then(
            ([list]) => w.done(list!),
            (e2: unknown) => w.failed(e2),
          )
      }
      return
    }
    batch.forEach((w, i) => w.done(lists[i]!))
  }
}

/** The batch's rows, one INSERT per project, then each table's chunks and list; the lists in batch order. */
async function write(catalog: Catalog, tx: Tx, batch: Waiting[]): Promise<TableList[]> {
  const indexes = rowIndexes(catalog)
  const seqsOf = new Map<string, Map<string, number>>()
  try {
    for (const project of new Set(batch.map((w) => w.project))) {
      const rows = joined(batch.filter((w) => w.project === project).map((w) => w.rows))
      seqsOf.set(project, await insertRows(tx, project, rows, await indexes.of(tx, project)))
    }
  } finally {
    indexes.trim()
  }
  const lists: TableList[] = []
  for (const w of batch) {
    const seqs = seqsOf.get(w.project)!
    const { digests } = w.rows
    const chunks = await writeChunks(tx, w.project, { digests, seqs: digests.map((d) => seqs.get(d)!) }, 0)
    const list = { n: digests.length, ...chunks }
    await insertList(tx, w.project, w.digest, list)
    lists.push(list)
  }
  return lists
}

/** Several requests' rows as one: ASCII bytes joined when all are (one copy), else strings. */
function joined(all: Rows[]): Rows {
  if (all.length === 1) return all[0]!
  const digests = all.flatMap((r) => r.digests)
  if (!all.every((r) => 'ascii' in r)) return { digests, texts: all.flatMap((r) => r.digests.map((_, i) => textAt(r, i))) }
  const parts = all.map((r) => (r as Extract<Rows, { ascii: unknown }>).ascii)
  const text = Buffer.concat(parts.map((p) => p.text.subarray(0, p.ends.at(-1) ?? 0)))
  const ends = new Int32Array(digests.length)
  let [k, base] = [0, 0]
  for (const p of parts) {
    for (const e of p.ends) ends[k++] = base + e
    base += p.ends.at(-1) ?? 0
  }
  return { digests, ascii: { text, ends } }
}
