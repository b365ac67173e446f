import t, { type Test } from 'tap'
import type { Catalog } from '../src/catalog/db.js'
import { TableStore } from '../src/catalog/tables.js'
import { openCatalog } from './helpers/catalog.js'
import { rowDigest, tableDigest } from './helpers/weave-digest.js'

// Creates that queue while the catalog is writing go in one transaction (src/catalog/table-create-batch.ts).
// Expected digests and rows come from the generated rows and helpers/weave-digest.ts.

const row = (tag: string, i: number) => ({ tag, i, text: `${tag} ${i}` })
const rowsOf = (tag: string, from: number, n: number) => Array.from({ length: n }, (_, k) => row(tag, from + k))

async function open(t: Test) {
  const catalog = await openCatalog(t)
  // Counts the transactions begun (the catalog's own method, called through).
  let transactions = 0
  const begin = catalog.transaction.bind(catalog)
  catalog.transaction = ((fn: Parameters<Catalog['transaction']>[0]) => {
    transactions++
    return begin(fn)
  }) as Catalog['transaction']
  // Holds the catalog busy until released, as a write in progress does.
  const hold = () => {
    let release!: () => void
    const gate = new Promise<void>((r) => (release = r))
    const held = begin(() => gate)
    return async () => {
      release()
      await held
    }
  }
  return { catalog, hold, transactions: () => transactions }
}

async function rowCount(catalog: Catalog, project: string) {
  const [r] = await catalog.all<{ n: bigint }>('SELECT count(*) AS n FROM table_rows WHERE project_id = $1', [project])
  return Number(r!.n)
}

t.test('creates queued behind a write go in one transaction; each table reads back; shared rows stored once', async (t) => {
  const { catalog, hold, transactions } = await open(t)
  const store = new TableStore(catalog)
  const P = 'acme/batch'
  // Four chunks; the third repeats rows of the first two (in another order), the fourth is empty of new rows.
  const chunks = [rowsOf('a', 0, 3000), rowsOf('b', 0, 2500), [...rowsOf('a', 100, 50), ...rowsOf('b', 0, 20)], rowsOf('a', 0, 10)]
  const release = hold()
  const before = transactions()
  const made = chunks.map((rows) => store.create(P, rows))
  await new Promise((r) => setTimeout(r, 50))
  await (
    await release
  )()
  const answers = await Promise.all(made)
  t.equal(transactions() - before, 1, 'one transaction for the four')
  for (const [k, rows] of chunks.entries()) {
    t.equal(answers[k]!.digest, tableDigest(rows.map(rowDigest)), `chunk ${k}: digest`)
    const back = await store.query(P, { digest: answers[k]!.digest })
    t.same(
      back.map((r) => r.val),
      rows,
      `chunk ${k}: rows in order`,
    )
  }
  t.equal(await rowCount(catalog, P), 3000 + 2500, 'each distinct row stored once')
  // A later create alone: its own transaction.
  const alone = await store.create(P, rowsOf('c', 0, 5))
  t.equal(alone.digest, tableDigest(rowsOf('c', 0, 5).map(rowDigest)))
})

t.test("a batch that fails is tried again create by create: one create's failure is its own", async (t) => {
  const { catalog, hold, transactions } = await open(t)
  const store = new TableStore(catalog)
  const P = 'acme/failing'
  const good = [rowsOf('x', 0, 200), rowsOf('y', 0, 300), rowsOf('z', 0, 100)]
  const release = hold()
  const before = transactions()
  const made = good.map((rows) => store.create(P, rows))
  // Rows that cannot be written (a text missing for the second digest): the appender throws.
  const badDigests = [rowDigest({ bad: 1 }), rowDigest({ bad: 2 })]
  const bad = store.createStored(P, tableDigest(badDigests), { digests: badDigests, texts: ['{"bad":1}'] })
  await new Promise((r) => setTimeout(r, 50))
  await (
    await release
  )()
  const results = await Promise.allSettled([...made, bad])
  t.same(
    results.map((r) => r.status),
    ['fulfilled', 'fulfilled', 'fulfilled', 'rejected'],
  )
  t.equal(transactions() - before, 1 + 4, 'the batch, then each create alone')
  for (const [k, rows] of good.entries()) {
    const back = await store.query(P, { digest: tableDigest(rows.map(rowDigest)) })
    t.same(
      back.map((r) => r.val),
      rows,
      `create ${k} stored`,
    )
  }
  t.equal(await rowCount(catalog, P), 600, 'no row of the failed create')
  t.same(await store.query(P, { digest: tableDigest(badDigests) }), [], 'no table for it')
})
