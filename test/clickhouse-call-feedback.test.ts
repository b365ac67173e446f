// Feedback on the ClickHouse call routes (`--storage chdb`) answers as on the embedded store: the same calls and the
// same feedback rows go to one server of each kind; include_feedback and feedback fields in filters and sorts
// (`feedback.[type].payload.path`) are compared answer by answer, and checked against values worked out here.
import t from 'tap'
import { bothBackends, chdbAvailable as available } from './helpers/both-backends.js'
import { postJson } from './helpers/server.js'

process.env.WEFT_MODEL ??= 'none'

const P = 'ch-fb/proj'
const BASE = Date.parse('2026-03-07T00:00:00Z')
const uuid = (n: number) => `01900000-0000-7000-8000-${n.toString(16).padStart(12, '0')}`
const fbId = (n: number) => `01900000-0000-7000-9000-${n.toString(16).padStart(12, '0')}`
const N = 12
const HOSTILE = "x') OR 1=1; DROP TABLE feedback; --"
/** Scores of some calls (index → score); a second, later score row on call 0 must not decide. */
const SCORES = new Map([
  [0, 0.9],
  [2, 0.25],
  [3, 0.5],
  [5, 0.75],
  [8, 0.1],
  [11, 0.6],
])
const NOTES = new Map([
  [1, 'hello'],
  [3, HOSTILE],
  [8, 'ship it'],
])

const field = (f: string) => ({ $getField: f })
const lit = (v: unknown) => ({ $literal: v })
const SCORE = 'feedback.[score].payload.output.score'
const asNum = { $convert: { input: field(SCORE), to: 'double' } }

t.test('feedback on the call routes: embedded and ClickHouse agree', { skip: !available && 'chdb not installed' }, async (t) => {
  const { ch, both } = await bothBackends(t)
  const batch = Array.from({ length: N }, (_, i) => {
    const start = { project_id: P, id: uuid(i + 1), trace_id: uuid(100 + i), op_name: 'weave:///ch-fb/proj/op/f:v1' }
    const at = new Date(BASE + i * 1000).toISOString()
    return [
      { mode: 'start', req: { start: { ...start, started_at: at, attributes: {}, inputs: { i } } } },
      { mode: 'end', req: { end: { project_id: P, id: start.id, ended_at: at, output: i, summary: {} } } },
    ]
  }).flat()
  await both('/call/upsert_batch', { batch })
  let n = 0
  const fb = (i: number, feedback_type: string, payload: unknown) =>
    both('/feedback/create', { id: fbId(++n), project_id: P, weave_ref: `weave:///${P}/call/${uuid(i + 1)}`, feedback_type, payload })
  for (const [i, s] of SCORES) await fb(i, 'score', { output: { score: s } })
  await fb(0, 'score', { output: { score: 0.01 } })
  for (const [i, note] of NOTES) await fb(i, 'note', { note })

  const ids = (r: { calls: { id: string }[] }) => r.calls.map((c) => c.id)
  const query = async (label: string, body: Record<string, unknown>, want: string[]) => {
    const { a, b } = await both('/calls/query', { project_id: P, ...body })
    t.same(ids(b), ids(a), `${label}: the same calls in the same order`)
    t.same(ids(b), want, `${label}: as worked out here`)
  }
  const byScore = [...SCORES].sort((x, y) => y[1] - x[1]).map(([i]) => uuid(i + 1))
  const unscored = Array.from({ length: N }, (_, i) => i)
    .filter((i) => !SCORES.has(i))
    .map((i) => uuid(i + 1))
  await query(
    'score > 0.5',
    { query: { $expr: { $gt: [asNum, lit(0.5)] } } },
    [0, 5, 11].map((i) => uuid(i + 1)),
  )
  await query('sorted by score, descending', { sort_by: [{ field: SCORE, direction: 'desc' }] }, [...byScore, ...unscored])
  await query('sorted by score, ascending', { sort_by: [{ field: SCORE, direction: 'asc' }] }, [...byScore.reverse(), ...unscored])
  await query(
    'any type, contains',
    { query: { $expr: { $contains: { input: field('feedback.[*].payload.note'), substr: lit('DROP') } } } },
    [uuid(4)],
  )
  await query('a hostile type matches nothing', { query: { $expr: { $eq: [field(`feedback.[${HOSTILE}].payload.a`), lit('x')] } } }, [])

  const { a, b } = await both('/calls/query', { project_id: P, include_feedback: true })
  const rows = (r: { calls: { summary: { weave?: { feedback?: { id: string; payload: unknown }[] } } }[] }) =>
    r.calls.map((c) => (c.summary.weave?.feedback ?? []).map((f) => ({ id: f.id, payload: f.payload })))
  t.same(rows(b), rows(a), 'include_feedback: the same rows on each call')
  const want = Array.from({ length: N }, (_, i) => [
    ...(SCORES.has(i) ? [{ output: { score: SCORES.get(i) } }] : []),
    ...(i === 0 ? [{ output: { score: 0.01 } }] : []),
    ...(NOTES.has(i) ? [{ note: NOTES.get(i) }] : []),
  ])
  t.same(
    rows(b).map((r) => r.map((f) => f.payload)),
    want,
    'include_feedback: every row about the call, as created',
  )
  const n2 = await postJson(ch, '/feedback/query', { project_id: P })
  t.equal(n2.json.result.length, SCORES.size + 1 + NOTES.size, 'feedback intact on ClickHouse')
})
