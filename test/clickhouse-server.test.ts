// The server on the ClickHouse backend (`--storage chdb`): /version and /admin/stats name it, the call
// routes run on it (update, delete with descendants, expand_columns, Arrow answers), and the embedded
// DuckDB store is not opened at all. The existing call suites run on it
// with WEFT_STORAGE=chdb (test/helpers/server.ts).
import { existsSync } from 'node:fs'
import path from 'node:path'
import t from 'tap'
import { chdbResolvable } from '../src/clickhouse/chdb-executor.js'
import { ROOT, postJson, requestJson, startServer, streamQuery, type TestServer } from './helpers/server.js'

const available = chdbResolvable([ROOT, path.join(ROOT, 'bench', 'peer-deps')].map((d) => path.join(d, 'package.json')))
if (!available) t.comment('chdb is not installed (npm --prefix bench/peer-deps install): ClickHouse server tests skipped')

const P = 'ch-srv/proj'
const hex = (n: number) => Array.from({ length: n }, () => Math.floor(Math.random() * 16).toString(16)).join('')

t.test('/version names the embedded backend by default', async (t) => {
  const s = await startServer({ args: ['--model', 'none'], env: { WEFT_STORAGE: '' } })
  t.teardown(() => s.stop())
  const v = await requestJson(s, 'GET', '/version')
  t.same(v.json.storage, { backend: 'embedded' })
  t.ok(existsSync(path.join(s.dataDir, 'calls')), 'the embedded store is opened')
})

t.test(
  '--clickhouse-insert-settings: inserts run with them; a setting ClickHouse does not know stops the start',
  { skip: !available && 'chdb not installed' },
  async (t) => {
    const s = await startServer({
      args: ['--model', 'none', '--storage', 'chdb', '--clickhouse-insert-settings', 'async_insert=1,wait_for_async_insert=1'],
    })
    t.teardown(() => s.stop())
    const id = hex(16)
    const start = { project_id: P, id, trace_id: hex(32), op_name: 'op', started_at: new Date().toISOString(), inputs: {}, attributes: {} }
    t.equal((await postJson(s, '/call/start', { start })).status, 200)
    t.equal((await postJson(s, '/call/read', { project_id: P, id })).json.call.id, id, 'acknowledged, then read back')
    // A server that starts anyway is stopped, so a regression fails here instead of hanging the file.
    const refused = await startServer({
      args: ['--model', 'none', '--storage', 'chdb', '--clickhouse-insert-settings', 'no_such_setting_here=1'],
    })
      .then(async (x) => (await x.stop(), 'started'))
      .catch((e: Error) => e.message)
    t.match(refused, /no_such_setting_here/, 'the refusal names the setting')
  },
)

t.test('on chdb', { skip: !available && 'chdb not installed' }, async (t) => {
  const s = await startServer({ args: ['--model', 'none', '--storage', 'chdb'] })
  t.teardown(() => s.stop())

  await t.test('/version and /admin/stats name the backend and its version', async (t) => {
    const v = await requestJson(s, 'GET', '/version')
    t.equal(v.json.storage.backend, 'chdb')
    t.match(v.json.storage.clickhouse_version, /^\d+\.\d+\.\d+/)
    const a = await requestJson(s, 'GET', '/admin/stats')
    t.same(a.json.storage, v.json.storage)
    t.equal(a.json.calls, null, 'no embedded store state')
    t.ok(existsSync(path.join(s.dataDir, 'chdb')), 'chdb keeps its data under the data directory by default')
    t.notOk(existsSync(path.join(s.dataDir, 'calls')), 'the embedded calls store is not opened')
  })

  await t.test('update and delete with descendants run on ClickHouse', async (t) => {
    const trace = hex(32)
    const [root, child, grandchild, other] = [hex(16), hex(16), hex(16), hex(16)]
    const start = (id: string, parent: string | null, i: number) => ({
      start: {
        project_id: P,
        id,
        trace_id: trace,
        parent_id: parent,
        op_name: 'op',
        started_at: new Date(Date.UTC(2026, 0, 1, 0, 0, i)).toISOString(),
        inputs: {},
        attributes: {},
      },
    })
    const batch = [start(root, null, 0), start(child, root, 1), start(grandchild, child, 2), start(other, null, 3)].map((req) => ({
      mode: 'start',
      req,
    }))
    t.equal((await postJson(s, '/call/upsert_batch', { batch })).status, 200)

    t.equal((await postJson(s, '/call/update', { project_id: P, call_id: child, display_name: 'Named' })).status, 200)
    t.equal((await postJson(s, '/call/read', { project_id: P, id: child })).json.call.display_name, 'Named')
    t.equal((await postJson(s, '/call/update', { project_id: P, call_id: hex(16), display_name: 'x' })).status, 404, 'unknown call')

    const del = await postJson(s, '/calls/delete', { project_id: P, call_ids: [root] })
    t.same([del.status, del.json.num_deleted], [200, 3], 'the root, its child and grandchild')
    t.same(
      (await streamQuery(s, { project_id: P })).map((c) => c.id),
      [other],
    )
    t.equal((await postJson(s, '/calls/query_stats', { project_id: P })).json.count, 1)
    t.equal((await postJson(s, '/call/read', { project_id: P, id: grandchild })).json.call, null)
  })

  await t.test('what the backend serves: every call-route feature, none answered from DuckDB', async (t) => {
    // Statistics, costs, storage sizes and objects are served on ClickHouse now (test/clickhouse-stats.test.ts,
    // test/clickhouse-objects.test.ts compare them with the embedded backend).
    t.equal(
      (await postJson(s, '/calls/stats', { project_id: P, start: new Date(Date.now() - 3_600_000).toISOString() })).status,
      200,
      'statistics',
    )
    t.equal((await postJson(s, '/calls/query', { project_id: P, include_costs: true })).status, 200, 'costs')
    const size = await postJson(s, '/calls/query_stats', { project_id: P, include_total_storage_size: true })
    t.equal(size.status, 200, 'storage size')
    t.type(size.json.total_storage_size_bytes, 'number', 'storage size')
    // Evaluation runs and include_feedback are served too (test/on-chdb-v2.test.ts, test/clickhouse-call-feedback.test.ts).
    const run = await postJson(s, '/v2/e/p/evaluation_runs', {
      evaluation: 'weave:///e/p/object/x:abc',
      model: 'weave:///e/p/object/m:abc',
    })
    t.equal(run.status, 200, 'evaluation runs')
    t.equal((await postJson(s, '/calls/query', { project_id: P, include_feedback: true })).status, 200, 'include_feedback')
    // expand_columns and Arrow answers too (test/clickhouse-call-expand.test.ts compares them with the embedded backend).
    t.equal((await postJson(s, '/calls/query', { project_id: P, expand_columns: ['inputs.x'] })).status, 200, 'expand_columns')
    const arrow = await fetch(s.url + '/calls/stream_query', {
      method: 'POST',
      headers: { ...s.basic(), 'content-type': 'application/json', accept: 'application/vnd.apache.arrow.stream' },
      body: JSON.stringify({ project_id: P }),
    })
    t.equal(arrow.status, 200, 'Arrow')
    t.equal(arrow.headers.get('content-type'), 'application/vnd.apache.arrow.stream', 'Arrow')
    await arrow.arrayBuffer()
  })
})
