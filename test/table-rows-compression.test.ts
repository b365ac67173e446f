import t from 'tap'
import { rm } from 'node:fs/promises'
import { Catalog } from '../src/catalog/db.js'
import { catalogAt } from './helpers/catalog.js'
import { tempDir } from './helpers/server.js'

// Catalog migration 11: table_rows copied into columns whose compression is chosen once (FSST for the rows' JSON,
// none for the digests), with every row and seq kept.
const N = 5000
const text = (i: number) => JSON.stringify({ i, prompt: `question ${i % 97}: what is ${i} squared?`, answer: String(i * i) })

t.test('rows stored before migration 11 are all there after it, seqs kept, in the chosen compressions', async (t) => {
  const dir = tempDir()
  t.teardown(() => rm(dir, { recursive: true, force: true }))
  const { db, conn } = await catalogAt(dir, 10)
  // Seqs drawn from the sequence, with a gap, as appends that were rolled back leave them.
  await conn.run(`SELECT nextval('table_row_seq') FROM range(7)`)
  await conn.run(
    `INSERT INTO table_rows (project_id, digest, val_dump)
      SELECT CASE WHEN i % 2 = 0 THEN 'acme/a' ELSE 'acme/b' END, 'd' || i, $1::JSON->>('$[' || i || ']') FROM range(${N}) r(i)`,
    [JSON.stringify(Array.from({ length: N }, (_, i) => text(i)))],
  )
  const before = (await conn.runAndReadAll('SELECT project_id, digest, val_dump, seq FROM table_rows ORDER BY seq')).getRowObjectsJS()
  conn.closeSync()
  db.closeSync()
  t.equal(before.length, N)
  t.equal(before[0]!.seq, 8n, 'the old seqs start after the gap')

  const catalog = await Catalog.open(dir)
  try {
    t.ok((await catalog.schemaVersion()) >= 11, 'migrated past 11')
    const after = await catalog.all<{ digest: string; val_dump: string }>(
      'SELECT project_id, digest, val_dump, seq FROM table_rows ORDER BY seq',
    )
    t.same(after, before, 'every row, with its seq')
    for (const [i, r] of after.entries()) if (r.val_dump !== text(Number(r.digest.slice(1)))) t.fail(`row ${i} changed`)
    // New rows take seqs after the old ones: the sequence is the table's default still.
    await catalog.run(`INSERT INTO table_rows (project_id, digest, val_dump) VALUES ('acme/a', 'new', '{}')`)
    const [last] = await catalog.all<{ seq: bigint }>(`SELECT seq FROM table_rows WHERE digest = 'new'`)
    t.ok(last!.seq > (before.at(-1)!.seq as bigint), 'a new row is numbered after the old ones')
    await catalog.run('CHECKPOINT')
    const storage = await catalog.all<{ column_name: string; compression: string }>(
      `SELECT DISTINCT column_name, compression FROM pragma_storage_info('table_rows')
        WHERE segment_type = 'VARCHAR' AND column_name IN ('digest', 'val_dump') ORDER BY ALL`,
    )
    // Without the migration's choice DuckDB's own analysis stores these ~80-byte rows uncompressed (seen: val_dump 'Uncompressed').
    t.same(storage, [
      { column_name: 'digest', compression: 'Uncompressed' },
      { column_name: 'val_dump', compression: 'FSST' },
    ])
  } finally {
    await catalog.close()
  }
})
