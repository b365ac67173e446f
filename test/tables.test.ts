import { rm } from 'node:fs/promises'
import path from 'node:path'
import t from 'tap'
import { DuckDBInstance } from '@duckdb/node-api'
import { postJson, startServer, tempDir, type TestServer } from './helpers/server.js'
import { dumps, rowDigest, tableDigest } from './helpers/weave-digest.js'
import { pointWeaveAt } from './helpers/weave.js'

// No chat in this file: its servers start without the built-in model (about 1 s of CPU less per start).
process.env.WEFT_MODEL ??= 'none'

// Expected digests come from helpers/weave-digest.ts, written from Weave's description, not from the server's code.
let s: TestServer
// Our own data dir: the last test reads the catalog file after the server stops.
const dataDir = tempDir()
t.before(async () => {
  s = await startServer({ dataDir })
})
t.teardown(async () => {
  await s.stop()
  await rm(dataDir, { recursive: true, force: true })
})

const P = 'acme/tables'
const post = (p: string, body: unknown) => postJson(s, p, body)
const query = async (body: Record<string, unknown>) => (await post('/table/query', { project_id: P, ...body })).json.rows as any[]

t.test('the independent digest agrees with a CPython vector', async (t) => {
  const row = { q: 'café', n: 1.5, k: [1, 1e-5], ok: true }
  t.equal(dumps(row), '{"q": "caf\\u00e9", "n": 1.5, "k": [1, 1e-05], "ok": true}')
  t.equal(rowDigest(row), 'NCTVoI0o6awGKmVjbOk0eZqX4wB3nOEnR0vqTu5NITQ')
  t.equal(tableDigest([rowDigest(row), rowDigest(row)]), '54aab0cc79732849b7914d7e9e9fba336f41819bbd565425eb0941c216c65a7f')
})

t.test('create answers Weave digests; query reads rows back in order, duplicates kept', async (t) => {
  const rows = [
    { q: 'café', n: 1.5, k: [1, 1e-5], ok: true },
    { a: 1, nested: { b: 'x' } },
    { a: 1, nested: { b: 'x' } },
  ]
  const r = await post('/table/create', { table: { project_id: P, rows } })
  t.equal(r.status, 200, r.text)
  const digests = rows.map(rowDigest)
  t.same(r.json, { digest: tableDigest(digests), row_digests: digests })
  const back = await query({ digest: r.json.digest })
  t.same(
    back,
    rows.map((val, i) => ({ digest: digests[i], val, original_index: i })),
  )
  t.same(await query({ digest: 'f'.repeat(64) }), [], 'unknown table: no rows')
  const again = await post('/table/create', { table: { project_id: P, rows, expected_digest: tableDigest(digests) } })
  t.equal(again.json.digest, r.json.digest, 'same rows, same digest')
  const wrong = await post('/table/create', { table: { project_id: P, rows, expected_digest: 'nope' } })
  t.equal(wrong.status, 409)
})

t.test('a non-object row is 400 and stores nothing', async (t) => {
  for (const bad of [[{ a: 1 }, 5], [{ a: 2 }, [1]], [null]]) {
    const r = await post('/table/create', { table: { project_id: P, rows: bad } })
    t.equal(r.status, 400, r.text)
    t.type(r.json.reason, 'string')
    t.same(await query({ digest: tableDigest(bad.map(rowDigest)) }), [])
  }
})

const mixed = [
  { n: 3, id: 0 },
  { n: 'b', id: 1 },
  { n: 1.5, id: 2 },
  { id: 3 },
  { n: 'a', id: 4 },
  { n: 10, id: 5, m: { s: 2 } },
  { id: 6, m: { s: 1 } },
]
let mixedDigest = ''
t.test('sort by dot paths: numbers before strings, missing last; filter and paging', async (t) => {
  const r = await post('/table/create', { table: { project_id: P, rows: mixed } })
  mixedDigest = r.json.digest
  const ids = (rows: any[]) => rows.map((x) => x.val.id)
  t.same(ids(await query({ digest: mixedDigest, sort_by: [{ field: 'n', direction: 'asc' }] })), [2, 0, 5, 4, 1, 3, 6])
  t.same(ids(await query({ digest: mixedDigest, sort_by: [{ field: 'n', direction: 'desc' }] })), [5, 0, 2, 1, 4, 3, 6])
  t.same(ids(await query({ digest: mixedDigest, sort_by: [{ field: 'm.s', direction: 'asc' }] })), [6, 5, 0, 1, 2, 3, 4])
  const paged = await query({ digest: mixedDigest, sort_by: [{ field: 'n', direction: 'asc' }], limit: 2, offset: 1 })
  t.same(ids(paged), [0, 5])
  t.same(
    paged.map((x) => x.original_index),
    [0, 5],
  )
  const want = [rowDigest(mixed[4]), rowDigest(mixed[1])]
  const filtered = await query({ digest: mixedDigest, filter: { row_digests: want } })
  t.same(ids(filtered), [1, 4], 'filter keeps table order')
  for (const field of ['n"; DROP TABLE tables; --', 'a..b', '$.n']) {
    const bad = await post('/table/query', { project_id: P, digest: mixedDigest, sort_by: [{ field, direction: 'asc' }] })
    t.ok(bad.status >= 400 && bad.status < 500, `sort field ${field} refused (${bad.status})`)
  }
  t.equal((await query({ digest: mixedDigest })).length, mixed.length, 'still all there')
  const unknown = await post('/table/query', { project_id: P, digest: mixedDigest, bogus: 1 })
  t.equal(unknown.status, 422, 'strict request')
})

t.test('query_stream, query_stats, query_stats_batch', async (t) => {
  const r = await fetch(s.url + '/table/query_stream', {
    method: 'POST',
    headers: { ...s.basic(), 'content-type': 'application/json' },
    body: JSON.stringify({ project_id: P, digest: mixedDigest, limit: 3 }),
  })
  const lines = (await r.text())
    .split('\n')
    .filter(Boolean)
    .map((l) => JSON.parse(l))
  t.same(
    lines.map((l) => l.original_index),
    [0, 1, 2],
  )
  t.same((await post('/table/query_stats', { project_id: P, digest: mixedDigest })).json, { count: mixed.length })
  const sized = (await post('/table/query_stats', { project_id: P, digest: mixedDigest, include_storage_size: true })).json
  t.equal(sized.count, mixed.length)
  t.equal(
    sized.storage_size_bytes,
    mixed.reduce((n, row) => n + Buffer.byteLength(JSON.stringify(row)), 0),
  )
  const batch = await post('/table/query_stats_batch', { project_id: P, digests: [mixedDigest, 'f'.repeat(64)] })
  t.same(batch.json, { tables: [{ digest: mixedDigest, count: mixed.length }] })
})

t.test('update: append, pop, insert in order; bad index stores nothing', async (t) => {
  const base = [{ i: 0 }, { i: 1 }, { i: 2 }]
  const created = (await post('/table/create', { table: { project_id: P, rows: base } })).json
  const updates = [{ append: { row: { i: 3 } } }, { pop: { index: 0 } }, { insert: { index: 1, row: { i: 9 } } }]
  const r = await post('/table/update', { project_id: P, base_digest: created.digest, updates })
  t.equal(r.status, 200, r.text)
  const after = [{ i: 1 }, { i: 9 }, { i: 2 }, { i: 3 }]
  t.same(r.json, { digest: tableDigest(after.map(rowDigest)), updated_row_digests: [{ i: 3 }, { i: 0 }, { i: 9 }].map(rowDigest) })
  t.same(
    (await query({ digest: r.json.digest })).map((x) => x.val),
    after,
  )
  for (const bad of [
    [{ pop: { index: 3 } }],
    [{ append: { row: { i: 7 } } }, { insert: { index: 5, row: { i: 8 } } }],
    [{ pop: { index: -1 } }],
  ]) {
    const b = await post('/table/update', { project_id: P, base_digest: created.digest, updates: bad })
    t.equal(b.status, 400, b.text)
    t.match(b.json.reason, /Index out of range/)
  }
  const badRow = await post('/table/update', { project_id: P, base_digest: created.digest, updates: [{ append: { row: 'x' } }] })
  t.equal(badRow.status, 400)
  t.same(await query({ digest: tableDigest([...base, { i: 7 }].map(rowDigest)) }), [], 'the failed update left no table')
  const none = await post('/table/update', { project_id: P, base_digest: 'f'.repeat(64), updates: [] })
  t.equal(none.status, 404)
})

t.test('create_from_digests', async (t) => {
  const digests = [rowDigest({ i: 2 }), rowDigest({ i: 0 }), rowDigest({ i: 2 })]
  const r = await post('/table/create_from_digests', { project_id: P, row_digests: digests })
  t.same(r.json, { digest: tableDigest(digests) })
  t.same(
    (await query({ digest: r.json.digest })).map((x) => x.val),
    [{ i: 2 }, { i: 0 }, { i: 2 }],
  )
  const unknown = await post('/table/create_from_digests', { project_id: P, row_digests: [rowDigest({ never: 'stored' })] })
  t.equal(unknown.status, 400)
  t.same(await query({ digest: tableDigest([rowDigest({ never: 'stored' })]) }), [])
})

t.test('too many rows is 413', async (t) => {
  const rows = Array.from({ length: 100_001 }, () => ({}))
  const r = await post('/table/create', { table: { project_id: P, rows } })
  t.equal(r.status, 413)
  t.type(r.json.reason, 'string')
})

t.test('the weave SDK saves a dataset and reads its rows back', async (t) => {
  pointWeaveAt(s)
  const weave = await import('weave')
  const client = await weave.init('acme/datasets')
  const rows = [
    { q: 'two plus two', a: 4 },
    { q: 'café', a: 1.5 },
    { q: 'two plus two', a: 4 },
  ]
  // The SDK marks the row objects it is given; it gets copies.
  const ref = await new weave.Dataset({ name: 'sums', rows: structuredClone(rows) }).save()
  const ds: any = await client.get(ref)
  const back: unknown[] = []
  for await (const row of ds) {
    const { __savedRef: _r, ...val } = row as Record<string, unknown>
    back.push(val)
  }
  t.same(back, rows)
  const obj = (await post('/obj/read', { project_id: 'acme/datasets', object_id: ref.objectId, digest: ref.digest })).json.obj
  t.equal(obj.val.rows, `weave:///acme/datasets/table/${tableDigest(rows.map(rowDigest))}`, 'the SDK ref names our table digest')
})

// This reads the embedded catalog's file; on ClickHouse test/clickhouse-objects.test.ts checks the same in its tables.
t.test(
  'a table re-saved with one row changed stores one new row',
  { skip: process.env.WEFT_STORAGE === 'chdb' && 'embedded catalog file' },
  async (t) => {
    const rows = Array.from({ length: 5 }, (_, i) => ({ resave: i }))
    await post('/table/create', { table: { project_id: P, rows } })
    await post('/table/create', { table: { project_id: P, rows: rows.map((r, i) => (i === 2 ? { resave: 'changed' } : r)) } })
    await s.stop()
    const db = await DuckDBInstance.create(path.join(dataDir, 'catalog.duckdb'))
    const conn = await db.connect()
    const count = async (sql: string) => Number((await conn.runAndReadAll(sql)).getRows()[0]![0])
    t.equal(await count(`SELECT count(*) FROM table_rows WHERE val_dump LIKE '{"resave":%'`), 6)
    // Rows of refused requests (non-object rows, a bad index, too many rows) were not kept.
    for (const dump of ['{"a":1}', '{"a":2}', '{"i":7}', '{"i":8}', '{}'])
      t.equal(await count(`SELECT count(*) FROM table_rows WHERE val_dump = '${dump}'`), 0, `${dump} not stored`)
    conn.closeSync()
    db.closeSync()
  },
)
