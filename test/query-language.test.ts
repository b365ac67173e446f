import t from 'tap'
import { randomUUID } from 'node:crypto'
import { postJson, startServer, type TestServer } from './helpers/server.js'

// No chat in this file: its servers start without the built-in model (about 1 s of CPU less per start).
process.env.WEFT_MODEL ??= 'none'

/**
 * Weave's query language against a real server, with the cases (inputs and expected counts) of
 * Weave's own trace tests, so weft answers as Weave's ClickHouse server does: JSON fields read as
 * text ('' when missing), a failed $convert is NULL, and NULL leaves a row out under $not/$and/$or.
 */
let s: TestServer
t.before(async () => {
  s = await startServer()
})
t.teardown(() => s.stop())

const P = 'acme/ql'
const post = (p: string, body: unknown) => postJson(s, p, body)
const uuid = () => randomUUID()

/** Stores calls (start and end, output as given) in one batch; returns their ids in order. */
async function store(project: string, calls: { inputs: unknown; output: unknown }[]): Promise<string[]> {
  const ids = calls.map(() => uuid())
  const batch = calls.flatMap((c, i) => [
    {
      mode: 'start',
      req: {
        start: {
          project_id: project,
          id: ids[i],
          trace_id: uuid(),
          op_name: 'basic_op',
          started_at: new Date(Date.UTC(2026, 0, 1, 0, 0, i)).toISOString(),
          attributes: {},
          inputs: c.inputs,
        },
      },
    },
    {
      mode: 'end',
      req: {
        end: {
          project_id: project,
          id: ids[i],
          ended_at: new Date(Date.UTC(2026, 0, 1, 0, 0, i, 500)).toISOString(),
          summary: {},
          output: c.output,
        },
      },
    },
  ])
  const r = await post('/call/upsert_batch', { batch })
  if (r.status !== 200) throw new Error(`${r.status} ${r.text}`)
  return ids
}

async function ids(project: string, body: Record<string, unknown>): Promise<{ status: number; ids: string[]; text: string }> {
  const r = await post('/calls/query', { project_id: project, ...body })
  return { status: r.status, ids: r.status === 200 ? r.json.calls.map((c: any) => c.id) : [], text: r.text }
}
async function count(project: string, query: unknown): Promise<number> {
  const r = await post('/calls/query_stats', { project_id: project, query })
  if (r.status !== 200) throw new Error(`${r.status} ${r.text}`)
  return r.json.count
}

const field = (f: string) => ({ $getField: f })
const lit = (v: unknown) => ({ $literal: v })
const conv = (f: string, to: string) => ({ $convert: { input: field(f), to } })

// Weave's test_trace_call_filter: ten dict inputs, one of other types, a string and a number.
const rows: { in_val: unknown }[] = []
for (let i = 0; i < 10; i++) rows.push({ in_val: { prim: i, list: [i], dict: { inner: i }, str: 'str_' + i } })
rows.push({ in_val: { prim: 'Different Type', list: 'Different Type', dict: 'Different Type', str: false } })
rows.push({ in_val: 'simple_primitive' }, { in_val: 42 })

const CASES: [number, unknown, string][] = [
  [13, { $eq: [lit(1), lit(1)] }, 'literal true'],
  [0, { $eq: [lit(1), lit(2)] }, 'literal false'],
  [1, { $eq: [lit(5), conv('inputs.in_val.prim', 'int')] }, 'eq int'],
  [1, { $eq: [lit('simple_primitive'), field('inputs.in_val')] }, 'eq string'],
  [1, { $eq: [lit('simple_primitive'), field('output')] }, 'eq string output (a JSON string at the root)'],
  [4, { $gt: [conv('inputs.in_val.prim', 'int'), lit(5)] }, 'gt'],
  [5, { $gte: [conv('inputs.in_val.prim', 'int'), lit(5)] }, 'gte'],
  [6, { $not: [{ $gt: [conv('inputs.in_val.prim', 'int'), lit(5)] }] }, 'not gt: NULL conversions stay out'],
  [5, { $not: [{ $gte: [conv('inputs.in_val.prim', 'int'), lit(5)] }] }, 'not gte'],
  [13, { $contains: { input: field('inputs.in_val.str'), substr: lit('') } }, 'contains empty: missing reads as ""'],
  [10, { $contains: { input: field('inputs.in_val.str'), substr: lit('str') } }, 'contains'],
  [0, { $contains: { input: field('inputs.in_val.str'), substr: lit('STR') } }, 'contains is case sensitive'],
  [10, { $contains: { input: field('inputs.in_val.str'), substr: lit('STR'), case_insensitive: true } }, 'contains ci'],
  [
    3,
    { $and: [{ $not: [{ $gt: [conv('inputs.in_val.prim', 'int'), lit(7)] }] }, { $gte: [conv('inputs.in_val.prim', 'int'), lit(5)] }] },
    'and',
  ],
  [
    5,
    { $or: [{ $not: [{ $gt: [conv('inputs.in_val.prim', 'int'), lit(3)] }] }, { $gte: [conv('inputs.in_val.prim', 'int'), lit(9)] }] },
    'or',
  ],
  [0, { $eq: [lit(5), conv('inputs.in_val.str', 'int')] }, 'a failed conversion matches nothing'],
  [1, { $eq: [lit('5'), conv('inputs.in_val.prim', 'string')] }, 'convert to string'],
  [4, { $gt: [conv('inputs.in_val.list.0', 'int'), lit(5)] }, 'list index'],
  [4, { $gt: [conv('inputs.in_val.dict.inner', 'int'), lit(5)] }, 'nested key'],
  [4, { $gt: [conv('output.prim', 'int'), lit(5)] }, 'output path'],
  [4, { $gt: [conv('output.list.0', 'int'), lit(5)] }, 'output list index'],
  [4, { $gt: [conv('output.dict.inner', 'int'), lit(5)] }, 'output nested key'],
  // Further cases of the same semantics (counts worked out by hand from `rows`).
  [3, { $not: [{ $contains: { input: field('inputs.in_val.str'), substr: lit('str') } }] }, 'not contains: missing is "", not NULL'],
  [11, { $and: [{ $convert: { input: field('inputs.in_val.prim'), to: 'exists' } }] }, 'exists (the "Different Type" row too)'],
  [2, { $in: [conv('inputs.in_val.prim', 'int'), [lit(1), lit(2)]] }, 'in'],
  [8, { $not: [{ $in: [conv('inputs.in_val.prim', 'int'), [lit(1), lit(2)]] }] }, 'not in: NULL stays out'],
  [0, { $eq: [field('inputs.in_val.str'), lit(null)] }, 'a missing JSON field is "" and not NULL'],
  [1, { $eq: [field('inputs.in_val.str'), lit('false')] }, 'a JSON boolean reads as its text'],
  [1, { $eq: [conv('inputs.in_val.str', 'bool'), lit(false)] }, 'convert bool'],
  [0, { $eq: [conv('inputs.in_val', 'int'), lit(4.2)] }, 'no such int'],
  [1, { $eq: [conv('inputs.in_val', 'int'), lit(42)] }, 'a number at the path root'],
  [13, { $not: [{ $eq: [field('thread_id'), lit('x')] }] }, 'an absent column compares as "" (not NULL)'],
  [13, { $eq: [field('parent_id'), lit(null)] }, '$eq null on an absent column'],
  [13, { $gt: [field('started_at'), lit(Date.UTC(2025, 0, 1) / 1000)] }, 'a timestamp against unix seconds'],
  [3, { $lt: [field('started_at'), lit(Date.UTC(2026, 0, 1, 0, 0, 3) / 1000)] }, 'lt on a timestamp'],
]

t.test("Weave's query cases on /calls/query and /calls/query_stats", async (t) => {
  const project = 'acme/ql-filter'
  await store(
    project,
    rows.map((r, i) => ({ inputs: { in_val: r.in_val, delay: i / 10 }, output: r.in_val })),
  )
  for (const [want, expr, name] of CASES) {
    const q = await ids(project, { query: { $expr: expr } })
    t.equal(q.status, 200, `${name}: ${q.text.slice(0, 200)}`)
    t.equal(q.ids.length, want, `${name} (query)`)
    t.equal(await count(project, { $expr: expr }), want, `${name} (query_stats)`)
  }
})

t.test('type clashes and bad fields are refused', async (t) => {
  const project = 'acme/ql-filter'
  const bad = async (expr: unknown, status: number) =>
    t.equal((await ids(project, { query: { $expr: expr } })).status, status, JSON.stringify(expr))
  await bad({ $eq: [field('inputs.in_val.prim'), lit(5)] }, 400)
  await bad({ $gt: [conv('inputs.in_val.prim', 'int'), lit('5')] }, 400)
  await bad({ $eq: [field('no_such'), lit('x')] }, 403)
  await bad({ $eq: [field('feedback.nope'), lit('x')] }, 403)
  await bad({ $and: [] }, 400)
  await bad({ $and: [{ $convert: { input: field('inputs.a'), to: 'date' } }] }, 400)
  await bad({ $convert: { input: field('inputs.a'), to: 'exists' } }, 422)
})

t.test("Weave's mixed-type sort: numbers before strings, missing last, both directions", async (t) => {
  const project = 'acme/ql-sort'
  const vals = [{ prim: null }, { not_prim: 1 }, { prim: 100 }, { prim: 2 }, { prim: 'b' }, { prim: 'a' }]
  await store(
    project,
    vals.map((v) => ({ inputs: { in_val: v }, output: v })),
  )
  for (const [direction, seq] of [
    ['desc', [100, 2, 'b', 'a', undefined, undefined]],
    ['asc', [2, 100, 'a', 'b', undefined, undefined]],
  ] as const) {
    const r = await post('/calls/query', { project_id: project, sort_by: [{ field: 'inputs.in_val.prim', direction }] })
    t.same(
      r.json.calls.map((c: any) => c.inputs.in_val.prim ?? undefined),
      seq,
      direction,
    )
  }
})

t.test('feedback fields in call filters and sorts', async (t) => {
  const project = P
  const [a, b, c] = await store(project, [
    { inputs: { n: 1 }, output: 1 },
    { inputs: { n: 2 }, output: 2 },
    { inputs: { n: 3 }, output: 3 },
  ])
  const ref = (id: string) => `weave:///${project}/call/${id}`
  const fb = async (id: string, feedback_type: string, payload: unknown, extra: Record<string, unknown> = {}) => {
    const r = await post('/feedback/create', { project_id: project, weave_ref: ref(id), feedback_type, payload, ...extra })
    t.equal(r.status, 200, r.text)
  }
  await fb(a!, 'wandb.reaction.1', { emoji: '👍' })
  await fb(a!, 'wandb.reaction.1', { emoji: '👎' })
  await fb(b!, 'wandb.reaction.1', { emoji: '👎' })
  await fb(a!, 'score', { output: { score: 0.9 } })
  await fb(b!, 'score', { output: { score: 0.25 } })
  await fb(c!, 'wandb.note.1', { note: 'hi' })

  const emoji = 'feedback.[wandb.reaction.1].payload.emoji'
  const score = 'feedback.[score].payload.output.score'
  const q = (body: Record<string, unknown>) => ids(project, body)
  // Two reactions on `a`: the earliest decides, and the call is counted once.
  t.same((await q({ query: { $expr: { $eq: [field(emoji), lit('👍')] } } })).ids, [a])
  t.equal(await count(project, { $expr: { $eq: [field(emoji), lit('👎')] } }), 1)
  t.same((await q({ query: { $expr: { $gt: [{ $convert: { input: field(score), to: 'double' } }, lit(0.5)] } } })).ids, [a])
  t.same(
    (await q({ query: { $expr: { $not: [{ $gt: [{ $convert: { input: field(score), to: 'double' } }, lit(0.5)] }] } } })).ids,
    [b],
    'no score: NULL, left out under $not too',
  )
  t.same((await q({ query: { $expr: { $eq: [field(score), lit('')] } } })).ids, [c], 'no feedback reads as ""')
  t.same((await q({ sort_by: [{ field: score, direction: 'desc' }] })).ids, [a, b, c])
  t.same((await q({ sort_by: [{ field: score, direction: 'asc' }] })).ids, [b, a, c], 'missing last in both directions')
  t.same(
    (await q({ query: { $expr: { $contains: { input: field('feedback.[*].payload.note'), substr: lit('h') } } } })).ids,
    [c],
    'any feedback type',
  )
  const both = { $and: [{ $eq: [field(emoji), lit('👎')] }, { $gt: [{ $convert: { input: field(score), to: 'double' } }, lit(0.1)] }] }
  const stream = await post('/calls/stream_query', {
    project_id: project,
    query: { $expr: both },
    sort_by: [{ field: score, direction: 'asc' }],
  })
  t.same(
    stream.text
      .split('\n')
      .filter(Boolean)
      .map((l) => JSON.parse(l).id),
    [b],
    'stream_query with a feedback filter and sort',
  )
  // A hostile type is a bound value: it matches nothing and breaks nothing.
  const hostile = `feedback.[x') OR 1=1; DROP TABLE feedback; --].payload.a`
  t.same((await q({ query: { $expr: { $eq: [field(hostile), lit('x')] } } })).ids, [])
  t.equal((await post('/feedback/query', { project_id: project })).json.result.length, 6, 'feedback intact')
})

t.test('feedback queries and cost queries follow the same three-valued logic', async (t) => {
  const project = 'acme/ql-fb'
  const ref = `weave:///${project}/call/${uuid()}`
  for (const n of ['1', '7', 'x'])
    t.equal((await post('/feedback/create', { project_id: project, weave_ref: ref, feedback_type: 't', payload: { n } })).status, 200)
  const fq = async (expr: unknown) =>
    (await post('/feedback/query', { project_id: project, query: { $expr: expr }, fields: ['payload.n'] })).json
  const gt = { $gt: [conv('payload.n', 'double'), lit(5)] }
  t.equal((await fq(gt)).total_count, 1)
  t.equal((await fq({ $not: [gt] })).total_count, 1, "'x' converts to NULL and stays out")
  t.equal((await fq({ $eq: [field('payload.missing'), lit('')] })).total_count, 3, 'missing payload keys read as ""')

  const costs = await post('/cost/create', { project_id: project, costs: { 'm-a': { prompt_token_cost: 1, completion_token_cost: 2 } } })
  t.equal(costs.status, 200, costs.text)
  const cq = async (expr: unknown) => (await post('/cost/query', { project_id: project, query: { $expr: expr } })).json
  t.equal((await cq({ $eq: [field('llm_id'), lit('m-a')] })).results.length, 1)
  t.equal((await cq({ $not: [{ $gt: [conv('llm_id', 'double'), lit(1)] }] })).results.length, 0, 'a NULL conversion stays out under $not')
  t.equal((await cq({ $not: [{ $eq: [field('llm_id'), lit('zz')] }] })).results.length, 1)
})
