import { hex } from './ids.js'

/**
 * The tenant-isolation test's attempts, one entry per route of /openapi.json (`METHOD path`). Each entry builds
 * the request for a project `P` ("entity/project"), given what the victim's seeding produced; the test sends it
 * once naming the victim's project with the attacker's key (must be refused, 403) and once naming the
 * attacker's own project (must not be refused: proves the refusal is about the entity, not a malformed request).
 */

export interface Seeded {
  /** A call of the victim's: id and trace id. */
  callId: string
  traceId: string
  objId: string
  objDigest: string
  tableDigest: string
  rowDigests: string[]
  fileDigest: string
  feedbackId: string
  /** v2 object ids and digests and run ids. */
  v2: {
    opId: string
    opDigest: string
    datasetId: string
    datasetDigest: string
    scorerId: string
    scorerDigest: string
    scorerRef: string
    evaluationId: string
    evaluationDigest: string
    modelId: string
    modelDigest: string
    modelRef: string
    runId: string
    predictionId: string
    scoreId: string
  }
}

export interface Attempt {
  method: 'GET' | 'POST' | 'DELETE'
  path: string
  body?: unknown
  /** A multipart form instead of JSON. */
  form?: FormData
  headers?: Record<string, string>
  /** Bearer instead of Basic (the chat family). */
  bearer?: boolean
}

export type Case = (P: string, v: Seeded) => Attempt

const now = () => new Date().toISOString()
const startOf = (P: string, id = hex(16), trace_id = hex(32)) => ({
  project_id: P,
  id,
  trace_id,
  op_name: 'weave:///x/y/op/attack:1',
  started_at: now(),
  attributes: {},
  inputs: { x: 1 },
})
const endOf = (P: string, id: string) => ({ project_id: P, id, ended_at: now(), summary: {}, output: 'pwned' })

function otlp(P: string): Attempt {
  const [entity, project] = P.split('/')
  const ns = String(BigInt(Date.now()) * 1_000_000n)
  const attr = (key: string, v: string) => ({ key, value: { stringValue: v } })
  return {
    method: 'POST',
    path: '/otel/v1/traces',
    headers: { 'project-id': P },
    body: {
      resourceSpans: [
        {
          resource: { attributes: [attr('wandb.entity', entity!), attr('wandb.project', project!)] },
          scopeSpans: [
            {
              scope: { name: 's' },
              spans: [{ traceId: hex(32), spanId: hex(16), name: 'attack', kind: 1, startTimeUnixNano: ns, endTimeUnixNano: ns }],
            },
          ],
        },
      ],
    },
  }
}

function fileForm(P: string): FormData {
  const f = new FormData()
  f.set('project_id', P)
  f.set('file', new Blob(['attacker bytes']), 'a.txt')
  return f
}

const post = (path: string, body: unknown): Attempt => ({ method: 'POST', path, body })
const get = (path: string): Attempt => ({ method: 'GET', path })
const del = (path: string): Attempt => ({ method: 'DELETE', path })
const fb = (P: string, v: Seeded) => ({
  project_id: P,
  weave_ref: `weave:///${P}/call/${v.callId}`,
  feedback_type: 'wandb.note.1',
  payload: { note: 'pwned' },
})

/** Trace-family routes that name their project in the body (or a form field, a header, the spans). */
export const BODY_CASES: Record<string, Case> = {
  'POST /call/start': (P) => post('/call/start', { start: startOf(P) }),
  'POST /call/end': (P, v) => post('/call/end', { end: endOf(P, v.callId) }),
  'POST /call/upsert_batch': (P, v) =>
    post('/call/upsert_batch', {
      batch: [
        { mode: 'start', req: { start: startOf(P) } },
        { mode: 'end', req: { end: endOf(P, v.callId) } },
      ],
    }),
  'POST /call/read': (P, v) => post('/call/read', { project_id: P, id: v.callId }),
  'POST /call/update': (P, v) => post('/call/update', { project_id: P, call_id: v.callId, display_name: 'pwned' }),
  'POST /calls/delete': (P, v) => post('/calls/delete', { project_id: P, call_ids: [v.callId] }),
  'POST /calls/stream_query': (P, v) => post('/calls/stream_query', { project_id: P, filter: { call_ids: [v.callId] } }),
  'POST /calls/query': (P) => post('/calls/query', { project_id: P }),
  'POST /calls/query_stats': (P) => post('/calls/query_stats', { project_id: P }),
  'POST /calls/stats': (P) =>
    post('/calls/stats', {
      project_id: P,
      start: new Date(Date.now() - 86_400_000).toISOString(),
      call_metrics: [{ metric: 'call_count' }],
    }),
  'POST /calls/usage': (P, v) => post('/calls/usage', { project_id: P, call_ids: [v.callId] }),
  'POST /trace/usage': (P) => post('/trace/usage', { project_id: P }),
  'POST /cost/create': (P) =>
    post('/cost/create', { project_id: P, costs: { 'gpt-x': { prompt_token_cost: 9, completion_token_cost: 9 } } }),
  'POST /cost/query': (P) => post('/cost/query', { project_id: P }),
  'POST /cost/purge': (P) =>
    post('/cost/purge', { project_id: P, query: { $expr: { $eq: [{ $getField: 'llm_id' }, { $literal: 'gpt-x' }] } } }),
  'POST /otel/v1/traces': (P) => otlp(P),
  'POST /otel/v1/trace': (P) => ({ ...otlp(P), path: '/otel/v1/trace' }),
  'POST /obj/create': (P, v) => post('/obj/create', { obj: { project_id: P, object_id: v.objId, val: { pwned: true } } }),
  'POST /obj/read': (P, v) => post('/obj/read', { project_id: P, object_id: v.objId, digest: v.objDigest }),
  'POST /objs/query': (P) => post('/objs/query', { project_id: P }),
  'POST /obj/delete': (P, v) => post('/obj/delete', { project_id: P, object_id: v.objId, digests: [v.objDigest] }),
  'POST /file/create': (P) => ({ method: 'POST', path: '/file/create', form: fileForm(P) }),
  'POST /file/content': (P, v) => post('/file/content', { project_id: P, digest: v.fileDigest }),
  'POST /files/query_stats': (P) => post('/files/query_stats', { project_id: P }),
  'POST /table/create': (P) => post('/table/create', { table: { project_id: P, rows: [{ pwned: true }] } }),
  'POST /table/update': (P, v) => post('/table/update', { project_id: P, base_digest: v.tableDigest, updates: [{ pop: { index: 0 } }] }),
  'POST /table/create_from_digests': (P, v) => post('/table/create_from_digests', { project_id: P, row_digests: v.rowDigests }),
  'POST /table/query': (P, v) => post('/table/query', { project_id: P, digest: v.tableDigest }),
  'POST /table/query_stream': (P, v) => post('/table/query_stream', { project_id: P, digest: v.tableDigest }),
  'POST /table/query_stats': (P, v) => post('/table/query_stats', { project_id: P, digest: v.tableDigest }),
  'POST /table/query_stats_batch': (P, v) => post('/table/query_stats_batch', { project_id: P, digests: [v.tableDigest] }),
  'POST /feedback/create': (P, v) => post('/feedback/create', fb(P, v)),
  'POST /feedback/batch/create': (P, v) => post('/feedback/batch/create', { batch: [fb(P, v)] }),
  'POST /feedback/query': (P) => post('/feedback/query', { project_id: P }),
  'POST /feedback/purge': (P, v) =>
    post('/feedback/purge', { project_id: P, query: { $expr: { $eq: [{ $getField: 'id' }, { $literal: v.feedbackId }] } } }),
  'POST /feedback/replace': (P, v) => post('/feedback/replace', { ...fb(P, v), feedback_id: v.feedbackId }),
  'POST /refs/read_batch': (P, v) => post('/refs/read_batch', { refs: [`weave:///${P}/object/${v.objId}:${v.objDigest}`] }),
  'POST /v1/chat/completions': (P) => ({
    method: 'POST',
    path: '/v1/chat/completions',
    bearer: true,
    headers: { 'openai-project': P },
    body: { model: 'weft-tiny', messages: [{ role: 'user', content: 'hi' }], max_tokens: 2 },
  }),
  'POST /v1/completions': (P) => ({
    method: 'POST',
    path: '/v1/completions',
    bearer: true,
    headers: { 'openai-project': P },
    body: { model: 'weft-tiny', prompt: 'hi', max_tokens: 2 },
  }),
}

const V2 = '/v2/{entity}/{project}'
/** /v2 routes: the project is in the path. */
export const V2_CASES: Record<string, Case> = {
  [`POST ${V2}/ops`]: (P) => post(`/v2/${P}/ops`, { name: 'attack', source_code: 'def f(): pass' }),
  [`GET ${V2}/ops`]: (P) => get(`/v2/${P}/ops`),
  [`GET ${V2}/ops/{object_id}/versions/{digest}`]: (P, v) => get(`/v2/${P}/ops/${v.v2.opId}/versions/${v.v2.opDigest}`),
  [`DELETE ${V2}/ops/{object_id}`]: (P, v) => del(`/v2/${P}/ops/${v.v2.opId}`),
  [`POST ${V2}/datasets`]: (P) => post(`/v2/${P}/datasets`, { name: 'attack', rows: [{ a: 1 }] }),
  [`GET ${V2}/datasets`]: (P) => get(`/v2/${P}/datasets`),
  [`GET ${V2}/datasets/{object_id}/versions/{digest}`]: (P, v) => get(`/v2/${P}/datasets/${v.v2.datasetId}/versions/${v.v2.datasetDigest}`),
  [`DELETE ${V2}/datasets/{object_id}`]: (P, v) => del(`/v2/${P}/datasets/${v.v2.datasetId}`),
  [`POST ${V2}/scorers`]: (P) => post(`/v2/${P}/scorers`, { name: 'attack', op_source_code: 'def score(): return 1' }),
  [`GET ${V2}/scorers`]: (P) => get(`/v2/${P}/scorers`),
  [`GET ${V2}/scorers/{object_id}/versions/{digest}`]: (P, v) => get(`/v2/${P}/scorers/${v.v2.scorerId}/versions/${v.v2.scorerDigest}`),
  [`DELETE ${V2}/scorers/{object_id}`]: (P, v) => del(`/v2/${P}/scorers/${v.v2.scorerId}`),
  [`POST ${V2}/evaluations`]: (P, v) =>
    post(`/v2/${P}/evaluations`, { name: 'attack', dataset: `weave:///${P}/object/${v.v2.datasetId}:${v.v2.datasetDigest}` }),
  [`GET ${V2}/evaluations`]: (P) => get(`/v2/${P}/evaluations`),
  [`GET ${V2}/evaluations/{object_id}/versions/{digest}`]: (P, v) =>
    get(`/v2/${P}/evaluations/${v.v2.evaluationId}/versions/${v.v2.evaluationDigest}`),
  [`DELETE ${V2}/evaluations/{object_id}`]: (P, v) => del(`/v2/${P}/evaluations/${v.v2.evaluationId}`),
  [`POST ${V2}/models`]: (P) => post(`/v2/${P}/models`, { name: 'attack', source_code: 'class M: pass' }),
  [`GET ${V2}/models`]: (P) => get(`/v2/${P}/models`),
  [`GET ${V2}/models/{object_id}/versions/{digest}`]: (P, v) => get(`/v2/${P}/models/${v.v2.modelId}/versions/${v.v2.modelDigest}`),
  [`DELETE ${V2}/models/{object_id}`]: (P, v) => del(`/v2/${P}/models/${v.v2.modelId}`),
  [`POST ${V2}/evaluation_runs`]: (P, v) =>
    post(`/v2/${P}/evaluation_runs`, {
      evaluation: `weave:///${P}/object/${v.v2.evaluationId}:${v.v2.evaluationDigest}`,
      model: `weave:///${P}/object/${v.v2.modelId}:${v.v2.modelDigest}`,
    }),
  [`GET ${V2}/evaluation_runs`]: (P) => get(`/v2/${P}/evaluation_runs`),
  [`DELETE ${V2}/evaluation_runs`]: (P, v) => del(`/v2/${P}/evaluation_runs?evaluation_run_ids=${v.v2.runId}`),
  [`GET ${V2}/evaluation_runs/{evaluation_run_id}`]: (P, v) => get(`/v2/${P}/evaluation_runs/${v.v2.runId}`),
  [`POST ${V2}/evaluation_runs/{evaluation_run_id}/finish`]: (P, v) => post(`/v2/${P}/evaluation_runs/${v.v2.runId}/finish`, {}),
  [`POST ${V2}/predictions`]: (P, v) =>
    post(`/v2/${P}/predictions`, { model: `weave:///${P}/object/${v.v2.modelId}:${v.v2.modelDigest}`, inputs: { q: 1 }, output: 2 }),
  [`GET ${V2}/predictions`]: (P) => get(`/v2/${P}/predictions`),
  [`DELETE ${V2}/predictions`]: (P, v) => del(`/v2/${P}/predictions?prediction_ids=${v.v2.predictionId}`),
  [`GET ${V2}/predictions/{prediction_id}`]: (P, v) => get(`/v2/${P}/predictions/${v.v2.predictionId}`),
  [`POST ${V2}/predictions/{prediction_id}/finish`]: (P, v) => post(`/v2/${P}/predictions/${v.v2.predictionId}/finish`, {}),
  [`POST ${V2}/scores`]: (P, v) => post(`/v2/${P}/scores`, { prediction_id: v.v2.predictionId, scorer: v.v2.scorerRef, value: 0 }),
  [`GET ${V2}/scores`]: (P) => get(`/v2/${P}/scores`),
  [`DELETE ${V2}/scores`]: (P, v) => del(`/v2/${P}/scores?score_ids=${v.v2.scoreId}`),
  [`GET ${V2}/scores/{score_id}`]: (P, v) => get(`/v2/${P}/scores/${v.v2.scoreId}`),
  [`POST ${V2}/calls/complete`]: (P) => post(`/v2/${P}/calls/complete`, { batch: [{ ...startOf(P), ...endOf(P, hex(16)), id: hex(16) }] }),
}

/**
 * Routes that name no project, each with why: the test checks their request schemas have no project field
 * and no {entity} path parameter, and that an entity-scoped key cannot use the admin ones.
 */
export const NO_PROJECT: Record<string, string> = {
  'GET /health': 'open, no data',
  'GET /version': 'open, no data',
  'GET /ready': 'open, no data',
  'GET /server_info': 'open, no data',
  'GET /openapi.json': 'open, the interface',
  'GET /geolocate': 'open, IP ranges shipped with weft',
  'GET /admin/stats': 'admin only',
  'POST /admin/keys': 'admin only',
  'GET /admin/keys': 'admin only',
  'DELETE /admin/keys/{key_id}': 'admin only',
  'GET /v1/models': 'served models, shared',
  'GET /v1/models/{id}': 'served models, shared',
  'POST /inference/v1/tokenize': 'model tokenizer, no stored data',
  'POST /inference/v1/detokenize': 'model tokenizer, no stored data',
  'POST /tokenize': 'model tokenizer, no stored data',
  'POST /detokenize': 'model tokenizer, no stored data',
  'GET /inference/v1{path}': 'alias prefix; /v1 routes it serves are covered by their own entries',
  'POST /inference/v1{path}': 'alias prefix; /v1 routes it serves are covered by their own entries',
}
