import t from 'tap'
import { randomUUID } from 'node:crypto'
import { requestJson, startServer, streamQuery, type TestServer } from './helpers/server.js'

/**
 * The slow-read log (WEFT_SLOW_QUERY_MS, docs/calls-and-storage.md): with a threshold of 0 every read statement is
 * logged with its time and SQL text, and that text carries none of the request's values — the project, op names,
 * filter strings, ids and JSON paths a client sent are bound parameters. Unset, nothing is logged.
 */

const P = 'slowlog/proj-' + randomUUID().slice(0, 8)
const SECRET = 'hunter2-' + randomUUID()
const OP = `weave:///${P}/op/secret_op_${randomUUID().slice(0, 6)}:v1`

async function load(s: TestServer): Promise<string[]> {
  const ids = [randomUUID(), randomUUID(), randomUUID()]
  const now = Date.now()
  const batch = ids.map((id, i) => ({
    mode: 'start',
    req: {
      start: {
        project_id: P,
        id,
        trace_id: id,
        op_name: OP,
        started_at: new Date(now - 1000 * i).toISOString(),
        attributes: {},
        inputs: { q: SECRET },
      },
    },
  }))
  const r = await requestJson(s, 'POST', '/call/upsert_batch', { batch })
  if (r.status !== 200) throw new Error(r.text)
  return ids
}

/** Reads of several shapes: a page by op and input value, a call by id, a count, an hour of statistics. */
async function read(s: TestServer, ids: string[]): Promise<void> {
  const page = await streamQuery(s, {
    project_id: P,
    filter: { op_names: [OP] },
    query: { $expr: { $eq: [{ $getField: 'inputs.q' }, { $literal: SECRET }] } },
    sort_by: [{ field: 'started_at', direction: 'desc' }],
    limit: 10,
  })
  if (page.length !== 3) throw new Error(`page: ${page.length} calls`)
  const one = await requestJson(s, 'POST', '/call/read', { project_id: P, id: ids[0] })
  if (one.status !== 200) throw new Error(one.text)
  const count = await requestJson(s, 'POST', '/calls/query_stats', { project_id: P, filter: { call_ids: ids } })
  if (count.status !== 200 || (count.json as { count: number }).count !== 3) throw new Error(count.text)
  const stats = await requestJson(s, 'POST', '/calls/stats', {
    project_id: P,
    start: new Date(Date.now() - 3_600_000).toISOString(),
    filter: { op_names: [OP] },
    call_metrics: [{ metric: 'call_count' }],
  })
  if (stats.status !== 200) throw new Error(stats.text)
}

const slowLines = (out: string) => out.split('\n').filter((l) => l.includes('"msg":"slow read"'))
const settle = () => new Promise((r) => setTimeout(r, 600)) // the logger flushes at least every 250 ms

t.test('every read logged at 0 ms, with its SQL and none of the request values', async (t) => {
  const s = await startServer({ env: { WEFT_SLOW_QUERY_MS: '0' } })
  t.teardown(() => s.stop())
  const ids = await load(s)
  await read(s, ids)
  await settle()
  const lines = slowLines(s.output())
  t.ok(lines.length >= 4, `read statements logged (${lines.length})`)
  const parsed = lines.map((l) => JSON.parse(l) as { ms: number; sql: string; level: number })
  t.ok(
    parsed.every((l) => typeof l.ms === 'number' && l.ms >= 0 && /\bSELECT\b/.test(l.sql)),
    'each line has its time and statement',
  )
  t.ok(
    parsed.every((l) => l.level === 40),
    'at warn',
  )
  for (const [name, value] of [
    ['project', P],
    ['op name', OP],
    ['filter value', SECRET],
    ['JSON path', 'inputs.q'],
    ['call id', ids[0]!],
    ['API key', s.key],
  ] as const) {
    t.notOk(
      lines.some((l) => l.includes(value)),
      `no ${name} in the log`,
    )
  }
})

t.test('unset: no read is logged', async (t) => {
  const s = await startServer({ env: { WEFT_SLOW_QUERY_MS: '' } })
  t.teardown(() => s.stop())
  await read(s, await load(s))
  await settle()
  t.equal(slowLines(s.output()).length, 0)
})
