import t, { type Test } from 'tap'
import { connect } from 'node:net'
import type { Catalog } from '../src/catalog/db.js'
import { TableStore } from '../src/catalog/tables.js'
import { CHUNK_ROWS } from '../src/catalog/table-chunks.js'
import { scanDigestList } from '../src/catalog/table-scan-digests.js'
import { postJson, startServer, type TestServer } from './helpers/server.js'
import { openCatalog } from './helpers/catalog.js'
import { rowDigest, tableDigest } from './helpers/weave-digest.js'

// No chat in this file: its server starts without the built-in model.
process.env.WEFT_MODEL ??= 'none'

// A dataset uploaded as the Python SDK does past 10 MB: every chunk created as a table of its own, then one
// /table/create_from_digests of all their row digests. Expected rows and digests come from the generated rows and
// helpers/weave-digest.ts, not from the store.

const row = (chunk: string, i: number) => ({ chunk, i, text: `${chunk} row ${i}` })
const rowsOf = (chunk: string, n: number) => Array.from({ length: n }, (_, i) => row(chunk, i))

/** Digests as a worker hands them over (table-prepare.ts): ASCII back to back, with their ends. */
function packed(digests: string[]) {
  const ends = new Int32Array(digests.length)
  let end = 0
  digests.forEach((d, i) => (ends[i] = end += d.length))
  return { text: new Uint8Array(Buffer.from(digests.join(''), 'latin1')), ends }
}

/** The status line and headers answered to a POST that declares `length` bytes and sends one (a refusal needs no more). */
function declared(s: TestServer, path: string, length: number): Promise<string> {
  const { hostname, port } = new URL(s.url)
  return new Promise<string>((resolve, reject) => {
    const sock = connect(Number(port), hostname, () => {
      const head = [`POST ${path} HTTP/1.1`, 'host: x', `authorization: ${s.basic().authorization}`, `content-length: ${length}`]
      sock.write(head.join('\r\n') + '\r\n\r\n{')
    })
    let got = ''
    sock.on('data', (d) => {
      got += d
      if (got.includes('\r\n\r\n')) {
        sock.destroy()
        resolve(got)
      }
    })
    sock.on('close', () => resolve(got))
    sock.on('error', reject)
  })
}

async function listOf(catalog: Catalog, project: string, digest: string) {
  const [r] = await catalog.all<{ c: string[]; s: bigint[] }>(
    'SELECT chunk_digests AS c, chunk_starts AS s FROM table_lists WHERE project_id = $1 AND digest = $2',
    [project, digest],
  )
  return r ? r.c.map((c, k) => ({ chunk: c, start: Number(r.s[k]) })) : null
}

/** Every row of the table, in order, and a page across each run's end, against `rows`. */
async function readsBack(t: Test, store: TableStore, project: string, digest: string, rows: ReturnType<typeof row>[]) {
  const all = await store.query(project, { digest })
  t.equal(all.length, rows.length, 'row count')
  t.ok(
    all.every((r, k) => r.original_index === k && r.digest === rowDigest(rows[k]!)),
    'every row at its place with its digest',
  )
  t.same(
    all.map((r) => r.val),
    rows,
    'every value',
  )
  for (const offset of [CHUNK_ROWS - 3, CHUNK_ROWS + 497, rows.length - 2]) {
    const page = await store.query(project, { digest, offset, limit: 5 })
    t.same(
      page.map((r) => r.val),
      rows.slice(offset, offset + 5),
      `page at ${offset}`,
    )
  }
  const [stats] = await store.stats(project, [digest], false)
  t.equal(stats?.count, rows.length, 'stats count')
}

t.test('runs that are whole chunk tables keep their chunks; other rows are chunked anew; rows read back', async (t) => {
  const catalog = await openCatalog(t)
  const store = new TableStore(catalog)
  const P = 'acme/chunks'
  const a = rowsOf('a', CHUNK_ROWS + 500)
  const b = rowsOf('b', 300)
  const c = rowsOf('c', 1000)
  const made = []
  for (const rows of [a, b, c]) made.push(await store.create(P, rows))
  // A whole, part of B (not a table of its own), C whole, A again.
  const rows = [...a, ...b.slice(100, 200), ...c, ...a]
  const digests = rows.map(rowDigest)
  const digest = tableDigest(digests)
  t.same(await store.createFromStoredDigests(P, digest, packed(digests)), { digest })
  const got = await listOf(catalog, P, digest)
  const [listA, listC] = [await listOf(catalog, P, made[0]!.digest), await listOf(catalog, P, made[2]!.digest)]
  const at = (list: typeof listA, from: number) => list!.map((x) => ({ chunk: x.chunk, start: x.start + from }))
  const bStart = a.length
  const cStart = bStart + 100
  const a2Start = cStart + c.length
  t.same(got!.slice(0, 2), at(listA, 0), "A's two chunks, as stored for A")
  t.equal(got![2]!.start, bStart, 'the part of B: one chunk of its own')
  t.notOk(
    [...listA!, ...listC!].some((x) => x.chunk === got![2]!.chunk),
    'a chunk not of A or C',
  )
  t.same(got!.slice(3, 4), at(listC, cStart), "C's chunk")
  t.same(got!.slice(4), at(listA, a2Start), "A's chunks again, from A's second place")
  await readsBack(t, store, P, digest, rows)

  // A run that starts as A does but is not A whole is chunked here; C after it is still C's chunk. A chunk is named
  // by its rows, so the first 8,192 rows, which are A's first chunk too, are that chunk.
  const prefix = [...a.slice(0, a.length - 1), ...c]
  const prefixDigest = tableDigest(prefix.map(rowDigest))
  await store.createFromStoredDigests(P, prefixDigest, packed(prefix.map(rowDigest)))
  const prefixList = await listOf(catalog, P, prefixDigest)
  t.same(
    prefixList!.map((x) => x.start),
    [0, CHUNK_ROWS, a.length - 1],
    'A but its last row in two chunks from 0, then C',
  )
  t.equal(prefixList![0]!.chunk, listA![0]!.chunk, "the first 8,192 rows: A's first chunk")
  t.not(prefixList![1]!.chunk, listA![1]!.chunk, "the next 499: not A's second chunk (500 rows)")
  t.same(prefixList!.slice(2), at(listC, a.length - 1), "C's chunk")
  await readsBack(t, store, P, prefixDigest, prefix)
})

t.test('a store that remembers no table (a restart) makes the same table from the rows', async (t) => {
  const catalog = await openCatalog(t)
  const P = 'acme/restart'
  const a = rowsOf('a', CHUNK_ROWS + 10)
  const b = rowsOf('b', 40)
  const first = new TableStore(catalog)
  await first.create(P, a)
  await first.create(P, b)
  const rows = [...b, ...a]
  const digests = rows.map(rowDigest)
  const digest = tableDigest(digests)
  const later = new TableStore(catalog)
  t.same(await later.createFromStoredDigests(P, digest, packed(digests)), { digest })
  t.same(
    (await listOf(catalog, P, digest))!.map((x) => x.start),
    [0, CHUNK_ROWS],
    'chunked from 0 as any table',
  )
  await readsBack(t, later, P, digest, rows)
})

t.test('a list made so that every digest starts a recent table costs a bounded number of hashes', async (t) => {
  const catalog = await openCatalog(t)
  const store = new TableStore(catalog)
  const P = 'acme/hostile'
  const a = rowsOf('a', 1000)
  await store.create(P, a)
  // Row 0 of A 400,000 times, then A: every position starts A but is A only at the end. Checking each by its hash
  // would hash ~400,000 x 43 KB (~17 GB, tens of seconds); the budget stops the checks after ~2x the list's bytes.
  const rows = [...Array.from({ length: 400_000 }, () => a[0]!), ...a]
  const digests = rows.map(rowDigest)
  const digest = tableDigest(digests)
  const started = performance.now()
  t.same(await store.createFromStoredDigests(P, digest, packed(digests)), { digest })
  const took = performance.now() - started
  t.ok(took < 8000, `made in ${Math.round(took)} ms`)
  const tail = await store.query(P, { digest, offset: 399_995, limit: 10 })
  t.same(
    tail.map((r) => r.val),
    rows.slice(399_995, 400_005),
    'the rows at the seam',
  )
})

t.test('a digest naming no row: 400, and no table is stored', async (t) => {
  const catalog = await openCatalog(t)
  const store = new TableStore(catalog)
  const P = 'acme/unknown'
  const a = rowsOf('a', 200)
  await store.create(P, a)
  const digests = [...a.map(rowDigest), rowDigest({ never: 'stored' }), rowDigest({ nor: 'this' })]
  const digest = tableDigest(digests)
  await t.rejects(store.createFromStoredDigests(P, digest, packed(digests)), { status: 400, message: /^2 of the row digests name no row/ })
  t.equal(await listOf(catalog, P, digest), null, 'no list stored')
})

t.test('over HTTP: a digest list past the server body bound is taken; past its own bound, 413', async (t) => {
  const s = await startServer({ env: { WEFT_MAX_BODY_BYTES: String(4 * 1024 * 1024) } })
  t.teardown(() => s.stop())
  const P = 'acme/http'
  const chunks = [rowsOf('x', 3000), rowsOf('y', 2000), rowsOf('z', 1000)]
  const made = await Promise.all(chunks.map((rows) => postJson(s, '/table/create', { table: { project_id: P, rows } })))
  t.same(
    made.map((r) => r.status),
    [200, 200, 200],
  )
  // 100,000 digests (~4.6 MB of JSON, past the 4 MiB server bound): the three chunks, again and again.
  const once = made.flatMap((r) => r.json.row_digests as string[])
  const digests = Array.from({ length: Math.ceil(100_000 / once.length) }, () => once).flat()
  const expected = tableDigest(digests)
  const body = { project_id: P, row_digests: digests, expected_digest: expected }
  t.ok(JSON.stringify(body).length > 4 * 1024 * 1024, 'the body is past the server bound')
  const r = await postJson(s, '/table/create_from_digests', body)
  t.equal(r.status, 200, r.text.slice(0, 300))
  t.equal(r.json.digest, expected)
  const all = chunks.flat()
  const page = await postJson(s, '/table/query', { project_id: P, digest: expected, offset: digests.length - 10, limit: 20 })
  t.same(
    page.json.rows.map((x: { val: unknown }) => x.val),
    Array.from({ length: 10 }, (_, k) => all[(digests.length - 10 + k) % all.length]),
    'the last rows',
  )
  const wrong = await postJson(s, '/table/create_from_digests', { ...body, expected_digest: 'f'.repeat(64) })
  t.equal(wrong.status, 409, 'expected_digest checked')
  const bad = await postJson(s, '/table/create_from_digests', { project_id: P, row_digests: [1, 2] })
  t.equal(bad.status, 422, 'digests not strings')
  const hostile = await postJson(s, '/table/create_from_digests', { project_id: P, row_digests: ["x'; DROP TABLE table_rows; --"] })
  t.equal(hostile.status, 400, 'a digest that is no digest names no row')
  // A declared length past the route's own bound (128 MiB) is refused before the body is read; other routes keep
  // the server's.
  t.match(await declared(s, '/table/create_from_digests', 129 * 1024 * 1024), /^HTTP\/1\.1 413/, 'past 128 MiB: 413')
  t.match(await declared(s, '/table/create', 5 * 1024 * 1024), /^HTTP\/1\.1 413/, '/table/create past 4 MiB: 413')
})

t.test('over HTTP: the list read from the bytes or parsed whole gives the same table', async (t) => {
  const s = await startServer()
  t.teardown(() => s.stop())
  const P = 'acme/forms'
  const rows = rowsOf('f', 50)
  const made = await postJson(s, '/table/create', { table: { project_id: P, rows } })
  const digests = made.json.row_digests as string[]
  const want = tableDigest([...digests, ...digests.slice(0, 10)])
  const list = [...digests, ...digests.slice(0, 10)].map((d) => JSON.stringify(d))
  const raw = async (body: string) => {
    const r = await fetch(s.url + '/table/create_from_digests', {
      method: 'POST',
      headers: { ...s.basic(), 'content-type': 'application/json' },
      body,
    })
    return { status: r.status, json: (await r.json()) as { digest?: string } }
  }
  const forms = {
    compact: `{"project_id":"${P}","row_digests":[${list.join(',')}]}`,
    'list first, spaces and newlines': `{ "row_digests" : [\n ${list.join(' ,\n ')} ] ,\n "project_id" : "${P}" , "expected_digest": "${want}" }`,
    'a digest with an escape (parsed whole)': `{"project_id":"${P}","row_digests":[${list.map((d, i) => (i === 3 ? d.replace(/^"./, (m) => `"\\u00${m.charCodeAt(1).toString(16)}`) : d)).join(',')}]}`,
    'the key twice (parsed whole: the last wins)': `{"project_id":"${P}","row_digests":["nothing"],"row_digests":[${list.join(',')}]}`,
  }
  for (const [name, body] of Object.entries(forms)) {
    const r = await raw(body)
    t.equal(r.status, 200, `${name}: ${JSON.stringify(r.json).slice(0, 200)}`)
    t.equal(r.json.digest, want, name)
  }
  const page = await postJson(s, '/table/query', { project_id: P, digest: want, offset: 45, limit: 10 })
  t.same(
    page.json.rows.map((x: { val: unknown }) => x.val),
    [...rows.slice(45), ...rows.slice(0, 5)],
  )
  const wrong = {
    'no list': [`{"project_id":"${P}"}`, 422],
    'a number in the list': [`{"project_id":"${P}","row_digests":[${list[0]},7]}`, 422],
    'an empty digest': [`{"project_id":"${P}","row_digests":[""]}`, 422],
    'a digest past 128 bytes': [`{"project_id":"${P}","row_digests":["${'a'.repeat(129)}"]}`, 422],
    'cut short': [`{"project_id":"${P}","row_digests":[${list[0]}`, 422],
    'another entity': [`{"project_id":"other/p","row_digests":[${list[0]}]}`, 200],
  } as const
  for (const [name, [body, status]] of Object.entries(wrong)) {
    const r = await raw(body)
    // The admin key may write any entity: there the row is unknown (400), never found in acme's rows.
    t.equal(r.status, status === 200 ? 400 : status, name)
  }
})

t.test('the scan takes plain lists from the bytes and leaves everything else to JSON.parse', async (t) => {
  const digests = Array.from({ length: 1000 }, (_, i) => rowDigest({ i }))
  const bytes = (s: string) => new Uint8Array(Buffer.from(s))
  const asStrings = (d: { text: Uint8Array; ends: Int32Array }) =>
    Array.from(d.ends, (end, i) => Buffer.from(d.text.subarray(i === 0 ? 0 : d.ends[i - 1]!, end)).toString('latin1'))
  const plain = scanDigestList(bytes(JSON.stringify({ project_id: 'a/b', row_digests: digests, expected_digest: null })))
  t.ok(plain, 'a compact body is scanned')
  t.same(asStrings(plain!.digests), digests, 'every digest, in order')
  t.same(JSON.parse(plain!.envelope), { project_id: 'a/b', row_digests: [], expected_digest: null }, 'the envelope, its list empty')
  const spaced = scanDigestList(bytes(JSON.stringify({ row_digests: digests.slice(0, 5), project_id: 'a/b' }, null, 2)))
  t.same(asStrings(spaced!.digests), digests.slice(0, 5), 'indented, list first')
  t.same(asStrings(scanDigestList(bytes('{"project_id":"a/b","row_digests":[]}'))!.digests), [], 'an empty list')
  for (const [name, body] of [
    ['an escape', '{"project_id":"a/b","row_digests":["\\u0041bc"]}'],
    ['a key twice', '{"project_id":"a/b","row_digests":[],"row_digests":["abc"]}'],
    ['a non-string', '{"project_id":"a/b","row_digests":[1]}'],
    ['a digest with a dash', '{"project_id":"a/b","row_digests":["ab-c"]}'],
    ['no list', '{"project_id":"a/b"}'],
    ['text after the body', '{"project_id":"a/b","row_digests":[]} x'],
  ] as const)
    t.equal(scanDigestList(bytes(body)), null, `${name}: parsed whole`)
})
