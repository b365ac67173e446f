// The object side on the ClickHouse backend, where the shared suites cannot look: what the server wrote into
// ClickHouse's tables (read back through chdb after the server stopped), and the `files` table that a remote
// ClickHouse server keeps file bytes in (clickhouse/files.ts), driven directly through chdb.
import { createHash, randomBytes } from 'node:crypto'
import path from 'node:path'
import t from 'tap'
import { ChdbExecutor, chdbResolvable } from '../src/clickhouse/chdb-executor.js'
import { ClickHouseFiles } from '../src/clickhouse/files.js'
import { migrate } from '../src/clickhouse/migrations.js'
import { chStore } from '../src/clickhouse/objects-store.js'
import { ROOT, postJson, startServer, tempDir, CHDB_FROM } from './helpers/server.js'

// No chat in this file: its servers start without the built-in model (about 1 s of CPU less per start).
process.env.WEFT_MODEL ??= 'none'

const FROM = CHDB_FROM
const available = chdbResolvable(FROM)
const skip = !available && 'chdb not installed (npm --prefix bench/peer-deps install)'
const P = 'chobj/tables'

/** Weave's file digest, computed here: base64url of the SHA-256, '-' → 'X', '_' → 'Y'. */
const weaveDigest = (b: Buffer) => createHash('sha256').update(b).digest('base64url').replace(/-/g, 'X').replace(/_/g, 'Y')

t.test('tables in ClickHouse: one stored row per distinct row, nothing from refused requests', { skip }, async (t) => {
  const dataDir = tempDir()
  const s = await startServer({ dataDir, args: ['--storage', 'chdb'] })
  const post = async (p: string, body: unknown, status = 200) => {
    const r = await postJson(s, p, body)
    t.equal(r.status, status, `${p} ${JSON.stringify(body).slice(0, 80)}`)
    return r.json
  }
  const rows = Array.from({ length: 5 }, (_, i) => ({ resave: i }))
  const first = await post('/table/create', { table: { project_id: P, rows } })
  await post('/table/create', { table: { project_id: P, rows: rows.map((r, i) => (i === 2 ? { resave: 'changed' } : r)) } })
  // Refused: a non-object row, a bad index (after a valid append in the same request), a digest naming no row.
  await post('/table/create', { table: { project_id: P, rows: [{ a: 1 }, 7] } }, 400)
  const bad = [{ append: { row: { i: 7 } } }, { pop: { index: 99 } }]
  await post('/table/update', { project_id: P, base_digest: first.digest, updates: bad }, 400)
  await post('/table/create_from_digests', { project_id: P, row_digests: [first.row_digests[0], 'A'.repeat(43)] }, 400)
  const appended = await post('/table/update', { project_id: P, base_digest: first.digest, updates: [{ append: { row: { i: 8 } } }] })
  t.equal(
    appended.digest,
    createHash('sha256')
      .update([...first.row_digests, appended.updated_row_digests[0]].join(''))
      .digest('hex'),
  )
  await s.stop()

  const exec = await ChdbExecutor.open({ path: path.join(dataDir, 'chdb'), resolveFrom: FROM })
  t.teardown(() => exec.close())
  const count = async (sql: string, params = {}) => Number((await exec.query(sql, params))[0]!.n)
  const resaved = await count(`SELECT count() AS n FROM weft.table_rows WHERE startsWith(val_dump, '{"resave":')`)
  t.equal(resaved, 6, 'five rows, then one changed row')
  for (const dump of ['{"a":1}', '{"i":7}'])
    t.equal(await count('SELECT count() AS n FROM weft.table_rows WHERE val_dump = {d:String}', { d: dump }), 0, `${dump} not stored`)
  t.equal(await count('SELECT count(DISTINCT digest) AS n FROM weft.tables WHERE project_id = {p:String}', { p: P }), 3)
})

t.test('file bytes in the ClickHouse files table: round trip, sizes, a half-written file stays invisible', { skip }, async (t) => {
  const dir = tempDir()
  const exec = await ChdbExecutor.open({ path: path.join(dir, 'chdb'), resolveFrom: FROM })
  t.teardown(() => exec.close())
  const layout = { database: 'weft' }
  await migrate(exec, layout)
  const files = new ClickHouseFiles(chStore(exec, layout), path.join(dir, 'tmp'))
  const big = randomBytes(2.5 * 1024 * 1024)
  const small = Buffer.from('print("héllo")\n', 'utf8')
  const empty = Buffer.alloc(0)
  for (const b of [big, small, empty]) {
    const d = await files.put('e/p', [b.subarray(0, 1000), b.subarray(1000)])
    t.equal(d, weaveDigest(b))
    t.ok((await files.read('e/p', d))!.equals(b), `${b.length} bytes read back identical`)
  }
  await files.put('e/p', [small])
  t.equal(await files.totalSize('e/p'), big.length + small.length, 'each digest counted once')
  t.equal(await files.read('e/other', weaveDigest(small)), null, 'another project does not see it')
  // Chunk 0 of 2 only, as an upload that died between its inserts leaves it.
  const half = 'H'.repeat(43)
  const row = {
    project_id: 'e/p',
    digest: half,
    chunk_index: 0,
    n_chunks: 2,
    name: '',
    size_bytes: 10,
    val_bytes: 'AAAA',
    created_at: '2026-01-01 00:00:00',
  }
  await exec.insert('weft.files', [row])
  t.equal(await files.open('e/p', half), null)
  t.equal(await files.totalSize('e/p'), big.length + small.length)
})
