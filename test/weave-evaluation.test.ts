import { createHash } from 'node:crypto'
import t, { type Test } from 'tap'
import { postJson, startServer, type TestServer } from './helpers/server.js'
import { pointWeaveAt } from './helpers/weave.js'

// No chat in this file: its servers start without the built-in model (about 1 s of CPU less per start).
process.env.WEFT_MODEL ??= 'none'

// A Weave evaluation run end to end with the real `weave` npm SDK against a real weft, then read back over HTTP.
let s: TestServer
t.before(async () => {
  s = await startServer()
  pointWeaveAt(s)
})
t.teardown(() => s.stop())

const P = 'acme/evals'

async function post(path: string, body: unknown) {
  const r = await postJson(s, path, body)
  if (r.status !== 200) throw new Error(`${path} answered ${r.status}: ${r.text.slice(0, 500)}`)
  return r.json
}

async function calls(filter: Record<string, unknown> = {}): Promise<any[]> {
  const { calls } = await post('/calls/query', {
    project_id: P,
    filter,
    sort_by: [{ field: 'started_at', direction: 'asc' }],
  })
  return calls
}

const opName = (c: any) => /\/op\/([^:]+):/.exec(c.op_name)?.[1]
const refOf = (kind: string, name: string, digest: string) => `weave:///${P}/${kind}/${name}:${digest}`

/** The SDK's own summary rule, restated: booleans → true_count/true_fraction, numbers → mean, over every row. */
function summarize(values: unknown[]): Record<string, number> {
  const present = values.filter((v) => v != null)
  if (present.length === 0) return {}
  if (present.every((v) => typeof v === 'boolean')) {
    const n = present.filter(Boolean).length
    return { true_count: n, true_fraction: n / values.length }
  }
  if (present.every((v) => typeof v === 'number')) return { mean: (present as number[]).reduce((a, b) => a + b, 0) / values.length }
  return {}
}

// The dataset: sums to compute; the model adds `a + b` but is off by `skew` where a row has one.
const rows = [
  { id: 'r1', a: 2, b: 3, expected: 5 },
  { id: 'r2', a: 10, b: -4, expected: 6, skew: 2 },
  { id: 'r3', a: 0.5, b: 0.25, expected: 0.75 },
  { id: 'r4', a: 7, b: 8, expected: 15, skew: -1 },
]
const predict = (r: (typeof rows)[number]) => r.a + r.b + (r.skew ?? 0)
const exact = (r: (typeof rows)[number]) => predict(r) === r.expected
const absError = (r: (typeof rows)[number]) => Math.abs(predict(r) - r.expected)

type Row = (typeof rows)[number]
interface Grouped {
  root: any
  pas: any[]
  byParent: Map<string, any[]>
}

/** The evaluation's calls under one root: the predict-and-score calls and each one's children. */
function group(all: any[], root: any): Grouped {
  const inTrace = all.filter((c) => c.trace_id === root.trace_id)
  const pas = inTrace.filter((c) => c.parent_id === root.id && /predict_?and_?score/i.test(opName(c) ?? ''))
  const byParent = new Map<string, any[]>()
  for (const c of inTrace) if (c.parent_id) byParent.set(c.parent_id, [...(byParent.get(c.parent_id) ?? []), c])
  return { root, pas, byParent }
}

/** An op called with one object argument records it as `arg0`; one bound with `useParam0Object` spreads it. */
const argsOf = (c: any) => (c ? (c.inputs.arg0 ?? c.inputs) : undefined)

async function readRefs(refs: string[]): Promise<any[]> {
  return (await post('/refs/read_batch', { refs })).vals
}

/** Checks every predict-and-score call against the row its `example` ref resolves to; answers the rows in call order. */
async function checkPredictions(t: Test, g: Grouped, dsRef: string, modelOp: RegExp): Promise<Row[]> {
  t.equal(g.pas.length, rows.length, 'one predict-and-score call per row')
  const examples = g.pas.map((c) => c.inputs.example as string)
  for (const e of examples) t.match(e, new RegExp(`^${dsRef}/attr/rows/id/[A-Za-z0-9]{43}$`), 'inputs.example is a dataset row ref')
  const resolved: Row[] = await readRefs(examples)
  t.same(
    [...resolved].sort((x, y) => x.id.localeCompare(y.id)),
    rows,
    'the row refs resolve to the dataset rows',
  )
  for (const [i, c] of g.pas.entries()) {
    const row = resolved[i]!
    t.equal(c.trace_id, g.root.trace_id)
    t.match(c.output, { model_success: true, model_output: predict(row), scores: { exactMatch: exact(row), absoluteError: absError(row) } })
    t.type(c.output.model_latency, 'number')
    const kids = g.byParent.get(c.id) ?? []
    t.equal(kids.length, 3, 'the model call and two scorer calls')
    const model = kids.find((k) => modelOp.test(k.op_name))
    t.ok(model, 'the model call')
    t.equal(model?.output, predict(row))
    t.equal(argsOf(model)?.datasetRow, examples[i], "the model's input is the same row ref")
    const ex = kids.find((k) => opName(k) === 'exactMatch')
    const ae = kids.find((k) => opName(k) === 'absoluteError')
    t.match(ex, { output: exact(row), trace_id: g.root.trace_id })
    t.match(ae, { output: absError(row), trace_id: g.root.trace_id })
    for (const scorer of [ex, ae]) t.same(argsOf(scorer), { datasetRow: examples[i], modelOutput: predict(row) }, 'scorer inputs')
  }
  return resolved
}

function scorerOps(weave: typeof import('weave')) {
  const exactMatch = weave.op(function exactMatch({ modelOutput, datasetRow }: { modelOutput: number; datasetRow: any }) {
    return modelOutput === datasetRow.expected
  })
  const absoluteError = weave.op(function absoluteError({ modelOutput, datasetRow }: { modelOutput: number; datasetRow: any }) {
    return Math.abs(modelOutput - datasetRow.expected)
  })
  return [exactMatch, absoluteError]
}

/** The summary Evaluation.evaluate answers, computed from the rows and the scorer functions. */
function checkSummary(t: Test, result: Record<string, any>): void {
  t.same(result.exactMatch, summarize(rows.map(exact)))
  t.same(result.absoluteError, summarize(rows.map(absError)))
  t.same(result.model_success, { true_count: rows.length, true_fraction: 1 })
  t.same(result.model_output, summarize(rows.map(predict)))
  t.type(result.model_latency?.mean, 'number')
}

let datasetDigest = ''

t.test('Evaluation.evaluate with an op model and op scorers, read back over HTTP', async (t) => {
  const weave = await import('weave')
  const client = await weave.init(P)
  const dataset = new weave.Dataset({ name: 'sums', rows: rows.map((r) => ({ ...r })) })
  const saved = await dataset.save()
  datasetDigest = saved.digest
  const dsRef = refOf('object', 'sums', saved.digest)
  const model = weave.op(async function adder({ datasetRow }: { datasetRow: any }) {
    return datasetRow.a + datasetRow.b + (datasetRow.skew ?? 0)
  })
  const evaluation = new weave.Evaluation({ name: 'sum-eval', dataset, scorers: scorerOps(weave) })
  const result = await evaluation.evaluate({ model, maxConcurrency: 2 })
  await client.waitForBatchProcessing()
  checkSummary(t, result)

  const all = await calls()
  t.equal(all.length, 1 + rows.length * 4, 'evaluate + per row: predict-and-score, model, two scorers')
  const roots = all.filter((c) => opName(c) === 'Evaluation.evaluate')
  t.equal(roots.length, 1)
  const root = roots[0]
  t.match(root, { parent_id: null, display_name: 'sum-eval_adder', exception: null })
  t.same(root.output, result, 'the root output is the summary the SDK computed')
  t.equal(root.summary.weave.status, 'success')
  t.equal(root.summary.weave.trace_name, 'sum-eval_adder')
  t.ok(
    all.every((c) => c.trace_id === root.trace_id && c.ended_at && c.exception === null),
    'one trace, every call ended',
  )
  const g = group(all, root)
  await checkPredictions(t, g, dsRef, /\/op\/adder:/)

  // The evaluation object: its dataset and scorers are refs, the same ones the calls carry.
  const evalRef = root.inputs.self as string
  const [, evalDigest] = /\/object\/sum-eval:([A-Za-z0-9]+)$/.exec(evalRef) ?? []
  t.ok(evalDigest, 'inputs.self is the evaluation object ref')
  t.equal(root.inputs.model, g.byParent.get(g.pas[0].id)!.find((k) => opName(k) === 'adder')!.op_name, 'inputs.model is the model op ref')
  const { obj: evalObj } = await post('/obj/read', { project_id: P, object_id: 'sum-eval', digest: evalDigest })
  t.match(evalObj, { object_id: 'sum-eval', kind: 'object', base_object_class: 'Evaluation', leaf_object_class: 'Evaluation' })
  t.match(evalObj.val, {
    _type: 'Evaluation',
    _class_name: 'Evaluation',
    _bases: ['Object', 'BaseModel'],
    name: 'sum-eval',
    dataset: dsRef,
  })
  const scorerRefs = new Set(all.filter((c) => ['exactMatch', 'absoluteError'].includes(opName(c)!)).map((c) => c.op_name))
  t.same(new Set(evalObj.val.scorers), scorerRefs, "the evaluation's scorers are the scorer calls' ops")
  for (const c of g.pas) t.equal(c.inputs.self, evalRef)

  const { obj: dsObj } = await post('/obj/read', { project_id: P, object_id: 'sums', digest: saved.digest })
  t.match(dsObj, { base_object_class: 'Dataset', version_index: 0, is_latest: 1 })
  t.match(dsObj.val, { _type: 'Dataset', _class_name: 'Dataset', _bases: ['Object', 'BaseModel'], name: 'sums' })
  const tableDigest = /^weave:\/\/\/acme\/evals\/table\/([A-Za-z0-9]+)$/.exec(dsObj.val.rows)?.[1]
  t.ok(tableDigest, 'the dataset holds a table ref')
  const table = await post('/table/query', { project_id: P, digest: tableDigest })
  t.same(
    table.rows.map((r: any) => r.val),
    rows,
    'the table holds the rows in order',
  )
  const rowRefs = table.rows.map((r: any) => `${dsRef}/attr/rows/id/${r.digest}`)
  t.same(new Set(g.pas.map((c) => c.inputs.example)), new Set(rowRefs), "the calls' row refs are the table's row digests")

  const byClass = async (cls: string) =>
    (await post('/objs/query', { project_id: P, filter: { base_object_classes: [cls], latest_only: true } })).objs
  t.same(
    (await byClass('Dataset')).map((o: any) => o.object_id),
    ['sums'],
  )
  t.same(
    (await byClass('Evaluation')).map((o: any) => o.object_id),
    ['sum-eval'],
  )
  const ops = (await post('/objs/query', { project_id: P, filter: { is_op: true } })).objs.map((o: any) => o.object_id)
  t.same(new Set(ops), new Set(['adder', 'exactMatch', 'absoluteError', 'Evaluation.evaluate', 'Evaluation.predictAndScore']))

  // A ref walking from the evaluation through its dataset into the table by position.
  const [first, viaEval] = await readRefs([`${evalRef}/attr/dataset/attr/rows/index/0`, `${evalRef}/attr/name`])
  t.same(first, rows[0], 'evaluation → dataset → rows → index 0')
  t.equal(viaEval, 'sum-eval')

  // The calls that took one row as input, found by its ref; and the row expanded in place.
  const oneRow = g.pas[0].inputs.example
  const byRef = await post('/calls/query', { project_id: P, filter: { input_refs: [oneRow] } })
  t.same(
    byRef.calls.map((c: any) => opName(c)).sort(),
    ['Evaluation.predictAndScore', 'absoluteError', 'adder', 'exactMatch'],
    'input_refs finds the predict-and-score call, the model call and the scorer calls of that row',
  )
  const expanded = await post('/calls/query', { project_id: P, filter: { call_ids: [g.pas[0].id] }, expand_columns: ['inputs.example'] })
  const [exampleVal] = await readRefs([oneRow])
  t.match(expanded.calls[0].inputs.example, exampleVal, 'expand_columns resolves the row ref')

  // The SDK reads its own dataset back through the same refs.
  const again = await client.get(saved)
  const reloaded: any[] = []
  for await (const r of again) reloaded.push({ ...r, __savedRef: undefined })
  t.same(
    reloaded.map(({ __savedRef, ...r }) => r),
    rows,
  )
})

t.test('Evaluation.evaluate with a model object (a WeaveObject with an invoke op)', async (t) => {
  const weave = await import('weave')
  const client = await weave.init(P)
  class SumModel extends weave.WeaveObject {
    id = 'sum-model'
    skewed: boolean
    constructor(skewed: boolean) {
      super({ name: 'sum-model' })
      this.skewed = skewed
      this.invoke = weave.op(this, this.invoke, { parameterNames: 'useParam0Object' })
    }
    async invoke({ datasetRow }: { datasetRow: any }) {
      return datasetRow.a + datasetRow.b + (this.skewed ? (datasetRow.skew ?? 0) : 0)
    }
  }
  const dataset = new weave.Dataset({ name: 'sums', rows: rows.map((r) => ({ ...r })) })
  const saved = await dataset.save()
  t.equal(saved.digest, datasetDigest, 'the same rows save to the same dataset digest')
  const evaluation = new weave.Evaluation({ name: 'sum-eval-obj', dataset, scorers: scorerOps(weave) })
  const result = await evaluation.evaluate({ model: new SumModel(true) as any })
  await client.waitForBatchProcessing()
  checkSummary(t, result)

  const root = (await calls()).find((c) => opName(c) === 'Evaluation.evaluate' && c.display_name === 'sum-eval-obj_sum-model')
  t.ok(root, 'the root is named after the evaluation and the model id')
  t.same(root.output, result)
  const [, modelDigest] = /^weave:\/\/\/acme\/evals\/object\/sum-model:([A-Za-z0-9]+)$/.exec(root.inputs.model) ?? []
  t.ok(modelDigest, 'inputs.model is the model object ref')
  const [modelVal] = await readRefs([root.inputs.model])
  t.match(modelVal, { _class_name: 'SumModel', id: 'sum-model', skewed: true })
  t.match(modelVal.invoke, /^weave:\/\/\/acme\/evals\/op\/SumModel\.invoke:|\/op\/[^:]*invoke:/, 'the invoke op is saved as a ref')
  const all = await calls({ trace_ids: [root.trace_id] })
  const g = group(all, root)
  await checkPredictions(t, g, refOf('object', 'sums', saved.digest), /invoke:/)
  const invokes = all.filter((c) => /invoke:/.test(c.op_name))
  t.ok(
    invokes.every((c) => c.inputs.self === root.inputs.model),
    "the model calls' self is the model object",
  )
})

t.test('EvaluationLogger: predictions, scores as runnable feedback, summary', async (t) => {
  const weave = await import('weave')
  const client = await weave.init(P)
  const ev = new weave.EvaluationLogger({ name: 'logged-eval', model: { name: 'hand-model' }, scorers: ['correct', 'closeness'] })
  const closeness = (r: Row) => 1 / (1 + absError(r))
  for (const r of rows) {
    const sl = ev.logPrediction({ a: r.a, b: r.b }, predict(r))
    await sl.logScore('correct', exact(r))
    await sl.logScore('closeness', closeness(r))
    await sl.finish()
  }
  await ev.logSummary()
  await client.waitForBatchProcessing()

  const all = await calls()
  const root = all.find((c) => opName(c) === 'Evaluation.evaluate' && c.attributes._weave_eval_meta?.imperative)
  t.ok(root, 'the logged evaluation root')
  const expectedSummary = { correct: summarize(rows.map(exact)), closeness: summarize(rows.map(closeness)) }
  t.same(root.output, expectedSummary, "the root's output is the auto summary")
  const inTrace = all.filter((c) => c.trace_id === root.trace_id)
  const pas = inTrace.filter((c) => opName(c) === 'Evaluation.predict_and_score')
  const predicts = inTrace.filter((c) => opName(c) === 'Model.predict')
  t.equal(pas.length, rows.length)
  t.equal(predicts.length, rows.length)
  t.equal(inTrace.filter((c) => opName(c) === 'Evaluation.summarize').length, 1)
  const scoreCalls = inTrace.filter((c) => /^(correct|closeness)\.score$/.test(opName(c) ?? ''))
  t.equal(scoreCalls.length, rows.length * 2)
  for (const c of pas) {
    t.equal(c.parent_id, root.id)
    const row = rows.find((r) => r.a === c.inputs.example.a && r.b === c.inputs.example.b)!
    t.same(c.output, { output: predict(row), scores: { correct: exact(row), closeness: closeness(row) } })
  }

  // Each score is runnable feedback on the prediction call, naming the scorer object and its score call.
  const fb = await post('/feedback/query', {
    project_id: P,
    query: {
      $expr: { $in: [{ $getField: 'feedback_type' }, [{ $literal: 'wandb.runnable.correct' }, { $literal: 'wandb.runnable.closeness' }]] },
    },
  })
  t.equal(fb.total_count, rows.length * 2)
  const predictRefs = new Map(predicts.map((c) => [`weave:///${P}/call/${c.id}`, c]))
  for (const f of fb.result) {
    const name = f.feedback_type.slice('wandb.runnable.'.length)
    const predictCall = predictRefs.get(f.weave_ref)
    t.ok(predictCall, 'weave_ref is a Model.predict call')
    const row = rows.find((r) => r.a === argsOf(predictCall).a && r.b === argsOf(predictCall).b)!
    t.same(f.payload, { output: name === 'correct' ? exact(row) : closeness(row) })
    t.match(f.runnable_ref, new RegExp(`^weave:///${P}/object/${name}:[A-Za-z0-9]{43}$`))
    const scoreCall = scoreCalls.find((c) => f.call_ref === `weave:///${P}/call/${c.id}`)
    t.ok(scoreCall, 'call_ref is the score call')
    t.equal(scoreCall?.output, f.payload.output)
    t.equal(scoreCall?.parent_id, predictCall.parent_id, 'the score call sits under the same predict_and_score')
  }
  const [scorer] = await readRefs([fb.result[0].runnable_ref])
  t.match(scorer, { _class_name: fb.result[0].feedback_type.slice('wandb.runnable.'.length) })

  // An annotation on one prediction, validated against its spec, read back with the runnable feedback.
  const spec = await post('/obj/create', {
    obj: {
      project_id: P,
      object_id: 'verdict',
      val: {
        _type: 'AnnotationSpec',
        _class_name: 'AnnotationSpec',
        _bases: ['BaseObject', 'BaseModel'],
        name: 'verdict',
        field_schema: { type: 'string', enum: ['right', 'wrong'] },
      },
    },
  })
  const target = `weave:///${P}/call/${predicts[0].id}`
  const annotation = {
    project_id: P,
    weave_ref: target,
    feedback_type: 'wandb.annotation.verdict',
    annotation_ref: refOf('object', 'verdict', spec.digest),
  }
  t.equal((await postJson(s, '/feedback/create', { ...annotation, payload: { value: 'right' } })).status, 200)
  t.equal((await postJson(s, '/feedback/create', { ...annotation, payload: { value: 'maybe' } })).status, 400, 'a value outside the enum')
  const onTarget = await post('/feedback/query', {
    project_id: P,
    query: { $expr: { $eq: [{ $getField: 'weave_ref' }, { $literal: target }] } },
    fields: ['feedback_type', 'payload'],
    sort_by: [{ field: 'feedback_type', direction: 'asc' }],
  })
  t.same(
    onTarget.result.map((f: any) => f.feedback_type),
    ['wandb.annotation.verdict', 'wandb.runnable.closeness', 'wandb.runnable.correct'],
  )

  // The same feedback, attached to the call by a calls query with include_feedback.
  const withFeedback = await post('/calls/query', { project_id: P, filter: { call_ids: [predicts[0].id] }, include_feedback: true })
  t.same(
    (withFeedback.calls[0]?.summary?.weave?.feedback ?? []).map((f: any) => f.feedback_type).sort(),
    ['wandb.annotation.verdict', 'wandb.runnable.closeness', 'wandb.runnable.correct'],
    'include_feedback lists the rows about the call',
  )
})

t.test('weaveImage and weaveAudio values go through /file/create and read back byte-identical', async (t) => {
  const weave = await import('weave')
  const client = await weave.init(P)
  // Arbitrary bytes, every byte value included: the server must not treat them as text.
  const image = Buffer.from(Array.from({ length: 3000 }, (_, i) => (i * 7 + 3) % 256))
  const audio = Buffer.concat([Buffer.from('RIFF'), Buffer.from(Array.from({ length: 5000 }, (_, i) => (i * 13) % 256))])
  const digestOf = (b: Buffer) => createHash('sha256').update(b).digest('base64url').replace(/-/g, 'X').replace(/_/g, 'Y').replace(/=/g, '')
  const draw = weave.op(async function draw(n: number) {
    return { n, picture: weave.weaveImage({ data: image }) }
  })
  await draw(1)
  const ds = new weave.Dataset({ name: 'clips', rows: [{ label: 'beep', clip: weave.weaveAudio({ data: audio }) }] })
  const saved = await ds.save()
  await client.waitForBatchProcessing()

  const call = (await calls()).find((c) => opName(c) === 'draw')
  t.match(call.output.picture, { _type: 'CustomWeaveType', weave_type: { type: 'PIL.Image.Image' }, load_op: 'NO_LOAD_OP' })
  const imageDigest = call.output.picture.files['image.png']
  t.equal(imageDigest, digestOf(image), "the file digest is Weave's over the bytes")
  const content = async (digest: string) => {
    const r = await fetch(s.url + '/file/content', {
      method: 'POST',
      headers: { ...s.basic(), 'content-type': 'application/json' },
      body: JSON.stringify({ project_id: P, digest }),
    })
    t.equal(r.status, 200)
    return Buffer.from(await r.arrayBuffer())
  }
  t.ok((await content(imageDigest)).equals(image), 'the image reads back byte-identical')

  const { obj } = await post('/obj/read', { project_id: P, object_id: 'clips', digest: saved.digest })
  const table = await post('/table/query', { project_id: P, digest: obj.val.rows.split('/').pop() })
  const clip = table.rows[0].val.clip
  t.match(clip, { _type: 'CustomWeaveType', weave_type: { type: 'wave.Wave_read' } })
  t.equal(clip.files['audio.wav'], digestOf(audio))
  t.ok((await content(clip.files['audio.wav'])).equals(audio), 'the audio in a dataset row reads back byte-identical')
})
