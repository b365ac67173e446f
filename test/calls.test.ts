import t from 'tap'
import { postJson, startServer, streamQuery, type TestServer } from './helpers/server.js'
import { hex } from './helpers/ids.js'

// No chat in this file: its servers start without the built-in model (about 1 s of CPU less per start).
process.env.WEFT_MODEL ??= 'none'

let s: TestServer
t.before(async () => {
  s = await startServer()
})
t.teardown(() => s.stop())

const P = 'acme/calls'

const post = (path: string, body: unknown, headers: Record<string, string> = s.basic()) => postJson(s, path, body, headers)

const start = (id: string, extra: Record<string, unknown> = {}) => ({
  project_id: P,
  id,
  trace_id: (extra.trace_id as string) ?? hex(32),
  op_name: 'test_name',
  started_at: '2026-03-01T10:00:00.000001Z',
  attributes: {},
  inputs: {},
  ...extra,
})
const end = (id: string, extra: Record<string, unknown> = {}) => ({
  project_id: P,
  id,
  ended_at: '2026-03-01T10:00:01.500999Z',
  summary: {},
  ...extra,
})

const query = (body: Record<string, unknown>) => streamQuery(s, { project_id: P, ...body })

t.test('start, read while running, end, read: the reference example', async (t) => {
  const id = hex(16)
  const started = await post('/call/start', { start: start(id, { attributes: { a: 5 }, inputs: { b: 5 } }) })
  t.equal(started.status, 200)
  t.equal(started.json.id, id)
  const running = (await post('/call/read', { project_id: P, id })).json.call
  t.same(running.summary, { weave: { trace_name: 'test_name', status: 'running' } })
  t.equal(running.output, null)
  t.equal(running.started_at, '2026-03-01T10:00:00.000001Z', 'microseconds kept')
  t.equal((await post('/call/end', { end: end(id, { summary: { c: 5 }, output: { d: 5 } }) })).status, 200)
  const done = (await post('/call/read', { project_id: P, id })).json.call
  t.same(done.summary, { c: 5, weave: { trace_name: 'test_name', latency_ms: 1500, status: 'success' } })
  t.same(done.output, { d: 5 })
  t.same(done.attributes, { a: 5 })
  t.equal(done.svc_user_id, 'admin', 'svc_user_id comes from the API key')
  t.same((await post('/call/read', { project_id: P, id: hex(16) })).json, { call: null }, 'unknown id reads as null')
})

t.test('ids are generated when absent; bad ids are 400, not 500', async (t) => {
  const r = await post('/call/start', { start: { ...start('x'), id: undefined, trace_id: undefined } })
  t.equal(r.status, 200)
  t.match(r.json.id, /^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/, 'UUIDv7')
  for (const bad of ['ABCDEF0123456789', 'short', "x'); DROP TABLE call_parts; --"]) {
    const b = await post('/call/start', { start: start(bad) })
    t.equal(b.status, 400, bad)
    t.match(b.json, { reason: /Invalid call id/ })
  }
  const badTrace = await post('/call/start', { start: start(hex(16), { trace_id: 'nope' }) })
  t.equal(badTrace.status, 400)
  const badTime = await post('/call/start', { start: start(hex(16), { started_at: '2026-02-30T00:00:00Z' }) })
  t.equal(badTime.status, 422, 'the schema rejects an impossible date')
  const extra = await post('/call/start', { start: start(hex(16)), surprise: 1 })
  t.equal(extra.status, 422)
  t.match(extra.json.detail, [{ loc: ['body', 'surprise'], type: 'extra_forbidden' }])
  const innerExtra = await post('/call/end', { end: end(hex(16), { display_name: 'x', sdk_extra: true }) })
  t.equal(innerExtra.status, 200, 'unknown keys inside end payloads are ignored (the TS SDK sends them)')
})

t.test('parts in any order merge to the same call', async (t) => {
  const trace = hex(32)
  const a = hex(16)
  const b = hex(16)
  // b: end before start, duplicate start.
  await post('/call/end', { end: end(b, { output: 'late', exception: 'boom' }) })
  t.equal((await post('/call/read', { project_id: P, id: b })).json.call, null, 'an end alone is not a call yet')
  await post('/call/start', { start: start(b, { trace_id: trace, op_name: 'two' }) })
  await post('/call/start', { start: start(b, { trace_id: trace, op_name: 'two' }) })
  await post('/call/start', { start: start(a, { trace_id: trace, op_name: 'two' }) })
  await post('/call/end', { end: end(a, { output: 'late', exception: 'boom' }) })
  const ra = (await post('/call/read', { project_id: P, id: a })).json.call
  const rb = (await post('/call/read', { project_id: P, id: b })).json.call
  for (const k of ['op_name', 'trace_id', 'started_at', 'ended_at', 'output', 'exception', 'summary']) t.same(rb[k], ra[k], k)
  t.equal(rb.summary.weave.status, 'error')
  t.equal((await query({ filter: { call_ids: [b] } })).length, 1, 'duplicate parts are one call')
})

t.test('display name updates; empty string removes it', async (t) => {
  const id = hex(16)
  await post('/call/start', { start: start(id, { display_name: 'first' }) })
  t.equal((await post('/call/read', { project_id: P, id })).json.call.display_name, 'first')
  t.equal((await post('/call/update', { project_id: P, call_id: id, display_name: 'second' })).status, 200)
  const c = (await post('/call/read', { project_id: P, id })).json.call
  t.equal(c.display_name, 'second')
  t.equal(c.summary.weave.trace_name, 'second')
  await post('/call/update', { project_id: P, call_id: id, display_name: '' })
  t.equal((await post('/call/read', { project_id: P, id })).json.call.display_name, null)
  const none = await post('/call/update', { project_id: P, call_id: id })
  t.equal(none.status, 400)
  t.match(none.json.reason, /display_name/)
  t.equal((await post('/call/update', { project_id: P, call_id: hex(16), display_name: 'x' })).status, 404)
})

t.test('delete cascades to descendants only (reference test_calls_delete)', async (t) => {
  const trace = hex(32)
  const [call0, child1, child2, call1] = [hex(16), hex(16), hex(16), hex(16)]
  await post('/call/upsert_batch', {
    batch: [
      { mode: 'start', req: { start: start(call0, { trace_id: trace, op_name: 'del_a' }) } },
      { mode: 'start', req: { start: start(child1, { trace_id: trace, parent_id: call0, op_name: 'del_a' }) } },
      { mode: 'start', req: { start: start(child2, { trace_id: trace, parent_id: child1, op_name: 'del_a' }) } },
      { mode: 'start', req: { start: start(call1, { op_name: 'del_b' }) } },
    ],
  })
  const r = await post('/calls/delete', { project_id: P, call_ids: [child1] })
  t.same(r.json, { num_deleted: 2 })
  const left = await query({ filter: { call_ids: [call0, child1, child2, call1] } })
  t.same(left.map((c) => c.id).sort(), [call0, call1].sort())
  t.same((await post('/calls/delete', { project_id: P, call_ids: [child1] })).json, { num_deleted: 0 }, 'idempotent')
  t.equal((await post('/call/read', { project_id: P, id: child2 })).json.call, null)
  const many = await post('/calls/delete', { project_id: P, call_ids: Array.from({ length: 1001 }, () => hex(16)) })
  t.equal(many.status, 413)
})

t.test('filters, $expr, sorting, paging and columns', async (t) => {
  const project = 'acme/q' + hex(8)
  const trace = hex(32)
  const root = hex(16)
  const rows: [string, unknown][] = [
    [hex(16), 100],
    [hex(16), 2],
    [hex(16), 'b'],
    [hex(16), 'a'],
    [hex(16), null],
    [hex(16), undefined],
  ]
  const batch: unknown[] = [
    { mode: 'start', req: { start: { ...start(root, { trace_id: trace, op_name: 'weave:///acme/q/op/root:v1' }), project_id: project } } },
  ]
  rows.forEach(([id, v], i) => {
    const inputs = v === undefined ? {} : { v }
    batch.push({
      mode: 'start',
      req: {
        start: {
          ...start(id, {
            trace_id: trace,
            parent_id: root,
            op_name: i % 2 ? 'weave:///acme/q/op/leaf:v2' : 'weave:///acme/q/op/leaf:v1',
            inputs,
            thread_id: i < 3 ? 'th1' : 'th2',
          }),
          project_id: project,
          started_at: `2026-03-01T10:00:0${i}Z`,
        },
      },
    })
  })
  const up = await post('/call/upsert_batch', { batch })
  t.equal(up.status, 200)
  const q = async (body: Record<string, unknown>) => {
    const r = await post('/calls/stream_query', { project_id: project, ...body })
    t.equal(r.status, 200, r.text.slice(0, 200))
    return r.text
      .split('\n')
      .filter(Boolean)
      .map((l) => JSON.parse(l))
  }
  const value = (c: any) => c.inputs.v ?? null
  const desc = await q({ filter: { parent_ids: [root] }, sort_by: [{ field: 'inputs.v', direction: 'desc' }] })
  t.same(desc.map(value), [100, 2, 'b', 'a', null, null], 'mixed-type order, desc')
  const asc = await q({ filter: { parent_ids: [root] }, sort_by: [{ field: 'inputs.v', direction: 'asc' }] })
  t.same(asc.map(value), [2, 100, 'a', 'b', null, null], 'mixed-type order, asc')

  t.equal((await q({ filter: { trace_roots_only: true } })).length, 1)
  t.equal((await q({ filter: { op_names: ['weave:///acme/q/op/leaf:*'] } })).length, 6, 'op name prefix matches every version')
  t.equal((await q({ filter: { op_names: ['weave:///acme/q/op/leaf:v2'] } })).length, 3)
  t.equal((await q({ filter: { thread_ids: ['th2'] } })).length, 3)
  t.equal((await q({ filter: { wb_user_ids: ['admin'] } })).length, 7, 'wb_ alias accepted')
  t.equal((await q({ filter: { svc_user_ids: ['someone-else'] } })).length, 0)

  const gt = await q({ query: { $expr: { $gt: [{ $convert: { input: { $getField: 'inputs.v' }, to: 'double' } }, { $literal: 5 }] } } })
  t.same(gt.map(value), [100])
  const inq = await q({ query: { $expr: { $in: [{ $getField: 'inputs.v' }, [{ $literal: 'a' }, { $literal: 'b' }]] } } })
  t.same(inq.map(value).sort(), ['a', 'b'])
  const not = await q({ query: { $expr: { $not: [{ $eq: [{ $getField: 'thread_id' }, { $literal: 'th1' }] }] } } })
  t.equal(not.length, 4, 'th2 rows and the root (thread null)')
  const contains = await q({
    query: { $expr: { $contains: { input: { $getField: 'op_name' }, substr: { $literal: 'LEAF' }, case_insensitive: true } } },
  })
  t.equal(contains.length, 6)
  const exists = await q({ query: { $expr: { $and: [{ $convert: { input: { $getField: 'inputs.v' }, to: 'exists' } }] } } })
  t.equal(exists.length, 4, 'present and not JSON null')
  const or = await q({
    query: {
      $expr: {
        $or: [
          { $eq: [{ $getField: 'id' }, { $literal: root }] },
          { $eq: [{ $getField: 'summary.weave.status' }, { $literal: 'success' }] },
        ],
      },
    },
  })
  t.same(
    or.map((c) => c.id),
    [root],
  )
  const nullEq = await q({ query: { $expr: { $eq: [{ $getField: 'parent_id' }, { $literal: null }] } } })
  t.same(
    nullEq.map((c) => c.id),
    [root],
  )
  const since = await q({ query: { $expr: { $gte: [{ $getField: 'started_at' }, { $literal: '2026-03-01T10:00:04Z' }] } } })
  t.equal(since.length, 2)

  const page = await q({ sort_by: [{ field: 'started_at', direction: 'asc' }], limit: 2, offset: 1 })
  t.same(
    page.map((c) => c.started_at),
    ['2026-03-01T10:00:00.000001Z', '2026-03-01T10:00:01.000000Z'],
    'the root starts 1 µs after the first leaf',
  )
  const cols = await q({ columns: ['inputs.v'], limit: 1 })
  t.same(Object.keys(cols[0]).sort(), ['id', 'inputs', 'op_name', 'project_id', 'started_at', 'trace_id'])
  const count = await post('/calls/query_stats', { project_id: project, filter: { parent_ids: [root] }, limit: 4 })
  t.same(count.json, { count: 4, has_more: false })

  const all = await post('/calls/query', { project_id: project })
  t.equal(all.json.calls.length, 7, '/calls/query answers all at once')
})

t.test('query errors: 400 for bad shapes, 403 for unknown fields, nothing changes', async (t) => {
  const bad = async (query: unknown, status: number, reason: RegExp) => {
    const r = await post('/calls/query_stats', { project_id: P, query })
    t.equal(r.status, status, JSON.stringify(query))
    if (r.json?.reason) t.match(r.json.reason, reason)
  }
  await bad({ $expr: { $eq: [{ $getField: 'nope' }, { $literal: 1 }] } }, 403, /Invalid field/)
  await bad({ $expr: { $eq: [{ $getField: 'inputs.x' }, { $literal: 1 }] } }, 400, /\$convert/)
  await bad({ $expr: { $and: [] } }, 400, /Empty AND/)
  await bad({ $expr: { $eq: [{ $literal: 1 }] } }, 400, /exactly two/)
  await bad({ $expr: { $drop: [] } }, 422, /./)
  await bad({ $expr: { $eq: [{ $getField: "inputs.a'); DROP TABLE call_parts; --" }, { $literal: 'x' }] } }, 200, /./)
  let deep: unknown = { $literal: true }
  for (let i = 0; i < 100; i++) deep = { $not: [deep] }
  await bad({ $expr: deep }, 400, /deeper/)
  const sortBad = await post('/calls/stream_query', { project_id: P, sort_by: [{ field: 'nope', direction: 'asc' }] })
  t.equal(sortBad.status, 403)
  const tooMany = await post('/calls/stream_query', { project_id: P, filter: { trace_ids: Array.from({ length: 1001 }, () => hex(32)) } })
  t.equal(tooMany.status, 400)
  t.ok((await query({ limit: 1 })).length >= 1, 'the store still answers')
})

t.test('upsert_batch reports bad items in place and keeps the good ones', async (t) => {
  const good = hex(16)
  const r = await post('/call/upsert_batch', {
    batch: [
      { mode: 'start', req: { start: start(good) } },
      { mode: 'start', req: { start: { project_id: P } } },
      { mode: 'sideways', req: {} },
      { mode: 'start', req: { start: start(hex(16), { project_id: 'other-entity/p' }) } },
      { mode: 'end', req: { end: end(good) } },
    ],
  })
  t.equal(r.status, 200)
  t.same(r.json.res[0], { id: good, trace_id: r.json.res[0].trace_id })
  t.match(r.json.res[1], { status: 422, detail: [{ loc: ['body', 'batch', 1, 'req', 'start', 'op_name'], type: 'missing' }] })
  t.match(r.json.res[2], { status: 400, error: /Invalid mode/ })
  t.same(r.json.res[4], {})
  t.equal((await post('/call/read', { project_id: P, id: good })).json.call.summary.weave.status, 'success')
})

t.test('entity-limited keys', async (t) => {
  const made = await post('/admin/keys', { user_id: 'bob', entities: ['acme'] })
  const bob = s.basic(made.json.key)
  const id = hex(16)
  t.equal((await post('/call/start', { start: start(id) }, bob)).status, 200)
  t.equal((await post('/call/read', { project_id: P, id }, bob)).json.call.svc_user_id, 'bob')
  t.equal((await post('/call/start', { start: { ...start(hex(16)), project_id: 'other/p' } }, bob)).status, 403)
  const batch = await post(
    '/call/upsert_batch',
    { batch: [{ mode: 'start', req: { start: { ...start(hex(16)), project_id: 'other/p' } } }] },
    bob,
  )
  t.match(batch.json.res[0], { status: 403 })
})

t.test('empty id lists in a filter: as Weave, id lists filter nothing, thread and turn lists match nothing', async (t) => {
  const p = 'acme/empty-lists'
  const ids = [hex(16), hex(16), hex(16)]
  for (const id of ids) t.equal((await post('/call/start', { start: { ...start(id), project_id: p, thread_id: 'th' } })).status, 200)
  const q = (filter: Record<string, unknown>) => streamQuery(s, { project_id: p, filter })
  for (const key of ['call_ids', 'trace_ids', 'parent_ids', 'svc_user_ids', 'wb_run_ids', 'input_refs', 'output_refs'])
    t.equal((await q({ [key]: [] })).length, 3, `${key}: [] filters nothing`)
  for (const key of ['thread_ids', 'turn_ids']) t.equal((await q({ [key]: [] })).length, 0, `${key}: [] matches nothing`)
  const stats = await post('/calls/query_stats', { project_id: p, filter: { call_ids: [] } })
  t.same([stats.status, stats.json.count], [200, 3], 'query_stats too')
})
