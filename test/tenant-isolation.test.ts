import t from 'tap'
import type { Test } from 'tap'
import { createHash } from 'node:crypto'
import { requestJson, startServer, type TestServer } from './helpers/server.js'
import { hex } from './helpers/ids.js'
import { BODY_CASES, NO_PROJECT, V2_CASES, type Attempt, type Case, type Seeded } from './helpers/isolation-cases.js'

/**
 * A key scoped to entity A reads and writes nothing of entity B's: not by naming B's project, not by B's ids,
 * refs or digests in A's own project, not through filters. B's data is read (with the admin key) before and
 * after A's attempts and must be identical; no answer A gets contains B's marker string. Every route of
 * /openapi.json must have an attempt here, or be listed as naming no project (checked against its schema).
 */

const ENT_A = 'tenant-a'
const ENT_B = 'tenant-b'
const PA = `${ENT_A}/proj`
const PB = `${ENT_B}/proj`
const MARK = 'B-SECRET-' + hex(16)

let s: TestServer
let keyA: string
let keyB: string
let keyBId: string
let seeded: Seeded

t.before(async () => {
  s = await startServer()
  const mint = async (entity: string) => {
    const r = await requestJson(s, 'POST', '/admin/keys', { user_id: `${entity}-user`, entities: [entity] })
    if (r.status !== 200) throw new Error(r.text)
    return r.json as { key: string; info: { key_id: string } }
  }
  const a = await mint(ENT_A)
  const b = await mint(ENT_B)
  keyA = a.key
  keyB = b.key
  keyBId = b.info.key_id
  seeded = await seed()
})
t.teardown(() => s?.stop())

/** Sends an attempt with a key: Basic unless the attempt is of the chat family. */
async function send(a: Attempt, key: string) {
  const auth = a.bearer ? s.bearer(key) : s.basic(key)
  const res = a.form
    ? await fetch(s.url + a.path, { method: a.method, headers: { ...auth, ...a.headers }, body: a.form })
    : await fetch(s.url + a.path, {
        method: a.method,
        headers: { ...auth, ...a.headers, ...(a.body === undefined ? {} : { 'content-type': 'application/json' }) },
        body: a.body === undefined ? undefined : JSON.stringify(a.body),
      })
  const text = await res.text()
  let json: any
  try {
    json = JSON.parse(text)
  } catch {}
  return { status: res.status, text, json }
}

async function ok(a: Attempt, key = keyB): Promise<any> {
  const r = await send(a, key)
  if (r.status !== 200) throw new Error(`${a.method} ${a.path}: ${r.status} ${r.text}`)
  return r.json ?? r.text
}

const post = (path: string, body: unknown): Attempt => ({ method: 'POST', path, body })

/** B's data, written with B's key, each piece holding MARK. */
async function seed(): Promise<Seeded> {
  const callId = hex(16)
  const traceId = hex(32)
  const started_at = new Date(Date.now() - 1000).toISOString()
  const start = {
    project_id: PB,
    id: callId,
    trace_id: traceId,
    op_name: 'secret_op',
    started_at,
    attributes: {},
    inputs: { secret: MARK },
  }
  await ok(post('/call/start', { start }))
  await ok(post('/call/end', { end: { project_id: PB, id: callId, ended_at: new Date().toISOString(), summary: {}, output: MARK } }))
  const objId = 'secret_obj'
  const obj = await ok(post('/obj/create', { obj: { project_id: PB, object_id: objId, val: { secret: MARK } } }))
  const table = await ok(post('/table/create', { table: { project_id: PB, rows: [{ secret: MARK }, { secret: MARK + '-2' }] } }))
  const form = new FormData()
  form.set('project_id', PB)
  form.set('file', new Blob([MARK]), 'secret.txt')
  const file = await ok({ method: 'POST', path: '/file/create', form })
  const weave_ref = `weave:///${PB}/call/${callId}`
  const feedback = await ok(post('/feedback/create', { project_id: PB, weave_ref, feedback_type: 'wandb.note.1', payload: { note: MARK } }))
  await ok(post('/cost/create', { project_id: PB, costs: { [MARK]: { prompt_token_cost: 1, completion_token_cost: 2 } } }))
  const v2 = await seedV2()
  return {
    callId,
    traceId,
    objId,
    objDigest: obj.digest,
    tableDigest: table.digest,
    rowDigests: table.row_digests,
    fileDigest: file.digest,
    feedbackId: feedback.id,
    v2,
  }
}

async function seedV2(): Promise<Seeded['v2']> {
  const V = `/v2/${PB}`
  const op = await ok(post(`${V}/ops`, { name: 'secret_op', source_code: `# ${MARK}` }))
  const ds = await ok(post(`${V}/datasets`, { name: 'secret_ds', rows: [{ q: MARK }] }))
  const scorer = await ok(post(`${V}/scorers`, { name: 'secret_scorer', op_source_code: `# ${MARK}` }))
  const dsRef = `weave:///${PB}/object/${ds.object_id}:${ds.digest}`
  const ev = await ok(post(`${V}/evaluations`, { name: 'secret_eval', dataset: dsRef, description: MARK }))
  const model = await ok(post(`${V}/models`, { name: 'secret_model', source_code: `# ${MARK}` }))
  const run = await ok(post(`${V}/evaluation_runs`, { evaluation: ev.evaluation_ref, model: model.model_ref }))
  const pred = await ok(
    post(`${V}/predictions`, { model: model.model_ref, inputs: { q: MARK }, output: MARK, evaluation_run_id: run.evaluation_run_id }),
  )
  const score = await ok(
    post(`${V}/scores`, { prediction_id: pred.prediction_id, scorer: scorer.scorer, value: 1, evaluation_run_id: run.evaluation_run_id }),
  )
  return {
    opId: op.object_id,
    opDigest: op.digest,
    datasetId: ds.object_id,
    datasetDigest: ds.digest,
    scorerId: scorer.object_id,
    scorerDigest: scorer.digest,
    scorerRef: scorer.scorer,
    evaluationId: ev.object_id,
    evaluationDigest: ev.digest,
    modelId: model.object_id,
    modelDigest: model.digest,
    modelRef: model.model_ref,
    runId: run.evaluation_run_id,
    predictionId: pred.prediction_id,
    scoreId: score.score_id,
  }
}

/** Everything of B's project, read with the admin key, as one string. */
async function snapshot(): Promise<string> {
  const v = seeded
  const reads: Attempt[] = [
    post('/calls/stream_query', { project_id: PB, include_feedback: true, sort_by: [{ field: 'id', direction: 'asc' }] }),
    post('/calls/query_stats', { project_id: PB }),
    post('/objs/query', { project_id: PB, filter: { latest_only: false } }),
    post('/obj/read', { project_id: PB, object_id: v.objId, digest: v.objDigest }),
    post('/table/query', { project_id: PB, digest: v.tableDigest }),
    post('/table/query_stats_batch', { project_id: PB }),
    post('/file/content', { project_id: PB, digest: v.fileDigest }),
    post('/files/query_stats', { project_id: PB }),
    post('/feedback/query', { project_id: PB }),
    post('/cost/query', { project_id: PB }),
  ]
  for (const kind of ['ops', 'datasets', 'scorers', 'evaluations', 'models', 'evaluation_runs', 'predictions', 'scores'])
    reads.push({ method: 'GET', path: `/v2/${PB}/${kind}` })
  const out: string[] = []
  for (const a of reads) {
    const r = await send(a, s.key)
    out.push(`${a.method} ${a.path} ${r.status} ${r.text}`)
  }
  return out.join('\n')
}

/** A refused attempt: 403, or, where the route reports items in place, every item refused. */
function refused(key: string, r: { status: number; json: any; text: string }): boolean {
  if (r.status === 403) return true
  if (key === 'POST /call/upsert_batch' && r.status === 200)
    return Array.isArray(r.json?.res) && r.json.res.every((x: any) => x?.error || x?.detail || x?.status >= 400)
  if (key.startsWith('POST /otel/') && r.status === 200) {
    const ps = r.json?.partialSuccess ?? r.json?.partial_success
    return Number(ps?.rejectedSpans ?? ps?.rejected_spans) === 1
  }
  return false
}

t.test('isolation', async (t) => {
  const before = await snapshot()
  t.match(before, MARK, 'the snapshot sees B’s data')
  const answers: string[] = []
  const track = async (a: Attempt) => {
    const r = await send(a, keyA)
    answers.push(r.text)
    return r
  }

  await t.test('every route, naming B’s project with A’s key, is refused; naming A’s own is not', async (t) => {
    for (const [key, make] of Object.entries({ ...BODY_CASES, ...V2_CASES }) as [string, Case][]) {
      const onB = await track(make(PB, seeded))
      t.ok(refused(key, onB), `${key} on B: refused (${onB.status} ${onB.text.slice(0, 200)})`)
      const onA = await track(make(PA, seeded))
      t.ok(
        onA.status !== 401 && onA.status !== 403 && onA.status < 500,
        `${key} on A: not refused (${onA.status} ${onA.text.slice(0, 200)})`,
      )
    }
  })

  await t.test('B’s ids, refs and digests used in A’s own project give A nothing of B’s', async (t) => {
    await guessing(t, track)
  })

  await t.test('mixed and indirect attempts', async (t) => {
    await mixed(t, track)
  })

  await t.test('an entity-scoped key administers nothing', async (t) => {
    for (const a of [
      post('/admin/keys', { user_id: 'evil', entities: [ENT_B] }),
      { method: 'GET', path: '/admin/keys' } as Attempt,
      { method: 'DELETE', path: `/admin/keys/${keyBId}` } as Attempt,
      { method: 'GET', path: '/admin/stats' } as Attempt,
    ])
      t.equal((await track(a)).status, 403, `${a.method} ${a.path}`)
    t.equal((await send(post('/calls/query_stats', { project_id: PB }), keyB)).status, 200, 'B’s key still works')
  })

  t.equal(answers.filter((x) => x.includes(MARK)).length, 0, 'no answer A got holds B’s marker')
  t.equal(await snapshot(), before, 'B’s data is identical before and after')
})

// Each guess is something A can know or compute: B's digests are content hashes of values A can guess.
async function guessing(t: Test, track: (a: Attempt) => Promise<{ status: number; json: any; text: string }>) {
  const v = seeded
  const rowDigest = createHash('sha256')
    .update(JSON.stringify({ secret: MARK }))
    .digest('hex')
  t.ok(v.rowDigests.length === 2, `row digests known to A (e.g. ${rowDigest.slice(0, 8)}…, computed)`)
  const read = await track(post('/call/read', { project_id: PA, id: v.callId }))
  t.same([read.status, read.json?.call ?? null], [200, null], 'call/read of B’s id in A: null')
  const q = await track(post('/calls/query', { project_id: PA, filter: { call_ids: [v.callId], trace_ids: [v.traceId] } }))
  t.same(q.json?.calls ?? q.json, [], 'calls/query of B’s ids in A: nothing')
  t.equal((await track(post('/obj/read', { project_id: PA, object_id: v.objId, digest: v.objDigest }))).status, 404, 'obj/read: 404')
  // An unknown table digest reads as an empty table (as Weave answers), not as B's rows.
  t.same((await track(post('/table/query', { project_id: PA, digest: v.tableDigest }))).json, { rows: [] }, 'table/query: no rows')
  t.same((await track(post('/table/query_stats', { project_id: PA, digest: v.tableDigest }))).json, { count: 0 }, 'table/query_stats: 0')
  const fromDigests = await track(post('/table/create_from_digests', { project_id: PA, row_digests: v.rowDigests }))
  t.not(fromDigests.status, 200, `table/create_from_digests with B’s row digests: refused (${fromDigests.status})`)
  const upd = await track(post('/table/update', { project_id: PA, base_digest: v.tableDigest, updates: [{ append: { row: {} } }] }))
  t.equal(upd.status, 404, 'table/update of B’s digest in A: 404')
  t.equal((await track(post('/file/content', { project_id: PA, digest: v.fileDigest }))).status, 404, 'file/content: 404')
  const refs = await track(post('/refs/read_batch', { refs: [`weave:///${PA}/object/${v.objId}:${v.objDigest}`] }))
  t.equal(refs.status, 404, 'refs/read_batch of B’s digest under A: 404')
  for (const path of [
    `ops/${v.v2.opId}/versions/${v.v2.opDigest}`,
    `datasets/${v.v2.datasetId}/versions/${v.v2.datasetDigest}`,
    `evaluation_runs/${v.v2.runId}`,
    `predictions/${v.v2.predictionId}`,
    `scores/${v.v2.scoreId}`,
  ])
    t.equal((await track({ method: 'GET', path: `/v2/${PA}/${path}` })).status, 404, `GET /v2/A/…/${path.split('/')[0]} of B’s id: 404`)
  // Deletes and updates by B's ids inside A's project: whatever they answer, B's snapshot must not move.
  await track(post('/calls/delete', { project_id: PA, call_ids: [v.callId] }))
  await track(post('/call/update', { project_id: PA, call_id: v.callId, display_name: 'pwned' }))
  await track(post('/obj/delete', { project_id: PA, object_id: v.objId }))
  await track(post('/feedback/purge', { project_id: PA, query: { $expr: { $eq: [{ $getField: 'id' }, { $literal: v.feedbackId }] } } }))
  const fb = { project_id: PA, weave_ref: `weave:///${PA}/call/${v.callId}`, feedback_type: 'wandb.note.1', payload: { note: 'x' } }
  await track(post('/feedback/replace', { ...fb, feedback_id: v.feedbackId }))
  await track({ method: 'DELETE', path: `/v2/${PA}/predictions?prediction_ids=${v.v2.predictionId}` })
  await track({ method: 'DELETE', path: `/v2/${PA}/evaluation_runs?evaluation_run_ids=${v.v2.runId}` })
  await track({ method: 'POST', path: `/v2/${PA}/evaluation_runs/${v.v2.runId}/finish`, body: {} })
}

async function mixed(t: Test, track: (a: Attempt) => Promise<{ status: number; json: any; text: string }>) {
  const v = seeded
  const bRef = `weave:///${PB}/object/${v.objId}:${v.objDigest}`
  const r1 = await track(post('/refs/read_batch', { refs: [`weave:///${PA}/object/x:${'0'.repeat(64)}`, bRef] }))
  t.equal(r1.status, 403, 'refs/read_batch with one of B’s refs among A’s: 403')
  const fb = (P: string) => ({ project_id: P, weave_ref: `weave:///${P}/call/${hex(16)}`, feedback_type: 'wandb.note.1', payload: {} })
  t.not((await track(post('/feedback/batch/create', { batch: [fb(PA), fb(PB)] }))).status, 200, 'feedback batch A then B: refused')
  const form = new FormData()
  form.append('project_id', PA)
  form.append('project_id', PB)
  form.set('file', new Blob(['x']), 'x.txt')
  t.equal((await track({ method: 'POST', path: '/file/create', form })).status, 403, 'file/create naming A then B: 403')
  const call = { project_id: PB, id: hex(16), trace_id: hex(32), op_name: 'x', started_at: new Date().toISOString() }
  const done = { ...call, ended_at: new Date().toISOString(), attributes: {}, inputs: {}, summary: {} }
  t.equal((await track(post(`/v2/${PA}/calls/complete`, { batch: [done] }))).status, 400, 'v2 calls/complete in A with B’s project_id: 400')
  // /v2 runs in A's project pointing at B's refs: refused or, if stored, they never read B's objects.
  await track(
    post(`/v2/${PA}/evaluation_runs`, {
      evaluation: `weave:///${PB}/object/${v.v2.evaluationId}:${v.v2.evaluationDigest}`,
      model: v.v2.modelRef,
    }),
  )
  await track(post(`/v2/${PA}/predictions`, { model: v.v2.modelRef, inputs: {}, output: 1 }))
  await track(post(`/v2/${PA}/evaluations`, { name: 'e', dataset: `weave:///${PB}/object/${v.v2.datasetId}:${v.v2.datasetDigest}` }))
  // A call of A's whose input is B's ref, read with expand_columns: the ref stays a string.
  const id = hex(16)
  const start = {
    project_id: PA,
    id,
    trace_id: hex(32),
    op_name: 'x',
    started_at: new Date().toISOString(),
    attributes: {},
    inputs: { r: bRef },
  }
  t.equal((await track(post('/call/start', { start }))).status, 200)
  const ex = await track(post('/calls/query', { project_id: PA, filter: { call_ids: [id] }, expand_columns: ['inputs.r'] }))
  t.equal(ex.json?.calls?.[0]?.inputs?.r, bRef, 'expand_columns does not follow B’s ref')
  const otel = BODY_CASES['POST /otel/v1/traces']!(PB, v)
  const noResource = { ...otel, body: JSON.parse(JSON.stringify(otel.body).replace(/"wandb\.(entity|project)"/g, '"x.$1"')) }
  const byHeader = await track(noResource)
  t.ok(
    refused('POST /otel/v1/traces', byHeader),
    `OTLP with project-id naming B: refused (${byHeader.status} ${byHeader.text.slice(0, 200)})`,
  )
  const chat = { model: 'weft-tiny', messages: [{ role: 'user', content: 'hi' }], max_tokens: 2 }
  const c = await track({
    method: 'POST',
    path: '/v1/chat/completions',
    bearer: true,
    headers: { 'openai-project': `${ENT_B}/inference` },
    body: chat,
  })
  t.equal(c.status, 403, 'chat recording into OpenAI-Project B/…: 403')
  await defaultChatProject(t)
}

/**
 * Without OpenAI-Project a completion is recorded in `<user id>/inference`. A key scoped to entity A whose user
 * id happens to be B's entity name must not write into B's entity that way.
 */
async function defaultChatProject(t: Test) {
  const r = await requestJson(s, 'POST', '/admin/keys', { user_id: ENT_B, entities: [ENT_A] })
  const chat = { model: 'weft-tiny', messages: [{ role: 'user', content: 'hi' }], max_tokens: 2 }
  const c = await send({ method: 'POST', path: '/v1/chat/completions', bearer: true, body: chat }, r.json.key)
  const count = async () => (await requestJson(s, 'POST', '/calls/query_stats', { project_id: `${ENT_B}/inference` })).json?.count
  // Recording is acknowledged after the answer: give it a moment before counting.
  let n = await count()
  for (let i = 0; i < 20 && n === 0 && c.status === 200; i++) n = await new Promise((r) => setTimeout(r, 50)).then(count)
  t.equal(c.status, 403, 'the default project <user id>/inference is checked against the key’s entities')
  t.equal(n, 0, `a completion without OpenAI-Project is not recorded in B’s entity (chat answered ${c.status})`)
}

t.test('every route of /openapi.json is covered, and the uncovered name no project', async (t) => {
  const doc = (await requestJson(s, 'GET', '/openapi.json')).json
  const covered = new Set([...Object.keys(BODY_CASES), ...Object.keys(V2_CASES)])
  const seen = new Set<string>()
  for (const [path, ops] of Object.entries<any>(doc.paths)) {
    for (const [method, op] of Object.entries<any>(ops)) {
      const key = `${method.toUpperCase()} ${path}`
      seen.add(key)
      if (covered.has(key)) continue
      if (!(key in NO_PROJECT)) {
        t.fail(`${key} has no isolation attempt: add one to test/helpers/isolation-cases.ts`)
        continue
      }
      const names = JSON.stringify(op.requestBody ?? {}) + JSON.stringify(op.parameters ?? [])
      t.notOk(/project_id|"entity"|"project"/.test(names) || path.includes('{entity}'), `${key} names no project`)
    }
  }
  for (const key of [...covered, ...Object.keys(NO_PROJECT)]) t.ok(seen.has(key), `${key} is a route of /openapi.json`)
})
