import t, { type Test } from 'tap'
import { TableStore } from '../src/catalog/tables.js'
import { TableReadCache } from '../src/catalog/table-read-cache.js'
import { CHUNK_ROWS, slice } from '../src/catalog/table-chunks.js'
import { openCatalog } from './helpers/catalog.js'
import { rowDigest, tableDigest } from './helpers/weave-digest.js'

const P = 'acme/cache'
// Rows 0..n-1, with a repeat every 1,000 rows: a repeated row is stored once and listed twice.
const rowAt = (i: number) => (i % 1000 === 999 ? { i: 0, text: 'row 0' } : { i, text: `row ${i}` })
const N = 2 * CHUNK_ROWS + 3_000

t.test('pages read through the cache equal the rows at those positions, again from the cache', async (t) => {
  const catalog = await openCatalog(t)
  const store = new TableStore(catalog)
  const rows = Array.from({ length: N }, (_, i) => rowAt(i))
  const { digest } = await store.create(P, rows)
  // Inside one chunk, across a chunk's end, the last rows, past the end, and the whole table.
  const cases: [number, number | undefined][] = [
    [0, 100],
    [CHUNK_ROWS - 50, 100],
    [2 * CHUNK_ROWS - 1, 2],
    [N - 10, 100],
    [N + 5, 10],
    [0, undefined],
  ]
  for (const round of ['first', 'cached']) {
    for (const [offset, limit] of cases) {
      const got = await store.query(P, { digest, offset, limit })
      const end = limit === undefined ? N : Math.min(N, offset + limit)
      const want = Array.from({ length: Math.max(0, end - offset) }, (_, k) => rowAt(offset + k))
      t.same(
        got.map((r) => r.val),
        want,
        `${round}: offset ${offset}, limit ${limit}`,
      )
      t.same(
        got.map((r) => r.original_index),
        want.map((_, k) => offset + k),
      )
      t.same(
        got.map((r) => r.digest),
        want.map(rowDigest),
      )
    }
  }
})

t.test('a table not there yet is not remembered as missing', async (t) => {
  const catalog = await openCatalog(t)
  const store = new TableStore(catalog)
  const rows = [{ a: 1 }, { a: 2 }]
  const digest = tableDigest(rows.map(rowDigest))
  t.same(await store.query(P, { digest }), [], 'unknown: no rows')
  t.equal((await store.create(P, rows)).digest, digest)
  t.same(
    (await store.query(P, { digest })).map((r) => r.val),
    rows,
    'created afterwards: its rows',
  )
})

t.test('the cache keeps at most its bounds of lists and chunks, and answers the same past them', async (t) => {
  const catalog = await openCatalog(t)
  const store = new TableStore(catalog)
  const a = await store.create(
    P,
    Array.from({ length: N }, (_, i) => rowAt(i)),
  )
  const b = await store.create(
    P,
    Array.from({ length: N }, (_, i) => rowAt(N - 1 - i)),
  )
  // Room for one three-chunk list and two chunks' seqs.
  const cache = new TableReadCache(4, 2)
  for (let round = 0; round < 2; round++)
    for (const { digest } of [a, b]) {
      const list = await cache.list(catalog, P, digest)
      t.ok(list, 'found')
      t.equal(list!.chunks.length, 3)
      for (const [from, to] of [
        [0, N],
        [CHUNK_ROWS - 3, CHUNK_ROWS + 3],
        [N - 7, N],
      ] as const) {
        // The whole table's entries as the catalog lists them, read without the cache.
        const want = (await slice(catalog, P, list!, from, to)).seqs
        t.same(await cache.seqsAt(catalog, P, list!, from, to), want, `round ${round}, [${from}, ${to})`)
      }
      const held = cache.held()
      t.ok(held.listChunks <= 4 && held.lists === 1, `one list kept (${held.lists}, ${held.listChunks} chunks)`)
      t.ok(held.seqChunks <= 2, `at most two chunks kept (${held.seqChunks})`)
    }
})

t.test('a long read answers from one statement and does not push out the pages it passes', async (t) => {
  const catalog = await openCatalog(t)
  const store = new TableStore(catalog)
  const n = 4 * CHUNK_ROWS + 100
  const { digest } = await store.create(
    P,
    Array.from({ length: n }, (_, i) => rowAt(i)),
  )
  const cache = new TableReadCache()
  const list = (await cache.list(catalog, P, digest))!
  t.equal(list.chunks.length, 5)
  await cache.seqsAt(catalog, P, list, 10, 110)
  t.equal(cache.held().seqChunks, 1, 'a page keeps its chunk')
  const all = await cache.seqsAt(catalog, P, list, 0, n)
  t.same(all, (await slice(catalog, P, list, 0, n)).seqs, 'the whole table, as the catalog lists it')
  t.equal(cache.held().seqChunks, 1, 'the whole table kept none of its five chunks')
})
