import t from 'tap'
import { postJson, requestJson, startServer, type TestServer } from './helpers/server.js'
import { hex } from './helpers/ids.js'

// No chat in this file: its servers start without the built-in model (about 1 s of CPU less per start).
process.env.WEFT_MODEL ??= 'none'

/**
 * Injection payloads in every string a query reaches (call filters, $expr operands and field paths, sort keys,
 * columns, object filters, table queries, feedback and cost queries, refs, /v2 query parameters): each request
 * answers without a 5xx, reads nothing that does not match (payloads match no stored value) or that is not the
 * project's, and every project's data is identical before and after.
 */

const PAYLOADS = [
  "'; DROP TABLE objects; --",
  "' OR 1=1 --",
  "x' OR '1'='1",
  "\\'",
  "\\'; DELETE FROM feedback; --",
  '\u2019 OR \u20191\u2019=\u20191', // ’ OR ’1’=’1
  '\u02bc OR 1=1 --', // modifier-letter apostrophe
  '" OR ""="',
  '$1',
  '%',
  '_',
  '*/ SELECT 1 /*',
  "')) UNION SELECT * FROM api_keys --",
  'a\u0000b',
]

const P = 'acme/sqli'
const VICTIM = 'victim/data'
let s: TestServer
const ids: string[] = []
let table: { digest: string; row_digests: string[] }

t.before(async () => {
  s = await startServer()
  for (const project of [P, VICTIM]) {
    for (let i = 0; i < 3; i++) {
      const id = hex(16)
      if (project === P) ids.push(id)
      const start = {
        project_id: project,
        id,
        trace_id: hex(32),
        op_name: `op${i}`,
        started_at: new Date().toISOString(),
        attributes: {},
        inputs: { q: `v${i}` },
      }
      await must(postJson(s, '/call/start', { start }))
      await must(postJson(s, '/call/end', { end: { project_id: project, id, ended_at: new Date().toISOString(), summary: {}, output: i } }))
    }
    await must(postJson(s, '/obj/create', { obj: { project_id: project, object_id: 'obj', val: { a: 1 } } }))
    const weave_ref = `weave:///${project}/call/${project === P ? ids[0] : hex(16)}`
    await must(postJson(s, '/feedback/create', { project_id: project, weave_ref, feedback_type: 'wandb.note.1', payload: { note: 'n' } }))
    await must(postJson(s, '/cost/create', { project_id: project, costs: { m: { prompt_token_cost: 1, completion_token_cost: 1 } } }))
    const tb = (await must(postJson(s, '/table/create', { table: { project_id: project, rows: [{ r: 1 }, { r: 2 }] } }))).json
    if (project === P) table = tb
  }
})
t.teardown(() => s?.stop())

async function must<T extends { status: number; text: string }>(p: Promise<T>): Promise<T> {
  const r = await p
  if (r.status !== 200) throw new Error(`${r.status} ${r.text}`)
  return r
}

async function snapshot(): Promise<string> {
  const out: string[] = []
  for (const project of [P, VICTIM]) {
    for (const [path, body] of [
      ['/calls/query', { project_id: project, sort_by: [{ field: 'id', direction: 'asc' }] }],
      ['/objs/query', { project_id: project }],
      ['/feedback/query', { project_id: project, sort_by: [{ field: 'id', direction: 'asc' }] }],
      ['/cost/query', { project_id: project }],
      ['/table/query_stats_batch', { project_id: project }],
    ] as const)
      out.push((await postJson(s, path, body)).text)
  }
  out.push((await requestJson(s, 'GET', '/admin/keys')).text)
  return out.join('\n')
}

const expr = (e: unknown) => ({ $expr: e })
const field = (f: string) => ({ $getField: f })
const lit = (v: string) => ({ $literal: v })

/** Requests with the payload where a user string goes; `rows` picks what the answer lists, `filters` says it must be empty. */
function sites(x: string): { name: string; path: string; body: unknown; rows: (j: any) => any[]; filters: boolean }[] {
  const calls = (name: string, body: Record<string, unknown>, filters = true) => ({
    name: `calls ${name}`,
    path: '/calls/query',
    body: { project_id: P, ...body },
    rows: (j: any) => j.calls,
    filters,
  })
  const filterKeys = [
    'op_names',
    'call_ids',
    'trace_ids',
    'parent_ids',
    'input_refs',
    'output_refs',
    'thread_ids',
    'wb_user_ids',
    'wb_run_ids',
  ]
  return [
    ...filterKeys.map((k) => calls(`filter.${k}`, { filter: { [k]: [x] } })),
    calls('$eq op_name', { query: expr({ $eq: [field('op_name'), lit(x)] }) }),
    calls('$eq inputs.<x>', { query: expr({ $eq: [field(`inputs.${x}`), lit('v0')] }) }),
    calls('$getField <x>', { query: expr({ $eq: [field(x), lit(x)] }) }),
    calls('$contains', { query: expr({ $contains: { input: field('inputs.q'), substr: lit(x) } }) }),
    calls('$in', { query: expr({ $in: [field('id'), [lit(x), lit(x + x)]] }) }),
    calls('$gt on a path', { query: expr({ $gt: [field(`output.${x}`), lit(x)] }) }),
    calls('feedback field', { include_feedback: true, query: expr({ $eq: [field(`feedback.[wandb.note.1].payload.${x}`), lit(x)] }) }),
    calls('sort_by <x>', { sort_by: [{ field: x, direction: 'asc' }] }, false),
    calls('sort_by inputs.<x>', { sort_by: [{ field: `inputs.${x}`, direction: 'desc' }] }, false),
    calls('columns', { columns: [x, `inputs.${x}`] }, false),
    calls('expand_columns', { expand_columns: [`inputs.${x}`] }, false),
    {
      name: 'objs object_ids',
      path: '/objs/query',
      body: { project_id: P, filter: { object_ids: [x] } },
      rows: (j) => j.objs,
      filters: true,
    },
    {
      name: 'objs classes',
      path: '/objs/query',
      body: { project_id: P, filter: { base_object_classes: [x] } },
      rows: (j) => j.objs,
      filters: true,
    },
    {
      name: 'objs sort',
      path: '/objs/query',
      body: { project_id: P, sort_by: [{ field: x, direction: 'asc' }] },
      rows: (j) => j.objs,
      filters: false,
    },
    {
      name: 'obj/read id',
      path: '/obj/read',
      body: { project_id: P, object_id: x, digest: 'latest' },
      rows: (j) => [j.obj],
      filters: true,
    },
    {
      name: 'obj/read digest',
      path: '/obj/read',
      body: { project_id: P, object_id: 'obj', digest: x },
      rows: (j) => [j.obj],
      filters: true,
    },
    { name: 'table digest', path: '/table/query', body: { project_id: P, digest: x }, rows: (j) => j.rows, filters: true },
    {
      name: 'table row_digests',
      path: '/table/query',
      body: { project_id: P, digest: table.digest, filter: { row_digests: [x] } },
      rows: (j) => j.rows,
      filters: true,
    },
    {
      name: 'table sort',
      path: '/table/query',
      body: { project_id: P, digest: table.digest, sort_by: [{ field: x, direction: 'asc' }] },
      rows: (j) => j.rows,
      filters: false,
    },
    {
      name: 'feedback $expr',
      path: '/feedback/query',
      body: { project_id: P, query: expr({ $eq: [field('feedback_type'), lit(x)] }) },
      rows: (j) => j.result,
      filters: true,
    },
    {
      name: 'feedback fields',
      path: '/feedback/query',
      body: { project_id: P, fields: [x, `payload.${x}`] },
      rows: (j) => j.result,
      filters: false,
    },
    {
      name: 'cost $expr',
      path: '/cost/query',
      body: { project_id: P, query: expr({ $eq: [field('llm_id'), lit(x)] }) },
      rows: (j) => j.results,
      filters: true,
    },
    { name: 'cost fields', path: '/cost/query', body: { project_id: P, fields: [x] }, rows: (j) => j.results, filters: false },
    {
      name: 'refs',
      path: '/refs/read_batch',
      body: { refs: [`weave:///${P}/object/${x}:${x}`, `weave:///${P}/object/obj:${x}/attr/${x}`] },
      rows: (j) => j.vals,
      filters: true,
    },
    {
      name: 'stats op_names',
      path: '/calls/stats',
      body: {
        project_id: P,
        start: new Date(Date.now() - 3600_000).toISOString(),
        filter: { op_names: [x] },
        call_metrics: [{ metric: 'call_count' }],
      },
      rows: () => [],
      filters: true,
    },
    {
      name: 'usage ids',
      path: '/calls/usage',
      body: { project_id: P, call_ids: [x] },
      rows: (j) => Object.keys(j.call_usage ?? {}),
      filters: false,
    },
  ]
}

t.test('injection payloads read nothing else and change nothing', async (t) => {
  const before = await snapshot()
  let sent = 0
  const statuses = new Map<number, number>()
  for (const x of PAYLOADS) {
    for (const site of sites(x)) {
      const r = await postJson(s, site.path, site.body)
      sent++
      statuses.set(r.status, (statuses.get(r.status) ?? 0) + 1)
      if (r.status >= 500) t.fail(`${site.name} ${JSON.stringify(x)}: ${r.status} ${r.text.slice(0, 200)}`)
      t.notMatch(r.text, /victim\/data/, `${site.name} ${JSON.stringify(x)}: nothing of another project`)
      if (r.status !== 200 || !r.json) continue
      const rows = (site.rows(r.json) ?? []).filter((v: unknown) => v !== null)
      if (site.filters) t.same(rows, [], `${site.name} ${JSON.stringify(x)}: matches nothing`)
      else t.ok(rows.length <= 3, `${site.name} ${JSON.stringify(x)}: only the project's rows (${rows.length})`)
    }
    // /v2 query parameters and path segments.
    for (const path of [
      `/v2/${P}/evaluation_runs?evaluation_run_ids=${encodeURIComponent(x)}`,
      `/v2/${P}/predictions/${encodeURIComponent(x)}`,
      `/v2/${P}/ops/${encodeURIComponent(x)}/versions/${encodeURIComponent(x)}`,
    ]) {
      const r = await requestJson(s, 'GET', path)
      sent++
      t.ok(r.status < 500, `GET ${path}: ${r.status}`)
      t.notMatch(r.text, /victim\/data/)
    }
  }
  t.comment(`${sent} requests; statuses ${JSON.stringify(Object.fromEntries(statuses))}`)
  t.equal(await snapshot(), before, 'every project’s data, and the keys, are unchanged')
  const q = await postJson(s, '/calls/query', { project_id: P, filter: { call_ids: ids } })
  t.equal(q.json.calls.length, 3, 'the calls are all there')
})
