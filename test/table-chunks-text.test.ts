import t from 'tap'
import { statSync } from 'node:fs'
import { rm } from 'node:fs/promises'
import path from 'node:path'
import { Catalog, CATALOG_FILE } from '../src/catalog/db.js'
import { TableStore } from '../src/catalog/tables.js'
import { catalogAt } from './helpers/catalog.js'
import { tempDir } from './helpers/server.js'
import { rowDigest, tableDigest } from './helpers/weave-digest.js'

// Catalog migration 12: table_chunks keeps each chunk's row digests and seqs as comma-joined text, because DuckDB
// logged the lists of every earlier chunk row again at each commit that appended one.

t.test('chunks stored as lists before migration 12 read the same after it', async (t) => {
  const dir = tempDir()
  t.teardown(() => rm(dir, { recursive: true, force: true }))
  const { db, conn } = await catalogAt(dir, 11)
  // Two rows and a table of three entries (one row twice), as weft 11 stored them: one chunk, its lists.
  const rows = [{ a: 1 }, { b: 'two' }]
  const digests = rows.map(rowDigest)
  for (const [i, r] of rows.entries())
    await conn.run(`INSERT INTO table_rows (project_id, digest, val_dump, seq) VALUES ('acme/old', $1, $2, $3)`, [
      digests[i]!,
      JSON.stringify(r),
      BigInt(40 + i),
    ])
  const entries = [digests[0]!, digests[1]!, digests[0]!]
  const chunk = tableDigest(entries)
  await conn.run(`INSERT INTO table_chunks VALUES ('acme/old', $1, from_json($2::JSON, '["VARCHAR"]'), [40, 41, 40])`, [
    chunk,
    JSON.stringify(entries),
  ])
  await conn.run(`INSERT INTO table_lists VALUES ('acme/old', $1, 3, [$2], [0], now())`, [tableDigest(entries), chunk])
  conn.closeSync()
  db.closeSync()

  const catalog = await Catalog.open(dir)
  try {
    t.ok((await catalog.schemaVersion()) >= 12)
    t.same(await catalog.all(`SELECT row_digests, row_seqs FROM table_chunks`), [{ row_digests: entries.join(','), row_seqs: '40,41,40' }])
    const store = new TableStore(catalog)
    const want = [rows[0], rows[1], rows[0]].map((val, i) => ({ digest: entries[i], val, original_index: i }))
    t.same(await store.query('acme/old', { digest: tableDigest(entries) }), want, 'the whole table')
    t.same(await store.query('acme/old', { digest: tableDigest(entries), offset: 1, limit: 1 }), [want[1]], 'a page')
    t.same(await store.query('acme/old', { digest: tableDigest(entries), sort_by: [{ field: 'b', direction: 'desc' }] }), [
      want[1],
      want[0],
      want[2],
    ])
    t.same(await store.stats('acme/old', [tableDigest(entries)], true), [
      { digest: tableDigest(entries), count: 3, storage_size_bytes: JSON.stringify(rows[0]).length + JSON.stringify(rows[1]).length },
    ])
  } finally {
    await catalog.close()
  }
})

t.test('each append logs its own rows, not every chunk stored before it', async (t) => {
  const dir = tempDir()
  const catalog = await Catalog.open(dir)
  t.teardown(async () => {
    await catalog.close()
    await rm(dir, { recursive: true, force: true })
  })
  const store = new TableStore(catalog)
  const wal = path.join(dir, CATALOG_FILE + '.wal')
  const walBytes = () => {
    try {
      return statSync(wal).size
    } catch {
      return 0
    }
  }
  // Appends of 9,000 small rows: each writes a chunk or two of ~9,000 digests (~400 KB of text) to the log.
  const chunkOf = (k: number) => Array.from({ length: 9000 }, (_, i) => ({ k, i }))
  let { digest } = await store.create('acme/log', chunkOf(0))
  const grew: number[] = []
  for (let k = 1; k <= 8; k++) {
    const before = walBytes()
    digest = (
      await store.update(
        'acme/log',
        digest,
        chunkOf(k).map((row) => ({ append: { row } })),
      )
    ).digest
    grew.push(walBytes() - before)
  }
  t.ok(
    grew.every((g) => g > 0),
    `the log grows by ${grew.join(', ')} bytes`,
  )
  // With lists the eighth append logged ~8x the first's bytes; each now logs about the same.
  t.ok(grew.at(-1)! < 1.5 * grew[0]!, `the last append logged ${grew.at(-1)} bytes, the first ${grew[0]}`)
  t.equal(((await store.query('acme/log', { digest, offset: 9000 * 8 + 5, limit: 1 }))[0]?.val as { i: number } | undefined)?.i, 5)
})
