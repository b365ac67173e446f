import { rm } from 'node:fs/promises'
import t from 'tap'
import { DuckDBInstance } from '@duckdb/node-api'
import { postJson, requestJson, startServer, tempDir, type TestServer } from './helpers/server.js'
import { rowDigest, tableDigest } from './helpers/weave-digest.js'
// The built pool, as the servers here run: from the sources its worker thread would load TypeScript through the
// test loader, ~10 s on this machine against well under one.
import { TablePool } from '../src/catalog/table-pool.js'
import { prepareTableTask, unpackRows } from '../src/catalog/table-prepare.js'

// The table write path: bodies parsed and digested in worker threads, and the per-project row index that says
// which row digests are stored already (src/catalog/table-row-index.ts), across restarts and failed commits.
process.env.WEFT_MODEL ??= 'none'

const P = 'acme/ingest'
const dataDir = tempDir()
let s: TestServer
t.before(async () => {
  // Migrated first; then the next catalog commit, the first table write's, fails as a full disk would: the rows
  // it drew stay in the index as hints.
  const first = await startServer({ dataDir })
  await first.stop()
  s = await startServer({ dataDir, key: first.key, env: { WEFT_FAILPOINTS: 'catalog.before-commit:enospc*1' } })
})
t.teardown(async () => {
  await s?.stop()
  await rm(dataDir, { recursive: true, force: true })
})

const post = (p: string, body: unknown) => postJson(s, p, body)
const rows = (from: number, n: number, tag: string) => Array.from({ length: n }, (_, i) => ({ i: from + i, tag, pad: 'x'.repeat(200) }))
const create = (r: unknown[]) => post('/table/create', { table: { project_id: P, rows: r } })
const page = async (digest: string) => ((await post('/table/query', { project_id: P, digest })).json.rows as any[]).map((r) => r.val)

t.test('a failed commit leaves hints only: the same rows are written again, right', async (t) => {
  // 200 rows: their stale entries are checked by seq (past 256 candidates the lookup goes by digest).
  const a = rows(0, 200, 'a')
  const failed = await create(a)
  t.equal(failed.status, 507, `the failed write: ${failed.text.slice(0, 120)}`)
  const r = await create(a)
  t.equal(r.status, 200, r.text.slice(0, 200))
  t.equal(r.json.digest, tableDigest(a.map(rowDigest)))
  t.same(await page(r.json.digest), a, 'every row reads back')
})

/** Written by the next test; its rows are counted in the catalog by the one after, which stops the server anyway. */
const race = { project: 'acme/race' }

t.test('concurrent writes sharing rows: each table right (stored once: counted in the next test)', async (t) => {
  // Four creates and an append in flight at once, all holding the same 150 rows in different orders beside their
  // own: only the serialised writes and the row index keep the shared rows single (migration 9 dropped the key).
  const R = race.project
  const shared = rows(0, 150, 'shared')
  const own = (k: number) => rows(1000 * (k + 1), 40, `own${k}`)
  const base = await post('/table/create', { table: { project_id: R, rows: own(9) } })
  const tables = [0, 1, 2, 3].map((k) => (k % 2 ? [...own(k), ...shared] : [...shared].reverse().concat(own(k))))
  const writes = await Promise.all([
    ...tables.map((r) => post('/table/create', { table: { project_id: R, rows: r } })),
    post('/table/update', { project_id: R, base_digest: base.json.digest, updates: shared.map((row) => ({ append: { row } })) }),
    // The first table again, at once: the same chunk, which is stored once (migration 10 dropped the chunks' key).
    post('/table/create', { table: { project_id: R, rows: tables[0]! } }),
  ])
  t.same(
    writes.map((w) => w.status),
    [200, 200, 200, 200, 200, 200],
  )
  t.equal(writes[5]!.json.digest, writes[0]!.json.digest, 'the same rows, the same table')
  t.same(
    writes.slice(0, 4).map((w) => w.json.digest),
    tables.map((r) => tableDigest(r.map(rowDigest))),
  )
})

t.test('rows already stored are found (and not stored twice) in one process and after a restart', async (t) => {
  const a = rows(0, 300, 'a')
  const b = rows(1000, 200, 'b')
  const mixed = [...b.slice(0, 100), ...a.slice(100, 200), ...b.slice(100)]
  const r1 = await create(mixed)
  t.equal(r1.status, 200, r1.text.slice(0, 200))
  t.same(await page(r1.json.digest), mixed)
  await s.stop()
  s = await startServer({ dataDir, key: s.key })
  const c = rows(5000, 50, 'c')
  const again = [...c, ...a, ...b]
  const r2 = await create(again)
  t.equal(r2.status, 200, `after a restart: ${r2.text.slice(0, 200)}`)
  t.equal(r2.json.digest, tableDigest(again.map(rowDigest)))
  t.same(await page(r2.json.digest), again)
  const appended = await post('/table/update', {
    project_id: P,
    base_digest: r1.json.digest,
    updates: [...a, ...c].map((row) => ({ append: { row } })),
  })
  t.equal(appended.status, 200, appended.text.slice(0, 200))
  t.same(await page(appended.json.digest), [...mixed, ...a, ...c])
  await s.stop()
  const db = await DuckDBInstance.create(`${dataDir}/catalog.duckdb`)
  const conn = await db.connect()
  const n = (await conn.runAndReadAll(`SELECT count(*), count(DISTINCT digest) FROM table_rows WHERE project_id = '${P}'`)).getRows()[0]!
  const raced = await conn.runAndReadAll(`SELECT count(*), count(DISTINCT digest) FROM table_rows WHERE project_id = '${race.project}'`)
  const chunks = await conn.runAndReadAll(`SELECT count(*), count(DISTINCT (project_id, digest)) FROM table_chunks`)
  conn.closeSync()
  db.closeSync()
  t.same(n.map(Number), [550, 550], 'each distinct row stored once: 300 a + 200 b + 50 c')
  t.same(raced.getRows()[0]!.map(Number), [150 + 5 * 40, 150 + 5 * 40], 'the concurrent writes: 150 shared rows and 5 x 40 own, once each')
  const [all, distinct] = chunks.getRows()[0]!.map(Number)
  t.ok(all! >= 7, `chunks were written (${all})`)
  t.equal(all, distinct, 'each chunk stored once per project, the concurrent writes of one table included')
  s = await startServer({ dataDir, key: s.key })
})

t.test('bad bodies answer as before the worker: 422, 400, 403, 413, and store nothing', async (t) => {
  const raw = (p: string, body: string) =>
    fetch(s.url + p, { method: 'POST', headers: { ...s.basic(), 'content-type': 'application/json' }, body })
  const bad = await raw('/table/create', '{"table": {"project_id": "acme/ingest", "rows": [{"a": 1},')
  t.equal(bad.status, 422, 'malformed JSON')
  t.equal(((await bad.json()) as any).detail[0].type, 'json_invalid')
  let deep = '{"a":1}'
  for (let i = 0; i < 600; i++) deep = `{"d":${deep}}`
  const tooDeep = await raw('/table/create', `{"table":{"project_id":"${P}","rows":[${deep}]}}`)
  t.equal(tooDeep.status, 422, 'nested past 512 levels')
  t.equal(((await tooDeep.json()) as any).detail[0].type, 'too_deep')
  const lone = await raw('/table/update', `{"project_id":"${P}","base_digest":"x","updates":[{"append":{"row":{"s":"\\ud800"}}}]}`)
  t.equal(lone.status, 422, 'a lone surrogate')
  t.equal(((await lone.json()) as any).detail[0].type, 'string_unicode')
  const wrongType = await post('/table/create', { table: { project_id: P, rows: 'no' } })
  t.equal(wrongType.status, 422, 'rows not a list')
  const notObject = await post('/table/update', { project_id: P, base_digest: 'x', updates: [{ append: { row: [1] } }] })
  t.equal(notObject.status, 400, 'an array row')
  t.match(notObject.text, /updates\[0\]\.append\.row: a table row must be a JSON object/)
  const tooMany = await raw('/table/create', `{"table":{"project_id":"${P}","rows":[${'{},'.repeat(100_000)}{}]}}`)
  t.equal(tooMany.status, 413, 'past the rows of one request')
  const keyed = await requestJson(s, 'POST', '/admin/keys', { user_id: 'other-user', entities: ['other'] })
  const other = { authorization: 'Basic ' + Buffer.from('api:' + keyed.json.key).toString('base64') }
  const denied = await requestJson(s, 'POST', '/table/create', { table: { project_id: P, rows: [{ secret: 1 }] } }, other)
  t.equal(denied.status, 403, 'a key of another entity')
  const own = await requestJson(s, 'POST', '/table/create', { table: { project_id: 'other/p', rows: [{ mine: 1 }] } }, other)
  t.equal(own.status, 200, 'the same key on its own entity')
  const stats = await post('/table/query_stats_batch', { project_id: P, digests: [tableDigest([rowDigest({ secret: 1 })])] })
  t.same(stats.json, { tables: [] }, 'nothing of the refused writes stored')
})

t.test('chunks created four at a time, then one table from their digests', async (t) => {
  const chunks = Array.from({ length: 8 }, (_, k) => rows(10_000 + k * 500, 500, 'chunk'))
  const made = await Promise.all(chunks.map((c) => create(c)))
  for (const [k, r] of made.entries()) t.same(r.json.row_digests, chunks[k]!.map(rowDigest), `chunk ${k}`)
  const all = made.flatMap((r) => r.json.row_digests as string[])
  const whole = await post('/table/create_from_digests', { project_id: P, row_digests: all })
  t.equal(whole.json.digest, tableDigest(all))
  const back = await post('/table/query', { project_id: P, digest: whole.json.digest, offset: 3990, limit: 20 })
  t.same(
    back.json.rows.map((r: any) => r.val),
    chunks.flat().slice(3990, 4010),
  )
})

t.test('rows outside ASCII, empty and repeated rows store as sent, through creates and updates', async (t) => {
  // Two, three and four bytes a character, escapes, an empty object; a row repeated in one request is stored once.
  // (Bodies decode as Latin-1 only when all ASCII (core/json.ts); the appender writes the project once a chunk.)
  const odd: Record<string, unknown>[] = [
    { s: 'café', n: 1 },
    { s: 'Ωμέγα 𝄞 😀', q: 'a "quoted" \\ line\nnext' },
    {},
    { s: '中文字符', arr: ['é', 'x', { k: 'ü' }] },
    { s: 'plain', n: 5 },
    { s: 'café', n: 1 },
  ]
  const made = await create(odd)
  t.equal(made.status, 200, made.text.slice(0, 200))
  t.equal(made.json.digest, tableDigest(odd.map(rowDigest)), "the digests are Weave's")
  t.same(await page(made.json.digest), odd, 'every row reads back as sent')
  // An update mixing appends, an insert and a pop: its rows are update i's bytes, pops have none.
  const updates = [
    { append: { row: { s: 'ñandú', n: 7 } } },
    { pop: { index: 0 } },
    { insert: { index: 1, row: { s: 'ÿ€' } } },
    { append: { row: { s: 'plain', n: 5 } } },
  ]
  const u = await post('/table/update', { project_id: P, base_digest: made.json.digest, updates })
  t.equal(u.status, 200, u.text.slice(0, 200))
  const after = [...odd, { s: 'ñandú', n: 7 }].slice(1)
  after.splice(1, 0, { s: 'ÿ€' })
  after.push({ s: 'plain', n: 5 })
  t.equal(u.json.digest, tableDigest(after.map(rowDigest)))
  t.same(await page(u.json.digest), after)
})

t.test("the table pool is its owner's: threads from its first write, none after close()", async (t) => {
  const pool = new TablePool({ threads: 1 })
  t.equal(pool.running, false, 'made without a thread')
  const body = Buffer.from(JSON.stringify({ table: { project_id: P, rows: [{ a: 1 }] } }))
  const r = await pool.prepare({ route: 'create', body, entities: null })
  t.same(r.route === 'create' && [r.digest, r.digests], [tableDigest([rowDigest({ a: 1 })]), [rowDigest({ a: 1 })]])
  t.equal(pool.running, true)
  await pool.close()
  t.equal(pool.running, false, 'closed: its workers ended')
  await t.rejects(pool.prepare({ route: 'create', body, entities: null }), { status: 503, message: /./ }, 'no write after close')
})

t.test('rows digested from their bytes (table-scan.ts) equal the parsed rows, whatever their spelling', async (t) => {
  // Spellings the byte scan writes itself (whitespace, escapes) beside ones it hands to JSON.parse row by row
  // (\/, non-ASCII, repeated and integer keys, numbers JavaScript or Python print otherwise): each row's digest and
  // stored value must be those of the row as JSON.parse reads it.
  const texts = [
    '{"a":1,"b":"two","c":[true,false,null],"d":{"e":-2.5}}',
    '{ "a" : 1 ,\n\t"b" : [ 1 , 2 ] , "c" : { } , "d" : [ ] }',
    '{"q":"say \\"hi\\"\\\\ now","n":"line\\nnext\\ttab\\r\\b\\f"}',
    '{"url":"http:\\/\\/x\\/y"}',
    '{"k":1,"k":2,"j":3}',
    '{"b":1,"10":2,"2":3}',
    '{"x":1.0,"y":1e5,"z":-0,"w":0.00001,"v":12345678901234567,"u":0.30000000000000004,"t":1.5E+3,"s":-1e-7}',
    '{"score":0.6180339887498949,"big":123456789012345,"neg":-42}',
    '{"é":"café","deep":{"a":[{"b":"Ωμέγα 😀"}]}}',
    '{"del":"\u007f"}',
    '{"__proto__":{"a":1},"n":null}',
  ]
  const rowsOf = texts.map((x) => JSON.parse(x) as Record<string, unknown>)
  const body = `{"table":{"project_id":"${P}","rows":[${texts.join(',')}]}}`
  const raw = (p: string, b: string) =>
    fetch(s.url + p, { method: 'POST', headers: { ...s.basic(), 'content-type': 'application/json' }, body: b })
  const inProcess = prepareTableTask({ route: 'create', body: Buffer.from(body), entities: null })
  t.ok(inProcess.ok && inProcess.route === 'create' && inProcess.packed, 'the body is scanned (rows parsed alone where they must be)')
  const made = await raw('/table/create', body)
  const got = (await made.json()) as { digest: string; row_digests: string[] }
  t.equal(made.status, 200)
  t.same(got.row_digests, rowsOf.map(rowDigest), "each row's digest is Weave's")
  t.equal(got.digest, tableDigest(rowsOf.map(rowDigest)))
  t.same(await page(got.digest), rowsOf, 'each row reads back as JSON.parse reads it')
  const updates = texts.map((x, i) => (i % 4 === 3 ? '{"pop":{"index":0}}' : `{"append":{"row":${x}}}`))
  const up = await raw('/table/update', `{"project_id":"${P}","base_digest":"${got.digest}","updates":[${updates.join(', ')}]}`)
  const after = rowsOf.slice()
  rowsOf.forEach((r, i) => (i % 4 === 3 ? after.shift() : after.push(r)))
  t.same(((await up.json()) as { digest: string }).digest, tableDigest(after.map(rowDigest)), 'the update: appends and pops in order')
})

t.test('random rows: the byte scan gives the digests and texts of the parsed rows', async (t) => {
  // Seeded, so a failure repeats. Values from the spellings above, nested; bodies with and without whitespace.
  let seed = 7
  const r = (n: number) => ((seed = (Math.imul(seed, 1103515245) + 12345) >>> 0) >>> 8) % n
  const leaves = ['x', 'a "q" \\ b', 'tab\t', 'sl/ash', 'é', '', 0, -1, 0.5, 1e-5, 2 ** 53 + 2, 0.1 + 0.2, 123.456, true, null]
  const value = (d: number): unknown =>
    d > 3 || r(3) > 0 ? leaves[r(leaves.length)] : r(2) ? Array.from({ length: r(4) }, () => value(d + 1)) : obj(d + 1)
  const obj = (d: number) => Object.fromEntries(Array.from({ length: r(5) }, () => [['k', 'key', 'é', '7', 'a b'][r(5)]! + r(3), value(d)]))
  let scanned = 0
  for (let k = 0; k < 200; k++) {
    const rows = Array.from({ length: 1 + r(8) }, () => obj(0))
    const body = Buffer.from(JSON.stringify({ table: { project_id: P, rows } }, null, r(2) ? undefined : r(3)))
    const got = prepareTableTask({ route: 'create', body, entities: null })
    if (!got.ok) return t.fail(got.message)
    if (got.route !== 'create') return t.fail(`answered as ${got.route}`)
    if (got.packed) scanned++
    const texts = got.texts ?? unpackRows(got.packed)
    if (
      JSON.stringify(got.digests) !== JSON.stringify(rows.map(rowDigest)) ||
      JSON.stringify(texts) !== JSON.stringify(rows.map((x) => JSON.stringify(x)))
    )
      return t.fail(`body ${k} differs: ${body.toString().slice(0, 300)}`)
  }
  t.equal(scanned, 200, '200 bodies, every one scanned and equal')
})
