import t, { type Test } from 'tap'
import { postJson, startServer, type TestServer } from './helpers/server.js'

// No chat in this file: its servers start without the built-in model (about 1 s of CPU less per start).
process.env.WEFT_MODEL ??= 'none'

let s: TestServer
t.before(async () => {
  s = await startServer()
})
t.teardown(async () => {
  await s.stop()
})

const P = 'acme/fb'
const CALL = `weave:///${P}/call/0192aaaa-0000-7000-8000-000000000001`
const post = async (p: string, body: unknown, headers = s.basic()) => {
  const { status, json } = await postJson(s, p, body, headers)
  return { status, json }
}
const create = (body: Record<string, unknown>) => post('/feedback/create', { project_id: P, weave_ref: CALL, ...body })
const all = async () => (await post('/feedback/query', { project_id: P })).json
const byId = (id: string) => ({ $expr: { $eq: [{ $getField: 'id' }, { $literal: id }] } })

/** A request that must be refused with a reason and leave the stored feedback as it was. */
async function refused(t: Test, p: string, body: unknown, status = 400): Promise<void> {
  const before = await all()
  const r = await post(p, body)
  t.equal(r.status, status, `${p} ${JSON.stringify(body).slice(0, 120)}`)
  t.type(r.json?.reason, 'string', 'trace-family {"reason"} body')
  t.same(await all(), before, 'nothing changed')
}

t.test('a reaction with a skin tone gets alias, detoned and detoned_alias', async (t) => {
  const r = await create({ feedback_type: 'wandb.reaction.1', payload: { emoji: '👍🏽' } })
  t.equal(r.status, 200)
  t.same(r.json.payload, {
    emoji: '👍🏽',
    alias: ':thumbs_up_medium_skin_tone:',
    detoned: '👍',
    detoned_alias: ':thumbs_up:',
  })
  t.equal(r.json.wb_user_id, 'admin')
  t.match(r.json.created_at, /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/)
  const full = await post('/feedback/query', { project_id: P, query: byId(r.json.id) })
  t.same(full.json.result, [
    {
      id: r.json.id,
      project_id: P,
      weave_ref: CALL,
      wb_user_id: 'admin',
      creator: null,
      created_at: r.json.created_at,
      feedback_type: 'wandb.reaction.1',
      payload: r.json.payload,
      annotation_ref: null,
      runnable_ref: null,
      call_ref: null,
      trigger_ref: null,
    },
  ])
  const plain = await create({ feedback_type: 'wandb.reaction.1', payload: { emoji: '🎉' } })
  t.same(plain.json.payload, { emoji: '🎉', alias: ':party_popper:', detoned: '🎉', detoned_alias: ':party_popper:' })
  const q = await post('/feedback/query', { project_id: P, query: byId(r.json.id), fields: ['id', 'payload.alias', 'wb_user_id'] })
  t.same(q.json, { result: [{ id: r.json.id, 'payload.alias': ':thumbs_up_medium_skin_tone:', wb_user_id: 'admin' }], total_count: 1 })
  for (const emoji of ['👍👍', 'ok', '', 5])
    await refused(t, '/feedback/create', { project_id: P, weave_ref: CALL, feedback_type: 'wandb.reaction.1', payload: { emoji } })
})

t.test('note length is 1 to 1024 characters', async (t) => {
  t.equal((await create({ feedback_type: 'wandb.note.1', payload: { note: 'x' } })).status, 200)
  t.equal((await create({ feedback_type: 'wandb.note.1', payload: { note: 'n'.repeat(1024) } })).status, 200)
  for (const note of ['', 'n'.repeat(1025)])
    await refused(t, '/feedback/create', { project_id: P, weave_ref: CALL, feedback_type: 'wandb.note.1', payload: { note } })
})

t.test('payload over 1 MiB, refs on plain types, unknown request fields', async (t) => {
  const base = { project_id: P, weave_ref: CALL, feedback_type: 'custom' }
  await refused(t, '/feedback/create', { ...base, payload: { big: 'b'.repeat(1 << 20) } })
  await refused(t, '/feedback/create', { ...base, payload: {}, runnable_ref: `weave:///${P}/op/f:abc` })
  await refused(t, '/feedback/create', { ...base, payload: {}, annotation_ref: `weave:///${P}/object/a:abc` })
  await refused(t, '/feedback/create', { ...base, payload: {}, call_ref: CALL })
  const before = await all()
  t.equal((await post('/feedback/create', { ...base, payload: {}, nope: 1 })).status, 422)
  t.same(await all(), before)
  t.equal((await post('/feedback/create', { ...base, payload: { any: [1, { x: 2 }] } })).status, 200)
})

t.test('runnable feedback names its runnable; an op needs the call', async (t) => {
  const base = { project_id: P, weave_ref: CALL, feedback_type: 'wandb.runnable.scorer', payload: { output: 0.5 } }
  const op = `weave:///${P}/op/scorer:abc123`
  const scoreCall = `weave:///${P}/call/0192aaaa-0000-7000-8000-000000000002`
  t.equal((await post('/feedback/create', { ...base, runnable_ref: op, call_ref: scoreCall })).status, 200)
  t.equal((await post('/feedback/create', { ...base, runnable_ref: `weave:///${P}/object/scorer:def` })).status, 200)
  await refused(t, '/feedback/create', base)
  await refused(t, '/feedback/create', { ...base, runnable_ref: op })
  await refused(t, '/feedback/create', { ...base, runnable_ref: `weave:///${P}/op/other:abc123`, call_ref: scoreCall })
  const ann = { project_id: P, weave_ref: CALL, feedback_type: 'wandb.annotation.quality', payload: { value: 3 } }
  await refused(t, '/feedback/create', ann)
  t.equal((await post('/feedback/create', { ...ann, annotation_ref: `weave:///${P}/object/quality:d1` })).status, 404, 'no such spec')
  const spec = {
    _type: 'AnnotationSpec',
    _class_name: 'AnnotationSpec',
    _bases: ['Object', 'BaseModel'],
    name: 'quality',
    field_schema: { type: 'integer' },
  }
  const created = await post('/obj/create', { obj: { project_id: P, object_id: 'quality', val: spec } })
  const specRef = `weave:///${P}/object/quality:${created.json.digest}`
  t.equal((await post('/feedback/create', { ...ann, annotation_ref: specRef })).status, 200)
})

t.test('query: $expr on columns and payload paths, sort, paging, total_count', async (t) => {
  const Q = 'acme/fbq'
  const ref = `weave:///${Q}/call/c1`
  const res = await post('/feedback/batch/create', {
    batch: [3, 1, 2].map((n) => ({ project_id: Q, weave_ref: ref, feedback_type: 'score', payload: { n, tag: n === 1 ? 'a' : 'b' } })),
  })
  t.equal(res.json.res.length, 3)
  const q = (body: Record<string, unknown>) => post('/feedback/query', { project_id: Q, ...body })
  const sorted = await q({ sort_by: [{ field: 'payload.n', direction: 'desc' }], fields: ['payload'], limit: 2, offset: 0 })
  t.same(sorted.json, { result: [{ payload: { n: 3, tag: 'b' } }, { payload: { n: 2, tag: 'b' } }], total_count: 3 })
  const page = await q({ sort_by: [{ field: 'payload.n', direction: 'asc' }], fields: ['payload.n'], limit: 1, offset: 1 })
  t.same(page.json, { result: [{ 'payload.n': '2' }], total_count: 3 })
  const filtered = await q({
    query: {
      $expr: { $and: [{ $eq: [{ $getField: 'payload.tag' }, { $literal: 'b' }] }, { $gt: [{ $getField: 'payload.n' }, { $literal: 2 }] }] },
    },
    fields: ['payload.n'],
  })
  t.same(filtered.json, { result: [{ 'payload.n': '3' }], total_count: 1 })
  const inRef = await q({ query: { $expr: { $in: [{ $getField: 'weave_ref' }, [{ $literal: ref }]] } }, fields: ['weave_ref'] })
  t.equal(inRef.json.total_count, 3)
  t.equal((await q({ fields: ['payload.x"y'] })).status, 422, 'a path outside the safe pattern')
  t.equal((await q({ query: { $expr: { $eq: [{ $getField: 'nope' }, { $literal: 1 }] } } })).status, 400)
  t.equal((await q({ query: { $expr: { $eq: [{ $getField: "payload.a'b" }, { $literal: 1 }] } } })).status, 400)
})

t.test('purge only by ids; replace gives a new id and removes the old one', async (t) => {
  const a = (await create({ feedback_type: 'wandb.note.1', payload: { note: 'a' } })).json.id
  const b = (await create({ feedback_type: 'wandb.note.1', payload: { note: 'b' } })).json.id
  const c = (await create({ feedback_type: 'wandb.note.1', payload: { note: 'c' } })).json.id
  await refused(t, '/feedback/purge', {
    project_id: P,
    query: { $expr: { $eq: [{ $getField: 'feedback_type' }, { $literal: 'wandb.note.1' }] } },
  })
  await refused(t, '/feedback/purge', {
    project_id: P,
    query: { $expr: { $contains: { input: { $getField: 'id' }, substr: { $literal: a } } } },
  })
  const ids = async () => (await post('/feedback/query', { project_id: P, fields: ['id'] })).json.result.map((r: any) => r.id)
  t.equal((await post('/feedback/purge', { project_id: P, query: byId(a) })).status, 200)
  t.notOk((await ids()).includes(a))
  const or = { $expr: { $or: [byId(b).$expr] } }
  t.same((await post('/feedback/purge', { project_id: P, query: or })).json, {})
  t.notOk((await ids()).includes(b))
  const rep = await post('/feedback/replace', {
    project_id: P,
    weave_ref: CALL,
    feedback_type: 'wandb.note.1',
    payload: { note: 'c2' },
    feedback_id: c,
  })
  t.equal(rep.status, 200)
  t.not(rep.json.id, c)
  const now = await ids()
  t.ok(now.includes(rep.json.id))
  t.notOk(now.includes(c))
  const q = await post('/feedback/query', { project_id: P, query: byId(rep.json.id), fields: ['weave_ref', 'payload'] })
  t.same(q.json.result, [{ weave_ref: CALL, payload: { note: 'c2' } }])
  await refused(t, '/feedback/replace', {
    project_id: P,
    weave_ref: CALL,
    feedback_type: 'wandb.note.1',
    payload: { note: '' },
    feedback_id: rep.json.id,
  })
  const byIn = { $expr: { $in: [{ $getField: 'id' }, [{ $literal: rep.json.id }]] } }
  t.equal((await post('/feedback/purge', { project_id: P, query: byIn })).status, 200)
  t.notOk((await ids()).includes(rep.json.id))
})

t.test('a key limited to one entity gets 403 on another', async (t) => {
  const made = await post('/admin/keys', { user_id: 'bob', entities: ['acme'] })
  const bob = s.basic(made.json.key)
  const mine = await post('/feedback/create', { project_id: P, weave_ref: CALL, feedback_type: 'x', payload: {} }, bob)
  t.equal(mine.status, 200)
  t.equal(mine.json.wb_user_id, 'bob')
  const other = { project_id: 'other/p', weave_ref: 'weave:///other/p/call/x', feedback_type: 'x', payload: {} }
  t.equal((await post('/feedback/create', other, bob)).status, 403)
  t.equal((await post('/feedback/query', { project_id: 'other/p' }, bob)).status, 403)
  t.equal((await post('/feedback/purge', { project_id: 'other/p', query: byId('x') }, bob)).status, 403)
  t.equal((await post('/feedback/batch/create', { batch: [other] }, bob)).status, 403)
  t.equal((await post('/feedback/batch/create', { batch: [{ ...other, project_id: P, weave_ref: CALL }, other] }, bob)).status, 400)
})
