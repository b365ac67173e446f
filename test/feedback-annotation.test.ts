import t, { type Test } from 'tap'
import { postJson, startServer, type TestServer } from './helpers/server.js'

// No chat in this file: its servers start without the built-in model (about 1 s of CPU less per start).
process.env.WEFT_MODEL ??= 'none'

// Annotation feedback over HTTP: `wandb.annotation.<name>` names its AnnotationSpec object, and the payload's
// value must satisfy the spec's field_schema (a JSON Schema), as Weave's trace server checks it.
let s: TestServer
t.before(async () => {
  s = await startServer()
})
t.teardown(() => s.stop())

const P = 'acme/annotate'
const CALL = `weave:///${P}/call/0190e4b4-0000-7000-8000-000000000001`
const post = (path: string, body: unknown) => postJson(s, path, body)

/** Saves an AnnotationSpec the way the Python SDK serialises one; answers its ref. */
async function spec(name: string, fieldSchema: unknown, project = P): Promise<string> {
  const val = {
    _type: 'AnnotationSpec',
    name,
    description: null,
    field_schema: fieldSchema,
    unique_among_creators: false,
    op_scope: null,
    _class_name: 'AnnotationSpec',
    _bases: ['BaseObject', 'BaseModel'],
  }
  const r = await post('/obj/create', { obj: { project_id: project, object_id: name, val } })
  if (r.status !== 200) throw new Error(`obj/create: ${r.status} ${r.text}`)
  return `weave:///${project}/object/${name}:${r.json.digest}`
}

const annotate = (name: string, ref: string | undefined, payload: unknown) =>
  post('/feedback/create', { project_id: P, weave_ref: CALL, feedback_type: `wandb.annotation.${name}`, annotation_ref: ref, payload })

async function count(): Promise<number> {
  return (await post('/feedback/query', { project_id: P })).json.total_count
}

/** A refused request answers `status` with a reason and stores nothing. */
async function refused(t: Test, r: Promise<{ status: number; json: any }>, status: number, reason: RegExp) {
  const before = await count()
  const res = await r
  t.equal(res.status, status, `answers ${status}`)
  t.match(JSON.stringify(res.json), reason)
  t.equal(await count(), before, 'stores nothing')
}

t.test('values valid against the field_schema are stored; others are 400', async (t) => {
  // The kinds of spec Weave documents: categorical, bounded number, integer, boolean, bounded string, object.
  const cases: [string, unknown, unknown[], unknown[]][] = [
    ['verdict', { type: 'string', enum: ['good', 'bad'] }, ['good', 'bad'], ['meh', 'Good', 1, null]],
    ['score', { type: 'number', minimum: 0, maximum: 10 }, [0, 2.5, 10], [-0.1, 10.5, '5', true]],
    ['stars', { type: 'integer', minimum: 1, maximum: 5 }, [1, 5, 3.0], [2.5, 0, 6, '3']],
    ['flag', { type: 'boolean' }, [true, false], ['true', 0, null]],
    ['comment', { type: 'string', maxLength: 5 }, ['', 'short', '😀😀😀😀😀'], ['toolong', 5]],
    [
      'detail',
      { type: 'object', properties: { a: { type: 'integer' } }, required: ['a'], additionalProperties: false },
      [{ a: 1 }],
      [{}, { a: 1, b: 2 }, { a: 'x' }, [1]],
    ],
  ]
  for (const [name, schema, good, bad] of cases) {
    const ref = await spec(name, schema)
    for (const value of good) {
      const r = await annotate(name, ref, { value })
      t.equal(r.status, 200, `${name}: ${JSON.stringify(value)} accepted`)
    }
    for (const value of bad) await refused(t, annotate(name, ref, { value }), 400, /does not match annotation spec/)
  }
  const stored = await post('/feedback/query', {
    project_id: P,
    fields: ['feedback_type', 'payload', 'annotation_ref'],
    query: { $expr: { $eq: [{ $getField: 'feedback_type' }, { $literal: 'wandb.annotation.verdict' }] } },
  })
  t.same(
    stored.json.result.map((f: any) => f.payload),
    [{ value: 'good' }, { value: 'bad' }],
    'the payloads are stored as given',
  )
  t.match(stored.json.result[0].annotation_ref, /^weave:\/\/\/acme\/annotate\/object\/verdict:[A-Za-z0-9]{43}$/)
})

t.test('an empty field_schema accepts any value; a spec version is checked on its own schema', async (t) => {
  const any = await spec('anything', {})
  for (const value of [1, 'x', null, { deep: [1, 2] }]) t.equal((await annotate('anything', any, { value })).status, 200)
  // A newer version of the spec with a stricter schema: feedback naming the old version still follows the old one.
  const v0 = await spec('level', { type: 'integer' })
  const v1 = await spec('level', { type: 'integer', maximum: 3 })
  t.not(v0, v1)
  t.equal((await annotate('level', v0, { value: 7 })).status, 200)
  await refused(t, annotate('level', v1, { value: 7 }), 400, /does not match annotation spec/)
  t.equal((await annotate('level', v1, { value: 3 })).status, 200)
})

t.test('what the annotation ref and payload must be', async (t) => {
  const ref = await spec('tone', { type: 'string', enum: ['calm', 'angry'] })
  const digest = ref.split(':').pop()!
  await refused(t, annotate('tone', undefined, { value: 'calm' }), 400, /annotation_ref is required/)
  await refused(t, annotate('tone', ref, { note: 'calm' }), 400, /needs a \\"value\\" key/)
  await refused(t, annotate('mood', ref, { value: 'calm' }), 400, /named \\"mood\\"/)
  await refused(t, annotate('tone', `weave:///${P}/op/tone:${digest}`, { value: 'calm' }), 400, /object ref/)
  // Another project's spec, even one of the same name and content, is not this project's.
  const elsewhere = await spec('tone', { type: 'string', enum: ['calm', 'angry'] }, 'acme/other')
  await refused(t, annotate('tone', elsewhere, { value: 'calm' }), 400, /of this project/)
  // A spec version that does not exist: 404, as Weave's ref read answers.
  await refused(t, annotate('tone', `weave:///${P}/object/tone:${'A'.repeat(43)}`, { value: 'calm' }), 404, /not found/)
  await refused(t, annotate('nope', `weave:///${P}/object/nope:${digest}`, { value: 'calm' }), 404, /not found/)
  // A deleted spec: 400, as in Weave (its ref reads as null).
  const gone = await spec('gone', { type: 'string' })
  t.equal((await post('/obj/delete', { project_id: P, object_id: 'gone' })).status, 200)
  await refused(t, annotate('gone', gone, { value: 'x' }), 400, /not found/)
  // The ref may not be `latest` (refs name versions).
  await refused(t, annotate('tone', `weave:///${P}/object/tone:latest`, { value: 'calm' }), 400, /latest/)
})

t.test('a spec that is not an AnnotationSpec is refused, whatever the value', async (t) => {
  const bad = async (name: string, val: unknown) => {
    const r = await post('/obj/create', { obj: { project_id: P, object_id: name, val } })
    return `weave:///${P}/object/${name}:${r.json.digest}`
  }
  // Not a JSON Schema at all (Weave: jsonschema's SchemaError), a field_schema that is not an object, a scalar object.
  await refused(
    t,
    annotate('broken', await bad('broken', { field_schema: { type: 'strnig' } }), { value: 'x' }),
    400,
    /not a valid annotation spec/,
  )
  await refused(t, annotate('listy', await bad('listy', { field_schema: ['string'] }), { value: 'x' }), 400, /not a valid annotation spec/)
  await refused(t, annotate('scalar', await bad('scalar', 'just text'), { value: 'x' }), 400, /not a valid annotation spec/)
  await refused(t, annotate('named', await bad('named', { name: 5, field_schema: {} }), { value: 'x' }), 400, /not a valid annotation spec/)
  // Any object whose fields fit AnnotationSpec's model is one (Weave validates the fields, not the class name).
  t.equal((await annotate('plain', await bad('plain', { field_schema: { const: 1 } }), { value: 1 })).status, 200)
})

t.test('a batch with one invalid annotation stores none; replace checks the new row', async (t) => {
  const ref = await spec('grade', { enum: ['A', 'B', 'C'] })
  const row = (value: unknown) => ({
    project_id: P,
    weave_ref: CALL,
    feedback_type: 'wandb.annotation.grade',
    annotation_ref: ref,
    payload: { value },
  })
  await refused(t, post('/feedback/batch/create', { batch: [row('A'), row('B'), row('F')] }), 400, /does not match annotation spec/)
  const ok = await post('/feedback/batch/create', { batch: [row('A'), row('C')] })
  t.equal(ok.status, 200)
  t.equal(ok.json.res.length, 2)
  const id = ok.json.res[0].id
  await refused(t, post('/feedback/replace', { ...row('Z'), feedback_id: id }), 400, /does not match annotation spec/)
  const replaced = await post('/feedback/replace', { ...row('B'), feedback_id: id })
  t.equal(replaced.status, 200)
  t.not(replaced.json.id, id)
})
