import t from 'tap'
import { postJson, startServer, type TestServer } from './helpers/server.js'

// No chat in this file: its servers start without the built-in model (about 1 s of CPU less per start).
process.env.WEFT_MODEL ??= 'none'

let s: TestServer
t.before(async () => {
  s = await startServer()
})
t.teardown(() => s.stop())

const P = 'acme/refs'
const post = async (path: string, body: unknown, key?: string) => {
  const { status, json } = await postJson(s, path, body, s.basic(key))
  return { status, json }
}
const createObj = async (object_id: string, val: unknown, project = P): Promise<string> => {
  const r = await post('/obj/create', { obj: { project_id: project, object_id, val } })
  if (r.status !== 200) throw new Error(JSON.stringify(r.json))
  return r.json.digest
}
const createTable = async (rows: unknown[], project = P): Promise<{ digest: string; row_digests: string[] }> =>
  (await post('/table/create', { table: { project_id: project, rows } })).json
const read = (refs: string[], key?: string) => post('/refs/read_batch', { refs }, key)
const objRef = (name: string, digest: string, project = P) => `weave:///${project}/object/${name}:${digest}`

t.test('object refs and key/attr/index paths, in order', async (t) => {
  const val = {
    _type: 'Model',
    name: 'm',
    config: { 'a/b': [10, { deep: 'x' }], n: 1 },
    tags: ['one', 'two'],
  }
  const d = await createObj('model', val)
  const r = objRef('model', d)
  const res = await read([
    r,
    `${r}/attr/name`,
    `${r}/attr/config/key/n`,
    `${r}/attr/config/key/${encodeURIComponent('a/b')}/index/1/key/deep`,
    `${r}/attr/tags/index/1`,
    `${r}/attr/tags/index/5`,
    `${r}/key/missing`,
  ])
  t.equal(res.status, 200)
  t.same(res.json, { vals: [val, 'm', 1, 'x', 'two', null, null] })
  t.same((await read([])).json, { vals: [] })
})

t.test('object → table → row, by index and by id; nested object refs', async (t) => {
  const rows = [
    { q: 'first', a: 1 },
    { q: 'second', a: 2 },
  ]
  const table = await createTable(rows)
  const tableRef = `weave:///${P}/table/${table.digest}`
  const ds = await createObj('ds', { _type: 'Dataset', name: 'ds', rows: tableRef })
  const holder = await createObj('holder', { inner: objRef('ds', ds), row: `${tableRef}/id/${table.row_digests[0]}` })
  const r = objRef('ds', ds)
  const res = await read([
    `${r}/attr/rows/index/1`,
    `${r}/attr/rows/id/${table.row_digests[0]}`,
    `${r}/attr/rows/index/0/key/q`,
    `${r}/attr/rows/index/9`,
    `${r}/attr/rows/id/nosuchrow`,
    `${objRef('holder', holder)}/key/inner/attr/rows/index/1/key/a`,
    `${objRef('holder', holder)}/key/row/key/q`,
    `${r}/attr/rows`,
  ])
  t.equal(res.status, 200, JSON.stringify(res.json))
  t.same(res.json.vals, [rows[1], rows[0], 'first', null, null, 2, 'first', tableRef])
})

t.test('a nested ref into another project reads as null', async (t) => {
  const other = await createObj('secret', { pw: 'hunter2' }, 'acme/other')
  const d = await createObj('pointer', { to: objRef('secret', other, 'acme/other') })
  const res = await read([`${objRef('pointer', d)}/key/to/key/pw`])
  t.same(res.json, { vals: [null] })
})

t.test('deleted version → null; unknown digest → 404; latest and bare tables → 400', async (t) => {
  const d = await createObj('gone', { x: 1 })
  const keep = await createObj('kept', { x: 2 })
  t.equal((await post('/obj/delete', { project_id: P, object_id: 'gone' })).status, 200)
  t.same((await read([objRef('gone', d), objRef('kept', keep), `${objRef('gone', d)}/key/x`])).json, { vals: [null, { x: 2 }, null] })
  const unknown = await read([objRef('kept', 'A'.repeat(43))])
  t.equal(unknown.status, 404)
  t.match(unknown.json.reason, /not found/)
  const latest = await read([objRef('kept', 'latest')])
  t.equal(latest.status, 400)
  t.match(latest.json.reason, /latest/)
  const table = await createTable([{ a: 1 }])
  t.equal((await read([`weave:///${P}/table/${table.digest}`])).status, 400)
  for (const bad of ['not a ref', `weave-trace-internal:///x/object/a:b`, `${objRef('kept', keep)}/key`, `${objRef('kept', keep)}/index/x`])
    t.equal((await read([bad])).status, 400, bad)
})

t.test('bounds: too many refs, a 10,000-segment ref, a cycle of refs', async (t) => {
  const d = await createObj('small', { a: 1 })
  const many = await read(Array.from({ length: 1001 }, () => objRef('small', d)))
  t.equal(many.status, 400)
  t.match(many.json.reason, /1000/)
  t.equal((await read(Array.from({ length: 1000 }, () => objRef('small', d)))).json.vals.length, 1000)

  const started = Date.now()
  const long = await read([objRef('small', d) + '/key/a'.repeat(5000)])
  t.equal(long.status, 400)
  t.match(long.json.reason, /path segments/)
  t.ok(Date.now() - started < 5000, 'answered quickly')

  // Content digests cannot form a cycle, but a `v<N>` alias can point back at its own object.
  await createObj('loop', { next: `weave:///${P}/object/loop:v0/key/next` })
  const cycle = await read([`weave:///${P}/object/loop:v0/key/next/key/x`])
  t.equal(cycle.status, 400)
  t.match(cycle.json.reason, /deeper/)
})

t.test('hostile strings are data, never SQL', async (t) => {
  const res = await read([objRef("x' OR '1'='1", "d'; DROP TABLE objects; --")])
  t.equal(res.status, 404)
  const d = await createObj('small2', { a: 1 })
  t.same((await read([objRef('small2', d)])).json, { vals: [{ a: 1 }] })
})

t.test('entity scope: every ref must be readable by the key', async (t) => {
  const made = await post('/admin/keys', { user_id: 'alice', entities: ['team-a'] })
  t.equal(made.status, 200)
  const alice = made.json.key as string
  const b = await createObj('x', { v: 'b' }, 'team-b/p')
  const a = await createObj('y', { v: 'a' }, 'team-a/p')
  t.same((await read([objRef('y', a, 'team-a/p')], alice)).json, { vals: [{ v: 'a' }] })
  const denied = await read([objRef('y', a, 'team-a/p'), objRef('x', b, 'team-b/p')], alice)
  t.equal(denied.status, 403)
  t.notMatch(JSON.stringify(denied.json), /"v"/)
})
