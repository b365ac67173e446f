import { rm } from 'node:fs/promises'
import t from 'tap'
import { postJson, startServer, tempDir, type TestServer } from './helpers/server.js'
import { rowDigest, tableDigest } from './helpers/weave-digest.js'
import { catalogAt } from './helpers/catalog.js'

// No chat in this file: its servers start without the built-in model (about 1 s of CPU less per start).
process.env.WEFT_MODEL ??= 'none'

// Expected digests: helpers/weave-digest.ts, independent of the server.
// Past the old bound of 100,000 rows per table; each request stays under the per-request bound.
const N = 150_000
const HALF = N / 2
const row = (i: number) => ({ i, k: (i * 7919) % N, s: `r${String((i * 104729) % N).padStart(6, '0')}` })
const rows = Array.from({ length: N }, (_, i) => row(i))
const digests = rows.map(rowDigest)

let s: TestServer
t.before(async () => {
  s = await startServer()
})
t.teardown(() => s.stop())

const P = 'acme/big'
const post = (p: string, body: unknown) => postJson(s, p, body)
const query = async (body: Record<string, unknown>) => {
  const r = await post('/table/query', { project_id: P, ...body })
  if (r.status !== 200) throw new Error(r.text)
  return r.json.rows as { digest: string; val: ReturnType<typeof row>; original_index: number }[]
}
const expect = (positions: number[]) => positions.map((p) => ({ digest: digests[p], val: rows[p], original_index: p }))
const range = (a: number, b: number) => Array.from({ length: b - a }, (_, k) => a + k)

let big = ''
t.test('a 150k-row table: created, then appended to by /table/update', async (t) => {
  const first = await post('/table/create', { table: { project_id: P, rows: rows.slice(0, HALF) } })
  t.equal(first.status, 200, first.text)
  t.equal(first.json.digest, tableDigest(digests.slice(0, HALF)))
  const updates = rows.slice(HALF).map((r) => ({ append: { row: r } }))
  const r = await post('/table/update', { project_id: P, base_digest: first.json.digest, updates })
  t.equal(r.status, 200, r.text)
  big = r.json.digest
  t.equal(big, tableDigest(digests))
  t.same((await post('/table/query_stats', { project_id: P, digest: big })).json, { count: N })
  t.same(await query({ digest: big, offset: N - 50, limit: 100 }), expect(range(N - 50, N)), 'last page')
  t.same(await query({ digest: big, offset: 8190, limit: 5 }), expect(range(8190, 8195)), 'across a chunk boundary')
  t.same(await query({ digest: big, offset: HALF - 2, limit: 4 }), expect(range(HALF - 2, HALF + 2)), 'across the append')
  t.same(await query({ digest: big, offset: N, limit: 10 }), [], 'past the end')
})

t.test('two sorts of one table each answer in their own order', async (t) => {
  const byK = [...range(0, N)].sort((a, b) => rows[b]!.k - rows[a]!.k)
  const byS = [...range(0, N)].sort((a, b) => (rows[a]!.s < rows[b]!.s ? -1 : 1))
  for (let pass = 0; pass < 2; pass++) {
    t.same(await query({ digest: big, sort_by: [{ field: 'k', direction: 'desc' }], limit: 100 }), expect(byK.slice(0, 100)))
    t.same(
      await query({ digest: big, sort_by: [{ field: 's', direction: 'asc' }], limit: 100, offset: 5000 }),
      expect(byS.slice(5000, 5100)),
    )
    // Past the first 1,000 of an order whose first page was answered by a top-N sort: the whole order is computed.
    t.same(await query({ digest: big, sort_by: [{ field: 'k', direction: 'desc' }], limit: 50, offset: 990 }), expect(byK.slice(990, 1040)))
    t.same(await query({ digest: big, sort_by: [{ field: 'k', direction: 'desc' }], limit: 3 }), expect(byK.slice(0, 3)))
  }
})

t.test('pop and insert on a many-chunk table', async (t) => {
  const r = await post('/table/update', {
    project_id: P,
    base_digest: big,
    updates: [{ pop: { index: 10_000 } }, { insert: { index: 20_000, row: { i: -1, k: -1, s: 'new' } } }],
  })
  t.equal(r.status, 200, r.text)
  const after = [...digests.slice(0, 10_000), ...digests.slice(10_001)]
  after.splice(20_000, 0, rowDigest({ i: -1, k: -1, s: 'new' }))
  t.equal(r.json.digest, tableDigest(after))
  const page = await query({ digest: r.json.digest, offset: 9_999, limit: 3 })
  t.same(
    page.map((x) => x.val.i),
    [9_999, 10_001, 10_002],
  )
  t.same(
    (await query({ digest: r.json.digest, offset: 20_000, limit: 2 })).map((x) => x.val.i),
    [-1, 20_001],
  )
  t.same(await query({ digest: r.json.digest, offset: N - 1, limit: 5 }), [
    { digest: digests[N - 1], val: rows[N - 1], original_index: N - 1 },
  ])
})

t.test('create_from_digests past 100k digests', async (t) => {
  const order = [...digests].reverse()
  const r = await post('/table/create_from_digests', { project_id: P, row_digests: order })
  t.equal(r.status, 200, r.text)
  t.equal(r.json.digest, tableDigest(order))
  t.same(
    (await query({ digest: r.json.digest, offset: 0, limit: 2 })).map((x) => x.val),
    [rows[N - 1], rows[N - 2]],
  )
})

t.test('1000 row refs through a dataset object, by id and by index', async (t) => {
  const tableRef = `weave:///${P}/table/${big}`
  const c = await post('/obj/create', { obj: { project_id: P, object_id: 'big_ds', val: { _type: 'Dataset', rows: tableRef } } })
  t.equal(c.status, 200, c.text)
  const picks = Array.from({ length: 500 }, (_, k) => (k * 2654435761) % N)
  const refs = [
    ...picks.map((p) => `weave:///${P}/object/big_ds:${c.json.digest}/attr/rows/id/${digests[p]}`),
    ...picks.map((p) => `weave:///${P}/object/big_ds:${c.json.digest}/attr/rows/index/${p}`),
  ]
  const r = await post('/refs/read_batch', { refs })
  t.equal(r.status, 200, r.text)
  t.same(
    r.json.vals,
    [...picks, ...picks].map((p) => rows[p]),
  )
  const miss = await post('/refs/read_batch', {
    refs: [
      `weave:///${P}/object/big_ds:${c.json.digest}/attr/rows/id/${rowDigest({ never: 1 })}`,
      `weave:///${P}/object/big_ds:${c.json.digest}/attr/rows/index/${N}`,
    ],
  })
  t.same(miss.json.vals, [null, null], 'a row the table does not list, a position past its end')
})

t.test('a table over the per-request bound is 413, over the table bound too', async (t) => {
  const r = await post('/table/create', { table: { project_id: P, rows: Array.from({ length: 100_001 }, () => ({})) } })
  t.equal(r.status, 413)
})

t.test('tables stored before the chunked layout read the same after the migration', async (t) => {
  const dir = tempDir()
  const { db, conn } = await catalogAt(dir, 6)
  const old = [row(1), row(2), row(1)]
  const oldDigests = old.map(rowDigest)
  for (const r of old.slice(0, 2)) await conn.run(`INSERT INTO table_rows VALUES ('acme/old', $1, $2)`, [rowDigest(r), JSON.stringify(r)])
  await conn.run(`INSERT INTO tables VALUES ('acme/old', $1, from_json($2::JSON, '["VARCHAR"]'), now())`, [
    tableDigest(oldDigests),
    JSON.stringify(oldDigests),
  ])
  await conn.run(`INSERT INTO tables VALUES ('acme/old', $1, []::VARCHAR[], now())`, [tableDigest([])])
  // Object versions from before `is_latest`: o1's newest version is deleted, so its v1 is latest; o2 has one.
  const version = (id: string, digest: string, vi: number, at: string, deleted: string | null) =>
    conn.run(`INSERT INTO objects VALUES ('acme/old', $1, $2, $3, 'object', NULL, NULL, $4, NULL, $5::TIMESTAMP, $6::TIMESTAMP)`, [
      id,
      digest,
      vi,
      JSON.stringify({ v: digest }),
      at,
      deleted,
    ])
  await version('o1', 'a0', 0, '2026-01-01 00:00:00', null)
  await version('o1', 'a1', 1, '2026-01-02 00:00:00', null)
  await version('o1', 'a2', 2, '2026-01-03 00:00:00', '2026-01-04 00:00:00')
  await version('o2', 'b0', 0, '2026-01-01 00:00:00', null)
  conn.closeSync()
  db.closeSync()
  const s2 = await startServer({ dataDir: dir })
  try {
    const q = (body: unknown) => postJson(s2, '/table/query', body)
    t.same(
      (await q({ project_id: 'acme/old', digest: tableDigest(oldDigests) })).json.rows,
      old.map((val, i) => ({ digest: oldDigests[i], val, original_index: i })),
    )
    t.same((await q({ project_id: 'acme/old', digest: tableDigest([]) })).json.rows, [])
    t.same((await postJson(s2, '/table/query_stats', { project_id: 'acme/old', digest: tableDigest([]) })).json, { count: 0 })
    const app = await postJson(s2, '/table/update', {
      project_id: 'acme/old',
      base_digest: tableDigest(oldDigests),
      updates: [{ append: { row: row(3) } }],
    })
    t.equal(app.json.digest, tableDigest([...oldDigests, rowDigest(row(3))]), 'an old table appends')
    const latest = (await postJson(s2, '/objs/query', { project_id: 'acme/old', filter: { latest_only: true } })).json.objs
    t.same(
      latest.map((o: { object_id: string; digest: string; is_latest: number }) => [o.object_id, o.digest, o.is_latest]),
      [
        ['o2', 'b0', 1],
        ['o1', 'a1', 1],
      ],
      'latest versions carried over (by creation time)',
    )
    const read = (await postJson(s2, '/obj/read', { project_id: 'acme/old', object_id: 'o1', digest: 'latest' })).json.obj
    t.equal(read.digest, 'a1')
  } finally {
    await s2.stop()
    await rm(dir, { recursive: true, force: true })
  }
})
