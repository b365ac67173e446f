// expand_columns and Arrow answers on the ClickHouse call routes (`--storage chdb`) answer as on the embedded store: the
// same objects and calls go to one server of each kind; expanded values, filters, sorts and counts on expanded fields,
// and Arrow IPC answers are compared answer by answer and with values worked out here. Refs, keys and values are
// hostile strings (quotes, SQL, ClickHouse's `{name:Type}` placeholder syntax).
import t from 'tap'
import { tableFromIPC, type Table } from 'apache-arrow'
import { bothBackends, chdbAvailable as available } from './helpers/both-backends.js'
import { postJson, streamQuery, type TestServer } from './helpers/server.js'

process.env.WEFT_MODEL ??= 'none'

const P = 'ch-exp/proj'
const BASE = Date.parse('2026-03-08T00:00:00Z')
const uuid = (n: number) => `01900000-0000-7000-8000-${n.toString(16).padStart(12, '0')}`
const HOSTILE = "x') OR 1=1; DROP TABLE call_parts; --{p1:String}"
/** Strings that look like refs but are not ones the resolver reads: they stay strings, and must never become SQL. */
const FAKE_REFS = [`weave:///${P}/object/x'); DROP TABLE calls_merged; --:d1`, "weave:///' OR 1=1 --", `weave:///${P}/object/o:{p1:String}`]
/** The expand column, a key with a quote in it. */
const KEY = "it'em"
const F = (rest: string) => `inputs.${KEY}${rest}`
const N = 14
const ITEMS = 6
const item = (i: number) => ({
  label: i === 3 ? HOSTILE : `item ${i}`,
  score: i * 1.5,
  tags: Array.from({ length: i % 3 }, (_, k) => `t${k}`),
})
/** Call i holds item i % ITEMS as a ref, except: every 5th holds the value inline, and calls 11-13 hold a fake ref. */
const inline = (i: number) => i % 5 === 4
const fake = (i: number) => i >= 11

const field = (f: string) => ({ $getField: f })
const lit = (v: unknown) => ({ $literal: v })
const num = (f: string) => ({ $convert: { input: field(f), to: 'double' } })

t.test('expand_columns and Arrow answers: embedded and ClickHouse agree', { skip: !available && 'chdb not installed' }, async (t) => {
  const { emb, ch, both: each } = await bothBackends(t)
  const both = async (route: string, body: unknown) => {
    const { a, b } = await each(route, body)
    t.same(b, a, `${route}: the same answer`)
    return b
  }

  // Inner objects, items pointing at them, calls pointing at items: digests are content hashes, so the refs are the same on both.
  const refs: string[] = []
  for (let i = 0; i < ITEMS; i++) {
    const inner = await both('/obj/create', { obj: { project_id: P, object_id: `inner${i}`, val: { deep: i % 2 ? 'odd' : 'even' } } })
    const innerRef = `weave:///${P}/object/inner${i}:${inner.digest}`
    const r = await both('/obj/create', { obj: { project_id: P, object_id: `item${i}`, val: { ...item(i), inner: innerRef } } })
    refs.push(`weave:///${P}/object/item${i}:${r.digest}`)
  }
  const holds = (i: number) => (fake(i) ? FAKE_REFS[i - 11]! : inline(i) ? item(i % ITEMS) : refs[i % ITEMS]!)
  const batch = Array.from({ length: N }, (_, i) => {
    const id = uuid(i + 1)
    const at = new Date(BASE + i * 1000).toISOString()
    const start = { project_id: P, id, trace_id: uuid(100 + i), op_name: `weave:///${P}/op/f:v1`, started_at: at, attributes: {} }
    return [
      { mode: 'start', req: { start: { ...start, inputs: { [KEY]: holds(i), n: i } } } },
      {
        mode: 'end',
        req: { end: { project_id: P, id, ended_at: new Date(BASE + i * 1000 + 7 * i).toISOString(), output: holds(i), summary: {} } },
      },
    ]
  }).flat()
  await both('/call/upsert_batch', { batch })

  // What each call's item reads as, worked out here: the item's fields, or nothing for a fake ref.
  const itemOf = (i: number): ReturnType<typeof item> | null => (fake(i) ? null : item(i % ITEMS))
  const all = Array.from({ length: N }, (_, i) => i)
  const ids = (r: { calls: { id: string }[] }) => r.calls.map((c) => c.id)
  const want = (is: number[]) => is.map((i) => uuid(i + 1))
  const query = async (label: string, body: Record<string, unknown>, expected: number[]) => {
    const got = await both('/calls/query', { project_id: P, ...body })
    t.same(ids(got), want(expected), `${label}: as worked out here`)
    const count = await both('/calls/query_stats', { project_id: P, query: body.query, expand_columns: body.expand_columns })
    t.equal(count.count, expected.length, `${label}: counted`)
  }
  const cols = [`inputs.${KEY}`]
  await query('a hostile label', { expand_columns: cols, query: { $expr: { $eq: [field(F('.label')), lit(HOSTILE)] } } }, [3, 9])
  await query(
    'score > 3',
    { expand_columns: cols, query: { $expr: { $gt: [num(F('.score')), lit(3)] } } },
    all.filter((i) => (itemOf(i)?.score ?? 0) > 3),
  )
  await query(
    'contains, case-insensitive',
    { expand_columns: cols, query: { $expr: { $contains: { input: field(F('.label')), substr: lit('drop'), case_insensitive: true } } } },
    [3, 9],
  )
  await query(
    'the size of an expanded array',
    { expand_columns: cols, query: { $expr: { $eq: [{ $size: field(F('.tags')) }, lit(2)] } } },
    all.filter((i) => itemOf(i)?.tags.length === 2),
  )
  await query(
    'two refs deep',
    { expand_columns: [...cols, `inputs.${KEY}.inner`], query: { $expr: { $eq: [field(F('.inner.deep')), lit('odd')] } } },
    all.filter((i) => !fake(i) && !inline(i) && (i % ITEMS) % 2 === 1),
  )
  await query(
    'a whole output that is a ref',
    { expand_columns: ['output'], query: { $expr: { $eq: [field('output.label'), lit('item 1')] } } },
    all.filter((i) => itemOf(i)?.label === 'item 1'),
  )
  await query(
    'no refs at the path (empty bound arrays)',
    { expand_columns: ['inputs.n'], query: { $expr: { $eq: [field('inputs.n.x'), lit('')] } } },
    all,
  )
  await query(
    'a fake ref is a plain string',
    { expand_columns: cols, query: { $expr: { $eq: [field(`inputs.${KEY}`), lit(FAKE_REFS[0])] } } },
    [11],
  )
  const score = (i: number) => itemOf(i)?.score ?? null
  for (const direction of ['asc', 'desc'] as const) {
    const byScore = all
      .filter((i) => score(i) !== null)
      .sort((x, y) => (direction === 'asc' ? score(x)! - score(y)! : score(y)! - score(x)!) || (uuid(x + 1) < uuid(y + 1) ? -1 : 1))
    await query(`sorted by score, ${direction}; missing last`, { expand_columns: cols, sort_by: [{ field: F('.score'), direction }] }, [
      ...byScore,
      ...all.filter((i) => score(i) === null),
    ])
  }

  // Returned values: the whole answers are compared by `both`; here, what they hold.
  const expanded = await both('/calls/query', { project_id: P, expand_columns: [...cols, `inputs.${KEY}.inner`, 'output'] })
  const c0 = expanded.calls[0]
  t.same(c0.inputs[KEY], { ...item(0), inner: { deep: 'even', _ref: c0.inputs[KEY].inner._ref }, _ref: refs[0] }, 'expanded, nested')
  t.same(
    expanded.calls.slice(11).map((c: any) => c.inputs[KEY]),
    FAKE_REFS,
    'fake refs stay strings',
  )
  const [se, sc] = await Promise.all([emb, ch].map((s) => streamQuery(s, { project_id: P, expand_columns: cols })))
  t.same(sc, se, 'stream_query expands the same way')

  // Arrow answers: the same schema (names, types) and values.
  const arrow = async (s: TestServer, body: unknown): Promise<Table> => {
    const r = await fetch(s.url + '/calls/stream_query', {
      method: 'POST',
      headers: { ...s.basic(), 'content-type': 'application/json', accept: 'application/vnd.apache.arrow.stream' },
      body: JSON.stringify(body),
    })
    t.equal(r.status, 200)
    return tableFromIPC(new Uint8Array(await r.arrayBuffer()))
  }
  const asJson = (table: Table) => {
    const rows = table.toArray().map((r) => r.toJSON())
    return JSON.parse(
      JSON.stringify(rows, (k, v) =>
        typeof v === 'bigint'
          ? v.toString()
          : ['inputs', 'output', 'summary', 'attributes'].includes(k) && typeof v === 'string'
            ? JSON.parse(v)
            : v,
      ),
    )
  }
  for (const body of [
    { project_id: P },
    { project_id: P, columns: ['inputs', 'summary'], sort_by: [{ field: 'inputs.n', direction: 'desc' }], limit: 5, offset: 2 },
    { project_id: P, query: { $expr: { $eq: [field(`inputs.${KEY}`), lit(FAKE_REFS[2])] } } },
  ]) {
    const [a, b] = await Promise.all([arrow(emb, body), arrow(ch, body)])
    t.same(
      b.schema.fields.map((f) => `${f.name}: ${f.type}`),
      a.schema.fields.map((f) => `${f.name}: ${f.type}`),
      'Arrow: the same columns and types',
    )
    t.same(asJson(b), asJson(a), `Arrow: the same values (${b.numRows} rows)`)
    const json = await streamQuery(ch, body)
    t.same(
      b.getChild('id')!.toArray(),
      json.map((c) => c.id),
      'Arrow: the calls of the JSON answer, in order',
    )
  }
  t.equal((await postJson(ch, '/calls/query_stats', { project_id: P })).json.count, N, 'every call still there')
})
