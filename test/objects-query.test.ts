import t from 'tap'
import { postJson, startServer, type TestServer } from './helpers/server.js'

// No chat in this file: its servers start without the built-in model (about 1 s of CPU less per start).
process.env.WEFT_MODEL ??= 'none'

// Ports the cases of Weave's object query and delete tests (10 objects × 10 versions, each filter and
// sort, limit/offset, latest_only; deletes by digest, alias and all). Expected values come from what
// the test created, never from the server's answers.

let s: TestServer
t.before(async () => {
  s = await startServer()
})
t.teardown(() => s.stop())

const post = async (path: string, body: unknown, key?: string) => {
  const { status, json } = await postJson(s, path, body, s.basic(key))
  return { status, json }
}

interface Made {
  object_id: string
  digest: string
  version_index: number
  kind: string
  base: string | null
  leaf: string | null
  order: number
  val: Record<string, unknown>
}

/** Objects 0–1 are ops, 2–5 Datasets, 6–9 Models (base Model, leaf MyModel). */
function valueOf(i: number, j: number): { val: Record<string, unknown>; kind: string; base: string | null; leaf: string | null } {
  if (i < 2) return { val: { _type: 'Op', name: `op${i}`, j }, kind: 'op', base: null, leaf: null }
  if (i < 6)
    return {
      val: { _type: 'Dataset', _class_name: 'Dataset', _bases: ['Object', 'BaseModel'], i, j },
      kind: 'object',
      base: 'Dataset',
      leaf: 'Dataset',
    }
  return {
    val: { _type: 'MyModel', _class_name: 'MyModel', _bases: ['Model', 'Object', 'BaseModel'], i, j },
    kind: 'object',
    base: 'Model',
    leaf: 'MyModel',
  }
}

const P = 'acme/query'
const made: Made[] = []
const id = (i: number) => `obj_${9 - i}` // object_id order differs from creation order

t.before(async () => {
  // Versions interleaved across objects, so creation order is neither object order nor version order.
  for (let j = 0; j < 10; j++)
    for (let i = 0; i < 10; i++) {
      const { val, kind, base, leaf } = valueOf(i, j)
      const r = await post('/obj/create', { obj: { project_id: P, object_id: id(i), val } })
      if (r.status !== 200) throw new Error(`create failed: ${JSON.stringify(r.json)}`)
      made.push({ object_id: id(i), digest: r.json.digest, version_index: j, kind, base, leaf, order: made.length, val })
    }
})

const query = (body: Record<string, unknown> = {}) => post('/objs/query', { project_id: P, ...body })
const key = (o: { object_id: string; digest: string }) => `${o.object_id}@${o.digest}`
const keys = (objs: { object_id: string; digest: string }[]) => objs.map(key)
const byCreation = (a: Made, b: Made) => a.order - b.order

t.test('no filter: every version, created_at ascending, in the spec shape', async (t) => {
  const r = await query()
  t.equal(r.status, 200)
  t.same(keys(r.json.objs), keys([...made].sort(byCreation)))
  const want = made.find((m) => m.object_id === id(7) && m.version_index === 9)!
  const got = r.json.objs.find((o: any) => key(o) === key(want))
  t.same(Object.keys(got).sort(), [
    'base_object_class',
    'created_at',
    'deleted_at',
    'digest',
    'is_latest',
    'kind',
    'leaf_object_class',
    'object_id',
    'project_id',
    'svc_user_id',
    'val',
    'version_index',
  ])
  t.match(got, { project_id: P, version_index: 9, is_latest: 1, kind: 'object', base_object_class: 'Model', leaf_object_class: 'MyModel' })
  t.same(got.val, want.val)
  t.equal(got.deleted_at, null)
  t.match(got.created_at, /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z$/)
  for (const o of r.json.objs) {
    const m = made.find((x) => key(x) === key(o))!
    t.equal(o.version_index, m.version_index)
    t.equal(o.is_latest, m.version_index === 9 ? 1 : 0)
  }
})

t.test('each filter', async (t) => {
  const sorted = [...made].sort(byCreation)
  const cases: [string, Record<string, unknown>, (m: Made) => boolean][] = [
    ['object_ids', { object_ids: [id(3), id(7)] }, (m) => m.object_id === id(3) || m.object_id === id(7)],
    ['is_op true', { is_op: true }, (m) => m.kind === 'op'],
    ['is_op false', { is_op: false }, (m) => m.kind !== 'op'],
    ['latest_only', { latest_only: true }, (m) => m.version_index === 9],
    ['base_object_classes', { base_object_classes: ['Dataset'] }, (m) => m.base === 'Dataset'],
    // NOT IN leaves out the versions with no base class too, as Weave's SQL does.
    ['exclude_base_object_classes', { exclude_base_object_classes: ['Dataset'] }, (m) => m.base !== null && m.base !== 'Dataset'],
    ['leaf_object_classes', { leaf_object_classes: ['MyModel'] }, (m) => m.leaf === 'MyModel'],
    [
      'combined',
      { latest_only: true, is_op: false, object_ids: [id(0), id(4), id(8)] },
      (m) => m.version_index === 9 && [id(4), id(8)].includes(m.object_id),
    ],
    ['unknown id', { object_ids: ['nope'] }, () => false],
  ]
  for (const [name, filter, keep] of cases) {
    const r = await query({ filter })
    t.equal(r.status, 200, name)
    t.same(keys(r.json.objs), keys(sorted.filter(keep)), name)
  }
})

t.test('sort_by, limit and offset', async (t) => {
  const cmp = {
    created_at: (a: Made, b: Made) => a.order - b.order,
    object_id: (a: Made, b: Made) => (a.object_id < b.object_id ? -1 : a.object_id > b.object_id ? 1 : 0),
  }
  const sorts: { field: 'created_at' | 'object_id'; direction: 'asc' | 'desc' }[][] = [
    [{ field: 'created_at', direction: 'desc' }],
    [{ field: 'created_at', direction: 'asc' }],
    [
      { field: 'object_id', direction: 'asc' },
      { field: 'created_at', direction: 'desc' },
    ],
    [
      { field: 'object_id', direction: 'desc' },
      { field: 'created_at', direction: 'asc' },
    ],
  ]
  for (const sort_by of sorts) {
    const want = [...made].sort((a, b) => {
      for (const s of sort_by) {
        const c = cmp[s.field](a, b) * (s.direction === 'desc' ? -1 : 1)
        if (c) return c
      }
      return 0
    })
    const r = await query({ sort_by })
    t.same(keys(r.json.objs), keys(want), JSON.stringify(sort_by))
    const page = await query({ sort_by, limit: 7, offset: 13 })
    t.same(keys(page.json.objs), keys(want.slice(13, 20)), 'limit/offset ' + JSON.stringify(sort_by))
  }
  const byId = await query({ filter: { latest_only: true }, sort_by: [{ field: 'object_id', direction: 'asc' }] })
  t.same(
    byId.json.objs.map((o: any) => o.object_id),
    Array.from({ length: 10 }, (_, i) => `obj_${i}`),
  )
  t.same((await query({ limit: 0 })).json.objs, [])
  t.same(keys((await query({ offset: 95 })).json.objs), keys([...made].sort(byCreation).slice(95)))
})

t.test('metadata_only and include_storage_size', async (t) => {
  const meta = await query({ metadata_only: true, filter: { object_ids: [id(2)] } })
  t.equal(meta.json.objs.length, 10)
  for (const o of meta.json.objs) t.same(o.val, {})
  t.notOk('size_bytes' in meta.json.objs[0], 'no size unless asked')
  const sized = await query({ include_storage_size: true, filter: { object_ids: [id(2)] } })
  for (const o of sized.json.objs) t.ok(Number.isInteger(o.size_bytes) && o.size_bytes > 0)
  const small = await post('/obj/create', { obj: { project_id: P + 'x', object_id: 'small', val: { a: 1 } } })
  const big = await post('/obj/create', { obj: { project_id: P + 'x', object_id: 'big', val: { a: 'x'.repeat(1000) } } })
  t.equal(small.status + big.status, 400)
  const both = await post('/objs/query', {
    project_id: P + 'x',
    include_storage_size: true,
    sort_by: [{ field: 'object_id', direction: 'asc' }],
  })
  t.ok(both.json.objs[0].size_bytes > both.json.objs[1].size_bytes + 900, 'big is bigger by its payload')
})

const D = 'acme/deletes'
const create = async (object_id: string, val: unknown) => {
  const r = await post('/obj/create', { obj: { project_id: D, object_id, val } })
  return r.json.digest as string
}
const versions = async (object_id: string) =>
  (await post('/objs/query', { project_id: D, filter: { object_ids: [object_id] } })).json.objs.map((o: any) => [
    o.digest,
    o.version_index,
    o.is_latest,
  ])
const del = (object_id: string, digests?: unknown) =>
  post('/obj/delete', { project_id: D, object_id, ...(digests === undefined ? {} : { digests }) })
const read = (object_id: string, digest: string) => post('/obj/read', { project_id: D, object_id, digest })

t.test('delete one version: the others keep their version_index', async (t) => {
  const d = [await create('a', { n: 0 }), await create('a', { n: 1 }), await create('a', { n: 2 })]
  const r = await del('a', [d[1]])
  t.same(r, { status: 200, json: { num_deleted: 1 } })
  t.same(await versions('a'), [
    [d[0], 0, 0],
    [d[2], 2, 1],
  ])
  const gone = await read('a', d[1]!)
  t.equal(gone.status, 404)
  t.match(gone.json, { reason: /a:v1 was deleted at/, deleted_at: /^\d{4}-/ })
  t.equal((await read('a', 'v1')).status, 404)
  t.match((await read('a', 'latest')).json.obj, { digest: d[2], version_index: 2 })
  t.same((await del('a', ['latest'])).json, { num_deleted: 1 }, 'the latest alias')
  t.match((await read('a', 'latest')).json.obj, { digest: d[0], version_index: 0, is_latest: 1 })
  t.same((await del('a', ['v0', 'v0', d[0]])).json, { num_deleted: 1 }, 'duplicates and aliases of one version count once')
  t.same(await versions('a'), [])
  t.same((await post('/objs/query', { project_id: D, filter: { object_ids: ['a'], latest_only: true } })).json.objs, [])
})

t.test('delete all, then create again', async (t) => {
  const d = [await create('b', { n: 0 }), await create('b', { n: 1 }), await create('b', { n: 2 })]
  t.same((await del('b')).json, { num_deleted: 3 })
  t.same(await versions('b'), [])
  t.equal((await read('b', 'latest')).status, 404)
  const again = await del('b')
  t.equal(again.status, 404, 'nothing left to delete')
  t.equal(await create('b', { n: 1 }), d[1], 'same content, same digest')
  t.same(await versions('b'), [[d[1], 1, 1]], 'back in its place, and latest')
  t.equal(await create('b', { n: 0 }), d[0])
  t.same(
    await versions('b'),
    [
      [d[1], 1, 0],
      [d[0], 0, 1],
    ],
    'the version brought back last is the latest',
  )
  t.match((await read('b', 'latest')).json.obj, { digest: d[0], version_index: 0 })
  const d3 = await create('b', { n: 3 })
  t.match((await read('b', 'latest')).json.obj, { digest: d3, version_index: 3 }, 'a new version counts every one ever made')
})

t.test('unknown objects and digests: 404, nothing deleted', async (t) => {
  const d0 = await create('c', { n: 0 })
  const none = await del('no-such-object')
  t.equal(none.status, 404)
  t.match(none.json.reason, /no-such-object/)
  const partly = await del('c', [d0, 'missing-1', 'missing-2'])
  t.equal(partly.status, 404)
  t.match(partly.json.reason, /contains 3 digests, but found 1 .*missing-1.*missing-2/)
  t.same(partly.json.missing_digests, ['missing-1', 'missing-2'])
  t.notMatch(partly.json.reason, new RegExp(`Diff digests:.*${d0}`))
  t.equal((await del('c', ['v7'])).status, 404, 'an alias to no version')
  t.same(await versions('c'), [[d0, 0, 1]])
})

t.test('bad input changes nothing', async (t) => {
  const d0 = await create('e', { n: 0 })
  const before = await versions('e')
  const bad: [unknown, number][] = [
    [{ project_id: D, object_id: 'e', digests: d0 }, 422],
    [{ project_id: D, object_id: 'e', digests: [1, 2] }, 422],
    [{ project_id: D, object_id: 5 }, 422],
    [{ project_id: D, object_id: 'e', digests: [d0], extra: 1 }, 422],
    [{ project_id: 'no-slash', object_id: 'e' }, 422],
    [{ project_id: D, object_id: 'e', digests: [...Array.from({ length: 100 }, (_, i) => `x${i}`), d0] }, 400],
    [{ project_id: D, object_id: 'e', digests: ["' OR 1=1; DROP TABLE objects; --"] }, 404],
    [{ project_id: D, object_id: "e' OR '1'='1" }, 404],
  ]
  for (const [body, status] of bad) {
    const r = await post('/obj/delete', body)
    t.equal(r.status, status, JSON.stringify(body).slice(0, 80))
  }
  const over = await post('/obj/delete', { project_id: D, object_id: 'e', digests: Array.from({ length: 101 }, () => d0) })
  t.match(over.json.reason, /contains 101 objects. Please delete 100 or fewer/)
  t.same(await versions('e'), before)
  const badQueries = [
    { project_id: D, limit: 'x' },
    { project_id: D, filter: { object_ids: 'e' } },
    { project_id: D, sort_by: [{ field: 'digest; DROP TABLE objects', direction: 'asc' }] },
    { project_id: D, sort_by: [{ field: 'created_at', direction: 'asc; DROP TABLE objects' }] },
    { project_id: D, filter: { is_op: 'yes' } },
  ]
  for (const body of badQueries) t.equal((await post('/objs/query', body)).status, 422, JSON.stringify(body))
  const hostile = await post('/objs/query', { project_id: D, filter: { object_ids: ["e' OR '1'='1", 'e"); --'] } })
  t.same(hostile.json.objs, [])
  t.same(await versions('e'), before)
})

t.test('entity scope on query and delete', async (t) => {
  const made = await post('/admin/keys', { user_id: 'alice', entities: ['team-a'] })
  t.equal(made.status, 200)
  const alice = made.json.key as string
  await post('/obj/create', { obj: { project_id: 'team-b/p', object_id: 'x', val: 1 } })
  t.equal((await post('/objs/query', { project_id: 'team-b/p' }, alice)).status, 403)
  t.equal((await post('/obj/delete', { project_id: 'team-b/p', object_id: 'x' }, alice)).status, 403)
  t.equal((await post('/objs/query', { project_id: 'team-b/p' })).json.objs.length, 1, 'still there')
  t.equal((await post('/obj/create', { obj: { project_id: 'team-a/p', object_id: 'y', val: 1 } }, alice)).status, 200)
  t.equal((await post('/objs/query', { project_id: 'team-a/p' }, alice)).json.objs.length, 1)
  t.same((await post('/obj/delete', { project_id: 'team-a/p', object_id: 'y' }, alice)).json, { num_deleted: 1 })
})
