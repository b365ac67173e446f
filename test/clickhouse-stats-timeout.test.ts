// --query-timeout-ms for statistics and usage on ClickHouse: ClickHouse itself stops a query past the
// limit (max_execution_time) and the answer is the embedded store's 504, word for word; with time
// enough the same requests answer. Runs on chdb, in-process, over the backend's real tables.
import { rm } from 'node:fs/promises'
import path from 'node:path'
import t from 'tap'
import { endPart, startPart } from '../src/calls/ingest/parts.js'
import type { CallPart } from '../src/calls/model.js'
import { DomainError } from '../src/core/errors.js'
import { ClickHouseCalls } from '../src/clickhouse/calls.js'
import { ChdbExecutor, chdbResolvable } from '../src/clickhouse/chdb-executor.js'
import { clickHouseAnalytics } from '../src/clickhouse/stats-engines.js'
import { ROOT, tempDir } from './helpers/server.js'

const FROM = [ROOT, path.join(ROOT, 'bench', 'peer-deps')].map((d) => path.join(d, 'package.json'))
const available = chdbResolvable(FROM)
const dir = tempDir('weft-ch-stats-timeout-')
t.teardown(() => rm(dir, { recursive: true, force: true }))

t.test('statistics and usage past --query-timeout-ms: 504; within it: answers', { skip: !available && 'chdb not installed' }, async (t) => {
  const exec = await ChdbExecutor.open({ path: dir, resolveFrom: FROM })
  t.teardown(() => exec.close())
  const P = 'acme/stats-timeout'
  const layout = { database: 'weft_stats_timeout' }
  const calls = await ClickHouseCalls.open(exec, layout)
  const base = Date.UTC(2026, 0, 1)
  const parts: CallPart[] = []
  for (let i = 0; i < 4000; i++) {
    const id = i.toString(16).padStart(16, '0')
    const started_at = new Date(base + i * 1000).toISOString()
    parts.push(
      startPart(
        {
          project_id: P,
          id,
          trace_id: (i % 40).toString(16).padStart(32, '0'),
          op_name: 'op',
          started_at,
          attributes: {},
          inputs: { text: 'lorem '.repeat(80) },
        },
        'u',
      ),
      endPart({
        project_id: P,
        id,
        ended_at: new Date(base + i * 1000 + i).toISOString(),
        summary: { usage: { m: { prompt_tokens: i } } },
      }),
    )
  }
  await calls.ingest(parts)
  // Wildcard op names: each call's op name is tested against all of them, enough work to pass 1 ms.
  const filter = { op_names: Array.from({ length: 20 }, (_, k) => `weave:///acme/op/o${k}-${'x'.repeat(40)}:*`).concat(['op']) }
  const req = {
    project_id: P,
    start: new Date(base).toISOString(),
    end: new Date(base + 4000_000).toISOString(),
    granularity: 60,
    call_metrics: [{ metric: 'latency_ms' as const, aggregations: ['sum' as const], percentiles: [50] }],
    usage_metrics: [{ metric: 'input_tokens' as const, aggregations: ['sum' as const] }],
    filter,
  }

  const patient = clickHouseAnalytics(exec, { ...layout, queryTimeoutMs: 120_000 })
  const ok = await patient.stats.run(req)
  const buckets = ok.result.call_buckets as { count: number }[]
  t.equal(
    buckets.reduce((a, b) => a + b.count, 0),
    4000,
    'with time enough: every call counted',
  )
  const usage = await patient.usage.traces(P, filter, null, false, 10_000)
  t.equal(Object.keys(usage.call_usage).length, 4000, 'and /trace/usage answers')

  const hasty = clickHouseAnalytics(exec, { ...layout, queryTimeoutMs: 1 })
  const expect504 = async (what: string, run: () => Promise<unknown>) => {
    const e = await run().then(
      () => null,
      (x: unknown) => x,
    )
    t.ok(e instanceof DomainError && e.status === 504, `${what}: 504 (${String((e as Error | null)?.message).slice(0, 100)})`)
    t.match((e as Error | null)?.message, /longer than 1 ms/, `${what}: the embedded store's message`)
  }
  await expect504('/calls/stats', () => hasty.stats.run(req))
  await expect504('/trace/usage', () => hasty.usage.traces(P, filter, null, false, 10_000))
  await expect504('/calls/usage', () => hasty.usage.calls(P, ['0'.repeat(16)], false, 10_000))
  t.equal(((await patient.stats.run(req)).result.call_buckets as unknown[]).length, buckets.length, 'ClickHouse goes on serving')
})
