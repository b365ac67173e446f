import fc from 'fast-check'
import { CallCreateBatchReqSchema, CallEndReqSchema, CallStartReqSchema } from '../../src/schemas/calls-write.js'
import {
  arbitraryOf,
  BODY_MUTATIONS,
  diceArb,
  encodeSegment,
  mutateBody,
  mutateQuery,
  pathParam,
  QUERY_MUTATIONS,
  type BodyCase,
  type Hints,
  type Schema,
} from './fuzz.js'
import t from 'tap'
import { startServer, type TestServer } from './server.js'

/** Every generated request uses this project, so a fingerprint of it shows whether a rejected write changed anything. */
export const ENTITY = 'fuzz'
export const PROJECT = 'fuzz/p1'
/** How long an answer may take before the request counts as hung (generous: the CI machine is loaded). */
const ANSWER_BOUND_MS = 20_000
/** 503 and 507 are the intended answers of bounds (busy, disk full); 501 of routes declared but not built. */
const INTENDED_5XX = new Set([501, 503, 507])

export interface FuzzRoute {
  method: string
  path: string
  family: 'trace' | 'openai'
  body?: Schema
  params: { name: string; in: string; schema: Schema }[]
}

/** Routes whose body the OpenAPI document cannot show (read raw or streamed): the schemas the handlers apply. */
const RAW_BODY_SCHEMAS: Record<string, Schema> = {
  '/call/start': CallStartReqSchema,
  '/call/end': CallEndReqSchema,
  '/call/upsert_batch': CallCreateBatchReqSchema,
}

/** A valid OTLP/JSON export, the starting point of the OTLP routes' mutations. */
const OTLP_EXAMPLE = {
  resourceSpans: [
    {
      resource: {
        attributes: [
          { key: 'wandb.entity', value: { stringValue: 'fuzz' } },
          { key: 'wandb.project', value: { stringValue: 'p1' } },
        ],
      },
      scopeSpans: [
        {
          spans: [
            {
              traceId: '0123456789abcdef0123456789abcdef',
              spanId: '0123456789abcdef',
              name: 'fuzz',
              startTimeUnixNano: '1767225600000000000',
              endTimeUnixNano: '1767225601000000000',
              attributes: [{ key: 'input.value', value: { stringValue: '{"q":1}' } }],
            },
          ],
        },
      ],
    },
  ],
}

export async function routesOf(s: TestServer): Promise<FuzzRoute[]> {
  const doc = (await (await fetch(s.url + '/openapi.json')).json()) as { paths: Record<string, Record<string, any>> }
  const out: FuzzRoute[] = []
  for (const [path, ops] of Object.entries(doc.paths)) {
    for (const [method, op] of Object.entries(ops)) {
      const bearer = (op.security ?? []).some((x: object) => 'bearerAuth' in x)
      out.push({
        method: method.toUpperCase(),
        path,
        family: bearer || path.startsWith('/v1/') || path.startsWith('/inference/') ? 'openai' : 'trace',
        body: op.requestBody?.content?.['application/json']?.schema ?? RAW_BODY_SCHEMAS[path],
        params: op.parameters ?? [],
      })
    }
  }
  return out
}

/** What is already in the project when fuzzing starts, so generated ids and refs can hit real rows. */
export interface Seeds {
  callId: string
  objectId: string
  digest: string
}

export async function seed(s: TestServer): Promise<Seeds> {
  const post = async (path: string, body: unknown) => {
    const r = await fetch(s.url + path, {
      method: 'POST',
      headers: { ...s.basic(), 'content-type': 'application/json' },
      body: JSON.stringify(body),
    })
    if (!r.ok) throw new Error(`${path}: ${r.status} ${await r.text()}`)
    return (await r.json()) as any
  }
  const started = new Date().toISOString()
  const { id } = await post('/call/start', {
    start: { project_id: PROJECT, op_name: 'seed', started_at: started, attributes: {}, inputs: { q: 1 } },
  })
  await post('/call/end', { end: { project_id: PROJECT, id, ended_at: new Date().toISOString(), output: 2, summary: {} } })
  const { digest } = await post('/obj/create', { obj: { project_id: PROJECT, object_id: 'seed-obj', val: { a: 1 } } })
  await post('/feedback/create', {
    project_id: PROJECT,
    weave_ref: `weave:///${PROJECT}/call/${id}`,
    feedback_type: 'note',
    payload: { note: 'seed' },
  })
  return { callId: id, objectId: 'seed-obj', digest }
}

export function hintsFor(seeds: Seeds): Hints {
  const callRef = `weave:///${PROJECT}/call/${seeds.callId}`
  const objRef = `weave:///${PROJECT}/object/${seeds.objectId}:${seeds.digest}`
  const callId = fc.oneof(fc.constant(seeds.callId), fc.stringMatching(/^[0-9a-f]{16}$/))
  return {
    project_id: fc.constant(PROJECT),
    entity: fc.constant(ENTITY),
    project: fc.constant('p1'),
    id: callId,
    call_id: callId,
    call_ids: fc.array(callId, { maxLength: 2 }),
    trace_id: fc.stringMatching(/^[0-9a-f]{32}$/),
    parent_id: fc.constantFrom(null, seeds.callId),
    object_id: fc.constantFrom(seeds.objectId, 'other-obj'),
    digest: fc.constantFrom(seeds.digest, 'latest'),
    weave_ref: fc.constantFrom(callRef, objRef),
    refs: fc.array(fc.constantFrom(callRef, objRef), { maxLength: 2 }),
    model: fc.constant('weft-tiny'),
    // The chat routes sample at most a couple of tokens: fuzzing checks answers, not generation.
    max_tokens: fc.integer({ min: 1, max: 2 }),
    max_completion_tokens: fc.integer({ min: 1, max: 2 }),
    min_tokens: fc.constant(0),
    n: fc.constant(1),
  }
}

/** A cheap picture of everything stored for the project (and the keys), compared around each rejected write. */
export async function fingerprint(s: TestServer): Promise<string> {
  const post = (path: string, body: unknown) =>
    fetch(s.url + path, { method: 'POST', headers: { ...s.basic(), 'content-type': 'application/json' }, body: JSON.stringify(body) }).then(
      (r) => r.text(),
    )
  const parts = await Promise.all([
    post('/calls/stream_query', { project_id: PROJECT, sort_by: [{ field: 'id', direction: 'asc' }] }),
    post('/objs/query', { project_id: PROJECT, filter: { latest_only: false } }),
    post('/feedback/query', { project_id: PROJECT }),
    post('/files/query_stats', { project_id: PROJECT }),
    post('/cost/query', { project_id: PROJECT }),
    fetch(s.url + '/admin/keys', { headers: s.basic() }).then((r) => r.text()),
  ])
  return parts.join('\n')
}

/** Routes that only read (their POST bodies are queries): a rejection there has nothing to undo. */
const READ_ONLY =
  /\/(query|read|query_stats|stream_query|stats|usage|content|query_stream|query_stats_batch|read_batch|tokenize|detokenize)$/

function writesData(route: FuzzRoute): boolean {
  return route.method !== 'GET' && !READ_ONLY.test(route.path)
}

interface Sent {
  method: string
  url: string
  headers: Record<string, string>
  body?: string | Buffer
}

/** Why an answer is wrong, or null. */
export function problemOf(route: FuzzRoute, status: number, text: string): string | null {
  if (status >= 500 && !INTENDED_5XX.has(status)) return `status ${status}`
  if (status < 400) return null
  let j: any
  try {
    j = JSON.parse(text)
  } catch {
    return `status ${status} with a body that is not JSON`
  }
  if (route.family === 'openai') {
    const e = j?.error
    const ok = e && typeof e.message === 'string' && typeof e.type === 'string' && e.code === status
    return ok ? null : `status ${status} not in the OpenAI error shape`
  }
  const detail = Array.isArray(j?.detail) && j.detail.every((d: any) => Array.isArray(d.loc) && typeof d.msg === 'string')
  return detail || typeof j?.reason === 'string' ? null : `status ${status} not in the trace error shape`
}

/**
 * The requests of one route: `runs` cases. The first is the generated request as is; the others cycle through the
 * mutations from `rotate`, so that routes given fewer runs (a tight time budget) still share out every mutation.
 */
export function casesFor(s: TestServer, route: FuzzRoute, hints: Hints, seedNo: number, runs: number, rotate = 0): Sent[] {
  const pathParams = route.params.filter((p) => p.in === 'path')
  const queryParams = route.params.filter((p) => p.in === 'query')
  const bodyArb = route.path.startsWith('/otel/')
    ? fc.constant(OTLP_EXAMPLE)
    : route.body
      ? arbitraryOf(route.body, hints)
      : fc.constant(undefined)
  const queryArb = fc.record(Object.fromEntries(queryParams.map((p) => [p.name, arbitraryOf(p.schema, hints, 0, p.name)])), {
    requiredKeys: [],
  })
  const pathArb = fc.record(Object.fromEntries(pathParams.map((p) => [p.name, arbitraryOf(p.schema, hints, 0, p.name)])))
  const arb = fc.record({ body: bodyArb, query: queryArb, pathValues: pathArb, dice: diceArb, spoilPath: fc.nat(5) })
  const samples = fc.sample(arb, { seed: seedNo, numRuns: runs })
  const hasBody = route.method !== 'GET' && route.method !== 'DELETE'
  return samples.map((c, i) => {
    let path = route.path
    for (const p of pathParams) {
      const v = String((c.pathValues as Record<string, unknown>)[p.name] ?? 'x')
      path = path.replace(`{${p.name}}`, p.name === 'path' ? '/' + encodeSegment(v) : pathParam(v, c.dice, c.spoilPath === 0))
    }
    const qKind = QUERY_MUTATIONS[i === 0 ? 0 : 1 + ((rotate + i - 1) % (QUERY_MUTATIONS.length - 1))]!
    const query = queryParams.length ? mutateQuery(c.query as Record<string, unknown>, qKind, c.dice) : ''
    const auth = route.family === 'openai' ? s.bearer() : s.basic()
    const url = s.url + path + (query ? '?' + query : '')
    if (!hasBody) return { method: route.method, url, headers: auth }
    const kind = BODY_MUTATIONS[i === 0 ? 0 : 1 + ((rotate + i - 1) % (BODY_MUTATIONS.length - 1))]!
    const b: BodyCase = mutateBody(c.body ?? {}, kind, c.dice)
    return { method: route.method, url, headers: { ...auth, ...b.headers }, body: b.body }
  })
}

export interface RouteReport {
  route: string
  requests: number
  statuses: Record<string, number>
  problems: string[]
  ms: number
}

async function send(c: Sent): Promise<{ status: number; text: string } | { error: string }> {
  try {
    const r = await fetch(c.url, { method: c.method, headers: c.headers, body: c.body, signal: AbortSignal.timeout(ANSWER_BOUND_MS) })
    return { status: r.status, text: await r.text() }
  } catch (e) {
    return { error: `no answer: ${(e as Error).message}${(e as Error).cause ? ` (${String((e as Error).cause)})` : ''}` }
  }
}

function describe(c: Sent): string {
  const body = c.body === undefined ? '' : ' ' + JSON.stringify(String(c.body).slice(0, 200))
  const { authorization, ...rest } = c.headers
  const headers = Object.entries({ authorization: authorization?.slice(0, 20), ...rest })
    .map(([k, v]) => `${k}: ${JSON.stringify(String(v).slice(0, 40))}`)
    .slice(0, 6)
    .join(', ')
  return `${c.method} ${c.url.slice(0, 200)} {${headers}}${body}`
}

/** The distinct errors the server logged (internal errors of requests), for the report of a failing run. */
export function serverErrors(s: TestServer): string[] {
  const out = new Set<string>()
  for (const line of s.output().split('\n')) {
    if (!line.includes('"level":50')) continue
    try {
      const j = JSON.parse(line)
      out.add(
        `${j.method ?? ''} ${j.path ?? ''}: ${j.err?.message ?? j.msg} @ ${String(j.err?.stack ?? '')
          .split('\n')
          .slice(1, 4)
          .join(' | ')}`,
      )
    } catch {
      out.add(line.slice(0, 300))
    }
  }
  return [...out]
}

/** Sends every case of a route; checks the answer, its time bound, its shape, and that a rejection changed nothing. */
export async function fuzzRoute(
  s: TestServer,
  route: FuzzRoute,
  hints: Hints,
  seedNo: number,
  runs: number,
  rotate = 0,
): Promise<RouteReport> {
  const started = performance.now()
  const report: RouteReport = { route: `${route.method} ${route.path}`, requests: 0, statuses: {}, problems: [], ms: 0 }
  let known: string | null = null
  for (const c of casesFor(s, route, hints, seedNo, runs, rotate)) {
    const writes = writesData(route)
    if (writes && known === null) known = await fingerprint(s)
    const r = await send(c)
    report.requests++
    if ('error' in r) {
      report.problems.push(`${r.error}: ${describe(c)}`)
      known = null
      continue
    }
    report.statuses[r.status] = (report.statuses[r.status] ?? 0) + 1
    const p = problemOf(route, r.status, r.text)
    if (p) report.problems.push(`${p}: ${describe(c)} → ${r.text.slice(0, 300)}`)
    if (writes && r.status >= 400) {
      const after = await fingerprint(s)
      if (after !== known) report.problems.push(`rejected (${r.status}) yet the data changed: ${describe(c)}`)
      known = after
    } else known = null
  }
  report.ms = Math.round(performance.now() - started)
  return report
}

export interface FuzzPlan {
  /** Requests per route when time allows. */
  runs: number
  /** Fewest requests per route however loaded the machine is. */
  minRuns: number
  /** Time for all routes; past the pace, later routes get fewer runs (never below minRuns). */
  budgetMs: number
  seed: number
}

/** Fuzzes each route in turn, sharing the time budget out; reports per route. */
export async function fuzzRoutes(
  s: TestServer,
  routes: FuzzRoute[],
  hints: Hints,
  plan: FuzzPlan,
  onRoute: (r: RouteReport) => void,
): Promise<{ requests: number; ms: number }> {
  const started = performance.now()
  let requests = 0
  for (const [i, route] of routes.entries()) {
    const elapsed = performance.now() - started
    const perRequest = requests ? elapsed / requests : 50
    const affordable = Math.floor((plan.budgetMs - elapsed) / (routes.length - i) / perRequest)
    const runs = Math.max(plan.minRuns, Math.min(plan.runs, affordable))
    const r = await fuzzRoute(s, route, hints, plan.seed, runs, i * 5)
    requests += r.requests
    onRoute(r)
  }
  return { requests, ms: Math.round(performance.now() - started) }
}

/** 15 requests per route (each mutation once) when the machine keeps pace; at least 6 when it is loaded. */
export const PLAN = {
  runs: Number(process.env.FUZZ_RUNS ?? 15),
  minRuns: Number(process.env.FUZZ_MIN_RUNS ?? 6),
  budgetMs: Number(process.env.FUZZ_BUDGET_MS ?? 40_000),
  seed: Number(process.env.FUZZ_SEED ?? 18),
}

/**
 * One fuzzing test over the routes of /openapi.json that `part` picks, against a server of the test file's own:
 * every answer checked (problemOf), then the server's log searched for internal errors.
 */
export function fuzzPart(name: string, part: (r: FuzzRoute) => boolean, minRoutes: number): void {
  let s: TestServer
  t.before(async () => {
    s = await startServer()
  })
  t.teardown(() => s.stop())
  t.test(name, async (t) => {
    const routes = (await routesOf(s)).filter(part)
    t.ok(routes.length >= minRoutes, `${routes.length} routes`)
    const hints = hintsFor(await seed(s))
    const { requests, ms } = await fuzzRoutes(s, routes, hints, PLAN, (r) => {
      t.comment(`${r.route}: ${r.requests} requests in ${r.ms} ms, statuses ${JSON.stringify(r.statuses)}`)
      t.same(r.problems, [], r.route)
    })
    t.comment(`${routes.length} routes, ${requests} requests in ${ms} ms`)
    t.same(serverErrors(s), [], 'the server logged no internal error')
  })
}
