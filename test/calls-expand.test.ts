import t from 'tap'
import { postJson, startServer, streamQuery, type TestServer } from './helpers/server.js'
import { hex } from './helpers/ids.js'

// No chat in this file: its servers start without the built-in model (about 1 s of CPU less per start).
process.env.WEFT_MODEL ??= 'none'

// expand_columns and include_feedback on the calls queries, against a real server.
let s: TestServer
t.before(async () => {
  s = await startServer()
})
t.teardown(() => s.stop())

const P = 'acme/expand'

const post = (path: string, body: unknown, key?: string) => postJson(s, path, body, s.basic(key))
async function ok(path: string, body: unknown): Promise<any> {
  const r = await post(path, body)
  if (r.status !== 200) throw new Error(`${path} answered ${r.status}: ${r.text.slice(0, 500)}`)
  return r.json
}
const objRef = (name: string, digest: string, project = P) => `weave:///${project}/object/${name}:${digest}`
async function publish(name: string, val: unknown, project = P): Promise<string> {
  const r = await ok('/obj/create', { obj: { project_id: project, object_id: name, val } })
  return objRef(name, r.digest, project)
}

/** A finished call with the given op, inputs and output; returns its id. */
async function call(op: string, inputs: Record<string, unknown>, output: unknown = null, project = P): Promise<string> {
  const id = hex(16)
  const at = new Date(Date.UTC(2026, 2, 1, 10, 0, 0) + Math.floor(Math.random() * 1e6)).toISOString()
  await ok('/call/start', { start: { project_id: project, id, trace_id: hex(32), op_name: op, started_at: at, attributes: {}, inputs } })
  await ok('/call/end', { end: { project_id: project, id, ended_at: at, summary: {}, output } })
  return id
}
async function query(body: Record<string, unknown>): Promise<any[]> {
  return (await ok('/calls/query', { project_id: P, ...body })).calls
}
const stream = (body: Record<string, unknown>) => streamQuery(s, { project_id: P, ...body })
const eq = (field: string, v: unknown) => ({ $eq: [{ $getField: field }, { $literal: v }] })
const num = (field: string) => ({ $convert: { input: { $getField: field }, to: 'double' } })

// The objects: workers pointing at configs pointing at nested values, and a project holding both workers.
const nested = [{ 'nested key with spaces': { one: '1' } }, { 'nested key with spaces': { one: '2' } }]
const configs = [
  { temperature: 0.5, model: 'gpt-4', max_tokens: 100 },
  { temperature: 0.8, model: 'gpt-3.5', max_tokens: 200 },
]
const workers = [
  { id: 1, status: 'active' },
  { id: 2, status: 'inactive' },
]
const W: { nestedRef: string; configRef: string; workerRef: string; id: string }[] = []
let projectRef = ''
const projectVal = { name: 'test_project', version: 'v1.0' }

// The dataset: rows in a table, each holding an object ref; predict-and-score calls take a row ref each.
const objects = [1, 3, 5, 7, 9].map((a) => ({ a, b: a + 1 }))
const rows = [
  { input: '1+2', target: 3 },
  { input: '2**4', target: 15 },
  { input: '3**3', target: 27 },
  { input: '4**2', target: 16 },
  { input: '5**1', target: 5 },
]
let rowRefs: string[] = []
let objectRefs: string[] = []
const pas: string[] = []

t.before(async () => {
  for (let i = 0; i < 2; i++) {
    const nestedRef = await publish('nested', nested[i])
    const configRef = await publish(`config${i + 1}`, { ...configs[i], nested: nestedRef })
    const workerRef = await publish(`worker${i + 1}`, { ...workers[i], config: configRef })
    W.push({ nestedRef, configRef, workerRef, id: '' })
  }
  projectRef = await publish('project', { ...projectVal, settings: { debug: true, workers: W.map((w) => w.workerRef) } })
  for (const w of W)
    w.id = await call('process_with_config', { worker_config: w.workerRef, project_info: projectRef }, { processed_worker: w.workerRef })

  objectRefs = []
  for (const o of objects) objectRefs.push(await publish('object', o))
  const table = await ok('/table/create', { table: { project_id: P, rows: rows.map((r, i) => ({ ...r, object: objectRefs[i] })) } })
  const ds = await publish('ds', { _type: 'Dataset', name: 'ds', rows: `weave:///${P}/table/${table.digest}` })
  rowRefs = table.row_digests.map((d: string) => `${ds}/attr/rows/id/${d}`)
  for (let i = 0; i < rows.length; i++) {
    pas.push(await call('predict_and_score', { example: rowRefs[i] }))
    await call('model_predict', { input: rows[i]!.input })
  }
})

t.test('refs are replaced by their values only when asked, nested paths after their parent', async (t) => {
  const [w1] = W
  const plain = await query({ filter: { call_ids: [w1!.id] } })
  t.equal(plain[0].inputs.worker_config, w1!.workerRef, 'not expanded without expand_columns')

  const cols = ['inputs.worker_config.config', 'inputs.worker_config', 'output.processed_worker']
  const [c] = await query({ filter: { call_ids: [w1!.id] }, expand_columns: cols })
  t.same(c.inputs.worker_config, {
    ...workers[0],
    _ref: w1!.workerRef,
    config: { ...configs[0], nested: w1!.nestedRef, _ref: w1!.configRef },
  })
  t.same(c.output.processed_worker, { ...workers[0], config: w1!.configRef, _ref: w1!.workerRef }, 'output paths too')
  t.equal(c.inputs.project_info, projectRef, 'a path not asked for stays a ref')

  const [quiet] = await query({ filter: { call_ids: [w1!.id] }, expand_columns: cols, return_expanded_column_values: false })
  t.equal(quiet.inputs.worker_config, w1!.workerRef, 'return_expanded_column_values: false leaves the refs')

  const [streamed] = await stream({ filter: { call_ids: [w1!.id] }, expand_columns: cols })
  t.same(streamed.inputs, c.inputs, 'the stream expands the same way')

  const rowCalls = await query({ filter: { call_ids: pas }, expand_columns: ['inputs.example', 'inputs.example.object'] })
  t.equal(rowCalls.length, rows.length)
  for (const rc of rowCalls) {
    const i = rowRefs.indexOf(rc.inputs.example._ref)
    t.ok(i >= 0, 'the row keeps its ref in _ref')
    t.same(rc.inputs.example, { ...rows[i], object: { ...objects[i], _ref: objectRefs[i] }, _ref: rowRefs[i] })
  }
})

t.test('a whole output that is a ref, and refs that stay strings', async (t) => {
  const outRef = await publish('answer', { text: 'hi' })
  const gone = await publish('gone', { x: 1 })
  await ok('/obj/delete', { project_id: P, object_id: 'gone' })
  const elsewhere = await publish('secret', { pw: 'hunter2' }, 'acme/other')
  const foreign = await publish('secret', { pw: 'x' }, 'other/p')
  const unknown = objRef('answer', 'A'.repeat(43))
  const latest = objRef('answer', 'latest')
  const tableRef = `weave:///${P}/table/${'b'.repeat(64)}`
  const callRef = `weave:///${P}/call/${hex(16)}`
  const inputs = { gone, elsewhere, foreign, unknown, latest, tableRef, callRef, text: 'weave:/// not a ref' }
  const id = await call('holder', inputs, outRef)
  const [c] = await query({ filter: { call_ids: [id] }, expand_columns: ['output', ...Object.keys(inputs).map((k) => `inputs.${k}`)] })
  t.same(c.output, { text: 'hi', _ref: outRef }, 'a top-level output ref expands')
  t.same(c.inputs, inputs, 'deleted, other-project, unknown, latest, table, call refs and plain text stay as they are')
})

t.test('filters and sorts on expanded paths', async (t) => {
  const [w1, w2] = W
  const ids = async (expr: unknown, expand_columns: string[]) =>
    (await query({ query: { $expr: expr }, expand_columns })).map((c: any) => c.id).sort()
  const both = [w1!.id, w2!.id].sort()
  t.same(await ids({ $eq: [num('inputs.worker_config.id'), { $literal: 1 }] }, ['inputs.worker_config']), [w1!.id])
  t.same(await ids({ $eq: [num('inputs.worker_config.id'), { $literal: 1 }] }, []), [], 'without expand_columns the ref is only a string')
  t.same(await ids(eq('inputs.worker_config.config.model', 'gpt-4'), ['inputs.worker_config', 'inputs.worker_config.config']), [w1!.id])
  t.same(await ids(eq('inputs.worker_config.config.model', 'gpt-4'), ['inputs.worker_config']), [], 'the inner ref is not expanded')
  t.same(await ids(eq('inputs.project_info.settings.debug', 'true'), ['inputs.project_info']), both, 'a boolean reads as true')
  t.same(await ids(eq('output.processed_worker.status', 'active'), ['output.processed_worker']), [w1!.id])
  const cols = ['inputs.worker_config', 'inputs.worker_config.config', 'inputs.worker_config.config.nested']
  const deep = 'inputs.worker_config.config.nested.nested key with spaces.one'
  t.same(await ids(eq(deep, '1'), cols), [w1!.id], 'keys with spaces, three refs deep')
  t.same(
    await ids(
      {
        $and: [
          { $eq: [num('inputs.worker_config.config.temperature'), { $literal: 0.8 }] },
          eq('inputs.project_info.name', 'test_project'),
        ],
      },
      [...cols, 'inputs.project_info'],
    ),
    [w2!.id],
  )
  t.same(await ids({ $contains: { input: { $getField: 'inputs.worker_config.config.model' }, substr: { $literal: 'gpt' } } }, cols), both)
  t.same(
    await ids({ $or: [{ $eq: [num('inputs.worker_config.id'), { $literal: 1 }] }, eq('output.processed_worker.status', 'inactive')] }, [
      'inputs.worker_config',
      'output.processed_worker',
    ]),
    both,
  )

  // A call holding the value itself, not a ref, is read as it is.
  const inline = await call('process_with_config', { worker_config: { id: 1, status: 'inline' } })
  t.same(await ids({ $eq: [num('inputs.worker_config.id'), { $literal: 1 }] }, ['inputs.worker_config']), [w1!.id, inline].sort())

  // Table rows through the dataset's ref: the calls whose row matches.
  const expectedBig = pas.filter((_, i) => rows[i]!.target > 3).sort()
  t.same(await ids(eq('inputs.example.input', '1+2'), ['inputs.example']), [pas[0]])
  t.same(await ids({ $gt: [num('inputs.example.target'), { $literal: 3 }] }, ['inputs.example']), expectedBig)
  t.same(await ids({ $eq: [num('inputs.example.object.a'), { $literal: 1 }] }, ['inputs.example', 'inputs.example.object']), [pas[0]])

  for (const direction of ['asc', 'desc'] as const) {
    const sorted = await query({
      filter: { call_ids: pas },
      sort_by: [{ field: 'inputs.example.target', direction }],
      expand_columns: ['inputs.example'],
    })
    const want = rows.map((r) => r.target).sort((a, b) => (direction === 'asc' ? a - b : b - a))
    t.same(
      sorted.map((c: any) => c.inputs.example.target),
      want,
      `sorted by the row's target, ${direction}`,
    )
    const all = await stream({
      sort_by: [{ field: deep, direction }],
      expand_columns: cols,
      query: { $expr: eq('op_name', 'process_with_config') },
    })
    t.same(
      all.slice(0, 2).map((c: any) => c.id),
      direction === 'asc' ? [w1!.id, w2!.id] : [w2!.id, w1!.id],
      `sorted three refs deep, ${direction}; calls without the value last`,
    )
    t.equal(all[2].id, inline)
  }

  const count = await ok('/calls/query_stats', {
    project_id: P,
    query: { $expr: { $gt: [num('inputs.example.target'), { $literal: 3 }] } },
    expand_columns: ['inputs.example'],
  })
  t.equal(count.count, expectedBig.length, 'query_stats counts with the expanded filter')
  const limited = await ok('/calls/query_stats', {
    project_id: P,
    filter: { call_ids: pas.slice(0, 2) },
    query: { $expr: { $gt: [num('inputs.example.target'), { $literal: 3 }] } },
    expand_columns: ['inputs.example'],
  })
  t.equal(limited.count, rows.slice(0, 2).filter((r) => r.target > 3).length, 'and with a filter')
})

t.test('include_feedback attaches each call its own rows', async (t) => {
  const [w1, w2] = W
  const ref = (id: string) => `weave:///${P}/call/${id}`
  const made: Record<string, string[]> = { [w1!.id]: [], [w2!.id]: [] }
  const give = async (id: string, feedback_type: string, payload: Record<string, unknown>) =>
    made[id]!.push((await ok('/feedback/create', { project_id: P, weave_ref: ref(id), feedback_type, payload })).id)
  await give(w1!.id, 'wandb.note.1', { note: 'first' })
  await give(w1!.id, 'wandb.reaction.1', { emoji: '👍' })
  await give(w1!.id, 'score', { value: 3 })
  await give(w2!.id, 'wandb.note.1', { note: 'other call' })
  await ok('/feedback/create', { project_id: P, weave_ref: W[0]!.workerRef, feedback_type: 'score', payload: { value: 9 } })

  const fields = ['id', 'feedback_type', 'weave_ref', 'payload', 'creator', 'created_at', 'wb_user_id']
  fields.push('runnable_ref', 'call_ref', 'trigger_ref', 'annotation_ref')
  const got = await query({ filter: { call_ids: [w1!.id, w2!.id, pas[0]] }, include_feedback: true })
  const byId = new Map(got.map((c: any) => [c.id, c.summary.weave.feedback]))
  t.same(
    byId.get(w1!.id).map((f: any) => f.id),
    made[w1!.id],
    'the rows about the call, oldest first',
  )
  t.same(
    byId.get(w1!.id).map((f: any) => f.feedback_type),
    ['wandb.note.1', 'wandb.reaction.1', 'score'],
  )
  t.same(Object.keys(byId.get(w1!.id)[0]), fields, "Weave's fields, in order")
  t.same(byId.get(w1!.id)[2].payload, { value: 3 })
  t.ok(
    byId.get(w1!.id).every((f: any) => f.weave_ref === ref(w1!.id)),
    'no other call or object feedback mixed in',
  )
  t.same(
    byId.get(w2!.id).map((f: any) => f.payload.note),
    ['other call'],
  )
  t.same(byId.get(pas[0]), [], 'a call without feedback gets an empty list')
  t.equal(got.find((c: any) => c.id === w1!.id).summary.weave.status, 'success', 'the derived summary stays')

  const streamed = await stream({ filter: { call_ids: [w1!.id, w2!.id] }, include_feedback: true, columns: ['id'] })
  t.same(
    new Map(streamed.map((c: any) => [c.id, c.summary.weave.feedback.map((f: any) => f.id)])),
    new Map([
      [w1!.id, made[w1!.id]],
      [w2!.id, made[w2!.id]],
    ]),
    'streams too, even when the columns leave the summary out',
  )
  const without = await query({ filter: { call_ids: [w1!.id] } })
  t.notOk('feedback' in without[0].summary.weave, 'nothing attached unless asked')
})

t.test('bad expand paths, bounds and entity scope', async (t) => {
  for (const bad of ['foo.bar', 'inputs..x', '', 'id', 'inputs.' + 'a.'.repeat(20) + 'b']) {
    const r = await post('/calls/query', { project_id: P, expand_columns: [bad] })
    t.equal(r.status, 400, JSON.stringify(bad))
    t.ok(r.json.reason, 'in the trace family shape')
    t.equal(
      (await post('/calls/query_stats', { project_id: P, expand_columns: [bad], query: { $expr: eq('inputs.a.b', 'x') } })).status,
      400,
    )
  }
  const many = Array.from({ length: 65 }, (_, i) => `inputs.k${i}`)
  t.ok([400, 422].includes((await post('/calls/query', { project_id: P, expand_columns: many })).status), '65 paths on /calls/query')
  t.equal((await post('/calls/query_stats', { project_id: P, expand_columns: many })).status, 400, '65 paths on query_stats')

  // More distinct refs than a filter may resolve: 400, quickly, before any is read.
  const Q = 'acme/manyrefs'
  const batch: unknown[] = []
  const at = '2026-03-01T10:00:00Z'
  for (let i = 0; i < 2001; i++) {
    const id = hex(16)
    const inputs = { x: objRef('o', `d${i}`, Q) }
    batch.push({
      mode: 'start',
      req: { start: { project_id: Q, id, trace_id: hex(32), op_name: 'o', started_at: at, attributes: {}, inputs } },
    })
  }
  t.equal((await post('/call/upsert_batch', { batch })).status, 200)
  const started = Date.now()
  const tooMany = await post('/calls/query', { project_id: Q, query: { $expr: eq('inputs.x.y', '1') }, expand_columns: ['inputs.x'] })
  t.equal(tooMany.status, 400)
  t.match(tooMany.json.reason, /2000 distinct refs/)
  t.ok(Date.now() - started < 10_000, 'answered quickly')

  const made = await ok('/admin/keys', { user_id: 'bob', entities: ['acme'] })
  const other = await post('/calls/query', { project_id: 'other/p', expand_columns: ['inputs.x'], include_feedback: true }, made.key)
  t.equal(other.status, 403, 'a key limited to one entity cannot query another')
  const mine = await post(
    '/calls/query',
    { project_id: P, filter: { call_ids: [W[0]!.id] }, expand_columns: ['inputs.worker_config'] },
    made.key,
  )
  t.equal(mine.status, 200)
  t.equal(mine.json.calls[0].inputs.worker_config.status, 'active', 'and expands refs in its own')
})
