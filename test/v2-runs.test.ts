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

const UUID7 = /^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/

async function call(method: string, path: string, body?: unknown, headers = s.basic()) {
  const res = await fetch(s.url + path, {
    method,
    headers: { ...headers, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
    body: body === undefined ? undefined : typeof body === 'string' ? body : JSON.stringify(body),
  })
  const text = await res.text()
  let json: any
  try {
    json = JSON.parse(text)
  } catch {}
  return { status: res.status, json, text, type: res.headers.get('content-type') }
}
const post = (path: string, body: unknown, headers = s.basic()) => postJson(s, path, body, headers)

/** A JSON-lines listing, parsed. */
async function list(path: string, headers = s.basic()): Promise<any[]> {
  const r = await call('GET', path, undefined, headers)
  if (r.status !== 200) throw new Error(`${path}: ${r.status} ${r.text}`)
  return r.text
    .split('\n')
    .filter((l) => l)
    .map((l) => JSON.parse(l))
}

/** Saves a Weave object (as the SDKs do, over /obj/create) and answers its ref. */
async function objectRef(project: string, objectId: string, cls: string, extra: Record<string, unknown> = {}): Promise<string> {
  const val = { _type: cls, _class_name: cls, _bases: ['Object', 'BaseModel'], name: objectId, ...extra }
  const r = await post('/obj/create', { obj: { project_id: project, object_id: objectId, val } })
  if (r.status !== 200) throw new Error(r.text)
  return `weave:///${project}/object/${objectId}:${r.json.digest}`
}

async function callsOf(project: string, filter: Record<string, unknown> = {}): Promise<any[]> {
  const r = await post('/calls/query', { project_id: project, filter })
  if (r.status !== 200) throw new Error(r.text)
  return r.json.calls
}

/** Seconds between two of the server's ISO timestamps, from their digits (not through Date, which keeps milliseconds). */
function secondsBetween(a: string, b: string): number {
  const micros = (iso: string) => {
    const m = /^(.*T\d\d:\d\d:\d\d)(?:\.(\d+))?Z$/.exec(iso)!
    return BigInt(Date.parse(m[1]! + 'Z')) * 1000n + BigInt((m[2] ?? '').padEnd(6, '0').slice(0, 6))
  }
  return Number(micros(b) - micros(a)) / 1e6
}

const opRefOf = (project: string, name: string) => new RegExp(`^weave:///${project}/op/${name.replace('.', '\\.')}:[A-Za-z0-9]+$`)

t.test('an evaluation end to end: run, predictions, scores, finishes, calls and feedback', async (t) => {
  const P = 'acme/evals'
  const V2 = `/v2/${P}`
  const model = await objectRef(P, 'my_model', 'Model')
  const evaluation = await objectRef(P, 'my_eval', 'Evaluation')
  const exact = await objectRef(P, 'exact', 'Scorer')
  const length = await objectRef(P, 'length', 'Scorer')

  const created = await post(`${V2}/evaluation_runs`, { evaluation, model })
  t.equal(created.status, 200, created.text)
  const runId: string = created.json.evaluation_run_id
  t.match(runId, UUID7)
  const running = await call('GET', `${V2}/evaluation_runs/${runId}`)
  t.match(running.json, {
    evaluation_run_id: runId,
    evaluation,
    model,
    status: 'running',
    finished_at: null,
    source_evaluation_run_id: null,
  })
  t.type(running.json.started_at, 'string')

  const examples = [
    { inputs: { question: 'a?' }, want: 'A', output: 'A' },
    { inputs: { question: 'b?' }, want: 'B', output: 'wrong' },
  ]
  const predictionIds: string[] = []
  for (const ex of examples) {
    const p = await post(`${V2}/predictions`, { model, inputs: ex.inputs, output: ex.output, evaluation_run_id: runId })
    t.equal(p.status, 200, p.text)
    t.match(p.json.prediction_id, UUID7)
    predictionIds.push(p.json.prediction_id)
  }
  const scoreIds: string[] = []
  for (const [i, ex] of examples.entries()) {
    for (const [scorer, value] of [
      [exact, ex.output === ex.want],
      [length, ex.output.length],
    ] as const) {
      const sc = await post(`${V2}/scores`, { prediction_id: predictionIds[i], scorer, value, evaluation_run_id: runId })
      t.equal(sc.status, 200, sc.text)
      scoreIds.push(sc.json.score_id)
    }
  }

  // Read your writes: the prediction as stored, before any finish.
  const read = await call('GET', `${V2}/predictions/${predictionIds[0]}`)
  t.same(read.json, {
    prediction_id: predictionIds[0],
    model,
    inputs: examples[0]!.inputs,
    output: 'A',
    evaluation_run_id: runId,
    svc_user_id: 'admin',
  })
  for (const id of predictionIds) t.same((await post(`${V2}/predictions/${id}/finish`, undefined)).json, { success: true })

  const calls = await callsOf(P, { trace_ids: [runId] })
  const byId = new Map(calls.map((c) => [c.id, c]))
  t.equal(calls.length, 1 + 2 + 2 + 4, 'run, two predict-and-score calls, two predictions, four scores')
  const run = byId.get(runId)
  t.match(run, { trace_id: runId, parent_id: null, inputs: { self: evaluation, model }, ended_at: null })
  t.match(run.op_name, opRefOf(P, 'Evaluation.evaluate'))
  t.same(run.attributes.weave, { evaluation_run: 'true', evaluation, model })

  for (const [i, ex] of examples.entries()) {
    const pred = byId.get(predictionIds[i])
    t.match(pred.op_name, opRefOf(P, 'my_model.predict'))
    t.same(pred.attributes.weave, { prediction: 'true', model, evaluation_run_id: runId })
    t.same(pred.inputs, { self: model, inputs: ex.inputs })
    t.equal(pred.output, ex.output)
    t.equal(pred.trace_id, runId)
    const pas = byId.get(pred.parent_id)
    t.ok(pas, 'the prediction has a predict-and-score parent')
    t.match(pas.op_name, opRefOf(P, 'Evaluation.predict_and_score'))
    t.equal(pas.parent_id, runId)
    t.equal(pas.trace_id, runId)
    t.same(pas.attributes.weave, { predict_call_id: predictionIds[i] })
    t.same(pas.inputs, { self: evaluation, model, example: ex.inputs })
    t.same(pas.output, {
      output: ex.output,
      scores: { exact: ex.output === ex.want, length: ex.output.length },
      model_latency: { mean: secondsBetween(pred.started_at, pred.ended_at) },
    })
    t.type(pas.ended_at, 'string', 'the finish ended the predict-and-score call')
    const scores = calls.filter((c) => c.attributes.weave?.prediction_id === predictionIds[i])
    t.equal(scores.length, 2)
    for (const sc of scores) {
      const name = sc.attributes.weave.scorer === exact ? 'exact' : 'length'
      t.match(sc.op_name, opRefOf(P, `${name}.score`))
      t.equal(sc.parent_id, pas.id, 'a score sits beside its prediction')
      t.equal(sc.trace_id, runId)
      t.same(sc.attributes.weave, {
        score: 'true',
        prediction_id: predictionIds[i],
        scorer: name === 'exact' ? exact : length,
        evaluation_run_id: runId,
      })
      t.same(sc.inputs, { self: sc.attributes.weave.scorer, inputs: ex.inputs, output: ex.output })
      t.same(sc.output, name === 'exact' ? ex.output === ex.want : ex.output.length)
    }
  }

  // The ops the calls name are real op versions.
  const digest = run.op_name.split(':').pop()
  const op = await post('/obj/read', { project_id: P, object_id: 'Evaluation.evaluate', digest })
  t.equal(op.status, 200)
  t.equal(op.json.obj.kind, 'op')

  // Each score left runnable feedback on its prediction.
  const fb = await post('/feedback/query', {
    project_id: P,
    query: { $expr: { $eq: [{ $getField: 'feedback_type' }, { $literal: 'wandb.runnable.exact' }] } },
  })
  t.same(
    fb.json.result.map((r: any) => [r.weave_ref, r.payload, r.runnable_ref, r.wb_user_id]),
    examples.map((ex, i) => [`weave:///${P}/call/${predictionIds[i]}`, { output: ex.output === ex.want }, exact, 'admin']),
  )
  t.equal(fb.json.total_count, 2)

  const scoreLines = await list(`${V2}/scores?evaluation_run_id=${runId}`)
  t.same(
    scoreLines.map((l) => l.score_id),
    scoreIds,
    "the run's scores, oldest first",
  )
  t.same((await call('GET', `${V2}/scores/${scoreIds[1]}`)).json, {
    score_id: scoreIds[1],
    scorer: length,
    value: 1,
    evaluation_run_id: runId,
    svc_user_id: 'admin',
  })
  t.same(
    (await list(`${V2}/predictions?evaluation_run_id=${runId}`)).map((p) => [p.prediction_id, p.output]),
    examples.map((ex, i) => [predictionIds[i], ex.output]),
  )

  const fin = await post(`${V2}/evaluation_runs/${runId}/finish`, { summary: { accuracy: 0.5 } })
  t.same(fin.json, { success: true })
  const done = (await call('GET', `${V2}/evaluation_runs/${runId}`)).json
  t.equal(done.status, 'completed')
  t.type(done.finished_at, 'string')
  t.equal(done.summary.accuracy, 0.5)
  t.same(byIdAfter(await callsOf(P, { call_ids: [runId] })).output, {}, 'a finished run has output {}')
})

const byIdAfter = (calls: any[]) => calls[0]

t.test('a prediction and a score outside any run are roots of their own traces', async (t) => {
  const P = 'acme/loose'
  const V2 = `/v2/${P}`
  const scorer = await objectRef(P, 'judge', 'Scorer')
  const p = await post(`${V2}/predictions`, { model: 'not a ref', inputs: { x: 1 }, output: { y: [1, 2] } })
  t.equal(p.status, 200, p.text)
  const id = p.json.prediction_id
  const sc = await post(`${V2}/scores`, { prediction_id: id, scorer, value: null })
  t.equal(sc.status, 200, sc.text)
  t.same((await post(`${V2}/predictions/${id}/finish`, undefined)).json, { success: true })
  const calls = await callsOf(P)
  t.equal(calls.length, 2)
  const pred = calls.find((c) => c.id === id)
  t.match(pred, { trace_id: id, parent_id: null, output: { y: [1, 2] } }, 'finish leaves the output')
  t.match(pred.op_name, opRefOf(P, 'Model.predict'), 'no model name in the ref: Model')
  t.same(pred.attributes.weave, { prediction: 'true', model: 'not a ref' })
  const score = calls.find((c) => c.id === sc.json.score_id)
  t.match(score, { trace_id: sc.json.score_id, parent_id: null, output: null })
  t.same((await call('GET', `${V2}/scores/${sc.json.score_id}`)).json.value, 0, 'a score stored without a value reads 0.0')
  t.same((await call('GET', `${V2}/predictions/${id}`)).json.evaluation_run_id, null)
})

t.test('listing runs: filters (repeated parameters) and paging', async (t) => {
  const P = 'acme/lists'
  const V2 = `/v2/${P}`
  const [e1, e2, m1, m2] = await Promise.all([
    objectRef(P, 'e1', 'Evaluation'),
    objectRef(P, 'e2', 'Evaluation'),
    objectRef(P, 'm1', 'Model'),
    objectRef(P, 'm2', 'Model'),
  ])
  const pairs = [
    [e1, m1],
    [e1, m2],
    [e2, m1],
    [e2, m2],
  ]
  const ids: string[] = []
  for (const [evaluation, model] of pairs) ids.push((await post(`${V2}/evaluation_runs`, { evaluation, model })).json.evaluation_run_id)
  const q = (params: [string, string][]) => `${V2}/evaluation_runs?` + new URLSearchParams(params).toString()
  const runIds = async (params: [string, string][]) => (await list(q(params))).map((r) => r.evaluation_run_id)
  const expect = (keep: (i: number) => boolean) => ids.filter((_, i) => keep(i))
  t.same(await runIds([]), ids, 'all, oldest first')
  t.same(
    await runIds([['evaluations', e1]]),
    expect((i) => pairs[i]![0] === e1),
  )
  t.same(
    await runIds([
      ['models', m2],
      ['models', m1],
    ]),
    ids,
  )
  t.same(
    await runIds([
      ['evaluations', e2],
      ['models', m1],
    ]),
    expect((i) => pairs[i]![0] === e2 && pairs[i]![1] === m1),
  )
  t.same(
    await runIds([
      ['evaluation_run_ids', ids[3]!],
      ['evaluation_run_ids', ids[0]!],
    ]),
    [ids[0], ids[3]],
  )
  t.same(
    await runIds([
      ['limit', '2'],
      ['offset', '1'],
    ]),
    ids.slice(1, 3),
  )
  t.same(await runIds([['evaluations', 'weave:///acme/lists/object/none:x']]), [])
  const line = (await list(q([['evaluation_run_ids', ids[1]!]])))[0]
  t.same(Object.keys(line).sort(), [
    'evaluation',
    'evaluation_run_id',
    'finished_at',
    'model',
    'source_evaluation_run_id',
    'started_at',
    'status',
    'summary',
  ])
  const r = await call('GET', q([]))
  t.match(r.type, /^application\/jsonl/)
  const src = await post(`${V2}/evaluation_runs`, { evaluation: e1, model: m1, source_evaluation_run_id: ids[0] })
  t.equal((await call('GET', `${V2}/evaluation_runs/${src.json.evaluation_run_id}`)).json.source_evaluation_run_id, ids[0])

  const preds: string[] = []
  for (let i = 0; i < 5; i++)
    preds.push((await post(`${V2}/predictions`, { model: m1, inputs: { i }, output: i, evaluation_run_id: ids[0] })).json.prediction_id)
  t.same(
    (await list(`${V2}/predictions?evaluation_run_id=${ids[0]}&limit=2&offset=2`)).map((p) => p.prediction_id),
    preds.slice(2, 4),
  )
  t.same(await list(`${V2}/predictions?evaluation_run_id=${ids[1]}`), [])
})

t.test('deletes cascade to the calls under what they delete', async (t) => {
  const P = 'acme/deletes'
  const V2 = `/v2/${P}`
  const model = await objectRef(P, 'm', 'Model')
  const evaluation = await objectRef(P, 'e', 'Evaluation')
  const scorer = await objectRef(P, 'sc', 'Scorer')
  async function runWith(n: number) {
    const runId = (await post(`${V2}/evaluation_runs`, { evaluation, model })).json.evaluation_run_id
    const preds: string[] = []
    const scores: string[] = []
    for (let i = 0; i < n; i++) {
      const p = (await post(`${V2}/predictions`, { model, inputs: { i }, output: i, evaluation_run_id: runId })).json.prediction_id
      preds.push(p)
      scores.push((await post(`${V2}/scores`, { prediction_id: p, scorer, value: i, evaluation_run_id: runId })).json.score_id)
    }
    return { runId, preds, scores }
  }
  const a = await runWith(3)
  const b = await runWith(2)
  const inA = (await callsOf(P, { trace_ids: [a.runId] })).length
  t.equal(inA, 1 + 3 * 3)

  const del = await call('DELETE', `${V2}/evaluation_runs?evaluation_run_ids=${a.runId}&evaluation_run_ids=${a.runId}`)
  t.same(del.json, { num_deleted: inA }, 'the run and every call under it')
  t.same(await callsOf(P, { trace_ids: [a.runId] }), [])
  t.equal((await call('GET', `${V2}/evaluation_runs/${a.runId}`)).status, 404)
  t.equal((await call('GET', `${V2}/predictions/${a.preds[0]}`)).status, 404)
  t.equal((await call('GET', `${V2}/scores/${a.scores[0]}`)).status, 404)
  t.equal((await callsOf(P, { trace_ids: [b.runId] })).length, 1 + 2 * 3, 'the other run is untouched')

  // Ids of other kinds are not deleted by the wrong endpoint.
  t.same((await call('DELETE', `${V2}/predictions?prediction_ids=${b.runId}&prediction_ids=${b.scores[0]}`)).json, { num_deleted: 0 })
  t.same((await call('DELETE', `${V2}/scores?score_ids=${b.preds[0]}`)).json, { num_deleted: 0 })
  t.same((await call('DELETE', `${V2}/predictions?prediction_ids=${b.preds[0]}`)).json, { num_deleted: 1 })
  t.equal((await call('GET', `${V2}/predictions/${b.preds[0]}`)).status, 404)
  t.same((await call('DELETE', `${V2}/scores?score_ids=${b.scores[1]}&score_ids=no-such-id`)).json, { num_deleted: 1 })
  t.same(
    (await list(`${V2}/scores?evaluation_run_id=${b.runId}`)).map((x) => x.score_id),
    [b.scores[0]],
  )
  t.equal((await call('GET', `${V2}/evaluation_runs/${b.runId}`)).json.status, 'running')
})

t.test('unknown ids are 404 and change nothing', async (t) => {
  const P = 'acme/missing'
  const V2 = `/v2/${P}`
  const model = await objectRef(P, 'm', 'Model')
  const scorer = await objectRef(P, 'sc', 'Scorer')
  const none = '01900000-0000-7000-8000-000000000000'
  for (const path of [`evaluation_runs/${none}`, `predictions/${none}`, `scores/${none}`, `predictions/x'%20OR%201=1`]) {
    const r = await call('GET', `${V2}/${path}`)
    t.equal(r.status, 404, path)
    t.type(r.json?.reason, 'string')
  }
  t.equal((await post(`${V2}/evaluation_runs/${none}/finish`, {})).status, 404)
  t.equal((await post(`${V2}/predictions/${none}/finish`, undefined)).status, 404)
  t.equal((await post(`${V2}/predictions`, { model, inputs: {}, output: 1, evaluation_run_id: none })).status, 404)
  t.equal((await post(`${V2}/scores`, { prediction_id: none, scorer, value: 1 })).status, 404)
  const p = (await post(`${V2}/predictions`, { model, inputs: {}, output: 1 })).json.prediction_id
  t.equal((await post(`${V2}/scores`, { prediction_id: p, scorer, value: 1, evaluation_run_id: none })).status, 404)
  t.equal((await call('GET', `${V2}/evaluation_runs/${p}`)).status, 404, 'a prediction is no run')
  t.equal((await callsOf(P)).length, 1, 'only the one prediction was written')
  t.equal((await post('/feedback/query', { project_id: P })).json.total_count, 0)
})

/** A request that must be refused with `status` and leave the project's calls and feedback as they were. */
async function refused(t: Test, P: string, method: string, path: string, body: unknown, status: number) {
  const before = [await callsOf(P), (await post('/feedback/query', { project_id: P })).json.total_count]
  const r = await call(method, path, body)
  t.equal(r.status, status, `${method} ${path} ${typeof body === 'string' ? body : JSON.stringify(body)}`)
  t.ok(r.json?.detail ?? r.json?.reason, 'an error body in the trace family shape')
  t.same([await callsOf(P), (await post('/feedback/query', { project_id: P })).json.total_count], before, 'nothing changed')
  return r
}

t.test('bad bodies are 422; a scorer that is not an object ref of the project is 400', async (t) => {
  const P = 'acme/bad'
  const V2 = `/v2/${P}`
  const model = await objectRef(P, 'm', 'Model')
  const evaluation = await objectRef(P, 'e', 'Evaluation')
  const runId = (await post(`${V2}/evaluation_runs`, { evaluation, model })).json.evaluation_run_id
  const pred = (await post(`${V2}/predictions`, { model, inputs: {}, output: 'o', evaluation_run_id: runId })).json.prediction_id
  await refused(t, P, 'POST', `${V2}/evaluation_runs`, { evaluation }, 422)
  await refused(t, P, 'POST', `${V2}/evaluation_runs`, { evaluation, model, extra: 1 }, 422)
  await refused(t, P, 'POST', `${V2}/evaluation_runs`, '{"evaluation": ', 422)
  await refused(t, P, 'POST', `${V2}/predictions`, { model, inputs: [1], output: 1 }, 422)
  await refused(t, P, 'POST', `${V2}/predictions`, { model, inputs: {} }, 422)
  await refused(t, P, 'POST', `${V2}/scores`, { prediction_id: pred, scorer: 5, value: 1 }, 422)
  await refused(t, P, 'POST', `${V2}/evaluation_runs/${runId}/finish`, { summary: 'x' }, 422)
  await refused(t, P, 'DELETE', `${V2}/evaluation_runs`, undefined, 422)
  await refused(t, P, 'DELETE', `${V2}/predictions`, undefined, 422)
  await refused(t, P, 'GET', `${V2}/evaluation_runs?limit=-1`, undefined, 422)
  await refused(t, P, 'GET', `${V2}/scores?offset=x`, undefined, 422)
  const opScorer = `weave:///${P}/op/judge:abc`
  const r = await refused(t, P, 'POST', `${V2}/scores`, { prediction_id: pred, scorer: opScorer, value: 1 }, 400)
  t.match(r.json.reason, /object ref/)
  await refused(t, P, 'POST', `${V2}/scores`, { prediction_id: pred, scorer: 'judge', value: 1 }, 400)
  await refused(t, P, 'POST', `${V2}/scores`, { prediction_id: pred, scorer: 'weave:///other/p/object/judge:abc', value: 1 }, 400)
  const ids = Array.from({ length: 1001 }, (_, i) => `id${i}`)
  await refused(t, P, 'DELETE', `${V2}/scores?` + ids.map((i) => `score_ids=${i}`).join('&'), undefined, 413)
})

t.test('a key limited to one entity gets 403 on another', async (t) => {
  const made = await post('/admin/keys', { user_id: 'bob', entities: ['acme'] })
  const bob = s.basic(made.json.key)
  const model = await objectRef('other/p', 'm', 'Model')
  const evaluation = await objectRef('other/p', 'e', 'Evaluation')
  const theirs = (await post('/v2/other/p/evaluation_runs', { evaluation, model })).json.evaluation_run_id
  for (const [method, path, body] of [
    ['POST', '/v2/other/p/evaluation_runs', { evaluation, model }],
    ['GET', '/v2/other/p/evaluation_runs', undefined],
    ['GET', `/v2/other/p/evaluation_runs/${theirs}`, undefined],
    ['POST', `/v2/other/p/evaluation_runs/${theirs}/finish`, {}],
    ['DELETE', `/v2/other/p/evaluation_runs?evaluation_run_ids=${theirs}`, undefined],
    ['POST', '/v2/other/p/predictions', { model, inputs: {}, output: 1 }],
    ['GET', '/v2/other/p/scores', undefined],
    ['POST', '/v2/other/p/calls/complete', { batch: [] }],
  ] as const) {
    t.equal((await call(method, path, body, bob)).status, 403, `${method} ${path}`)
  }
  t.equal((await call('GET', `/v2/other/p/evaluation_runs/${theirs}`)).json.status, 'running', 'still there, still running')
  const mine = await post('/v2/acme/bob/predictions', { model: 'weave:///acme/bob/object/m:d', inputs: {}, output: 1 }, bob)
  t.equal(mine.status, 200)
  t.equal((await call('GET', `/v2/acme/bob/predictions/${mine.json.prediction_id}`, undefined, bob)).json.svc_user_id, 'bob')
})

t.test('calls/complete writes whole calls', async (t) => {
  const P = 'acme/complete'
  const root = '01900000-0000-7000-8000-0000000000a1'
  const child = '01900000-0000-7000-8000-0000000000a2'
  const base = { project_id: P, trace_id: root, attributes: { a: 1 }, summary: {} }
  const batch = [
    {
      ...base,
      id: root,
      op_name: 'root',
      started_at: '2026-01-01T00:00:00.000001Z',
      ended_at: '2026-01-01T00:00:02Z',
      inputs: { q: 1 },
      output: 'r',
    },
    {
      ...base,
      id: child,
      parent_id: root,
      op_name: 'child',
      started_at: '2026-01-01T00:00:01Z',
      ended_at: '2026-01-01T00:00:01.5Z',
      inputs: {},
      exception: 'boom',
      wb_user_id: 'mallory',
    },
  ]
  const r = await post(`/v2/${P}/calls/complete`, { batch })
  t.equal(r.status, 200, r.text)
  t.same(r.json, {})
  const calls = await callsOf(P)
  t.same(
    calls.map((c) => [
      c.id,
      c.parent_id,
      c.op_name,
      c.started_at,
      c.ended_at,
      c.output,
      c.exception,
      c.svc_user_id,
      c.summary.weave.status,
    ]),
    [
      [root, null, 'root', '2026-01-01T00:00:00.000001Z', '2026-01-01T00:00:02.000000Z', 'r', null, 'admin', 'success'],
      [child, root, 'child', '2026-01-01T00:00:01.000000Z', '2026-01-01T00:00:01.500000Z', null, 'boom', 'admin', 'error'],
    ],
  )
  const other = { ...batch[0], id: '01900000-0000-7000-8000-0000000000a3', project_id: 'acme/elsewhere' }
  await refused(
    t,
    P,
    'POST',
    `/v2/${P}/calls/complete`,
    { batch: [{ ...batch[0], id: '01900000-0000-7000-8000-0000000000a4' }, other] },
    400,
  )
  await refused(t, P, 'POST', `/v2/${P}/calls/complete`, { batch: [{ ...batch[0], id: 'not an id' }] }, 400)
  await refused(t, P, 'POST', `/v2/${P}/calls/complete`, { batch: [{ ...batch[0], ended_at: undefined }] }, 422)
})
