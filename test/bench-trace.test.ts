import t from 'tap'
import { readFileSync, readdirSync, rmSync } from 'node:fs'
import path from 'node:path'
import { postJson, runCli, startServer, tempDir, type TestServer } from './helpers/server.js'

// `weft bench trace` run from the built CLI against a real weft: what it says the server acknowledged must be
// what the server holds afterwards, counted by the server itself.

let s: TestServer
t.before(async () => {
  s = await startServer({ args: ['--model', 'none'] })
})
t.teardown(() => s?.stop())

t.test('ingest for ~3 s with reads alongside: the acknowledged calls are the calls held', async (t) => {
  const dir = tempDir('weft-bench-trace-')
  t.teardown(() => rmSync(dir, { recursive: true, force: true }))
  const project = 'acme/bench-ingest'
  const t0 = performance.now()
  const r = await runCli(
    [
      ...['bench', 'trace', '--base-url', s.url, '--project', project, '--duration', '3', '--batch-size', '50'],
      ...['--connections', '2', '--payload-bytes', '200', '--query-interval', '0.5', '--result-dir', dir],
    ],
    { WEFT_API_KEY: s.key },
  )
  const wall = (performance.now() - t0) / 1000
  t.equal(r.code, 0, r.stderr)
  const result = JSON.parse(
    readFileSync(
      path.join(
        dir,
        readdirSync(dir).find((f) => f.endsWith('.json'))!,
      ),
      'utf8',
    ),
  )
  const held = await postJson(s, '/calls/query_stats', { project_id: project })
  t.ok(result.acknowledged_calls > 0, `calls acknowledged (${result.acknowledged_calls})`)
  t.equal(result.acknowledged_calls, held.json.count, 'acknowledged = the calls the server holds')
  t.equal(result.acknowledged_calls % 50, 0, 'whole batches')
  t.equal(result.ingest.requests * 50, result.acknowledged_calls + result.ingest.errors * 50, 'each batch answered or failed')
  t.equal(result.ingest.errors, 0)
  t.ok(result.duration >= 3 && result.duration < wall, `ran ~3 s (${result.duration.toFixed(2)} s)`)
  t.ok(Math.abs(result.acknowledged_calls_per_s - result.acknowledged_calls / result.duration) < 1e-6, 'calls/s = calls / duration')
  t.ok(result.stream_query.requests >= 2 && result.stream_query.errors === 0, 'pages read while ingesting')
  t.ok(result.stats.requests >= 2 && result.stats.errors === 0, '/calls/stats asked while ingesting')
  t.ok(result.ingest.p99_ms >= result.ingest.median_ms && result.ingest.median_ms > 0, 'latency percentiles')
  t.type(result.event_loop_delay_ms?.p99, 'number', "weft's event-loop delay from /admin/stats")
  t.match(r.stdout, /Acknowledged calls:\s+\d+/)
})

t.test('a count and a rate: paced, and a server that refuses is reported', async (t) => {
  const dir = tempDir('weft-bench-trace-')
  t.teardown(() => rmSync(dir, { recursive: true, force: true }))
  const r = await runCli(
    [
      'bench',
      'trace',
      '--base-url',
      s.url,
      '--project',
      'acme/bench-paced',
      '--count',
      '200',
      '--batch-size',
      '20',
      '--rate',
      '400',
      '--query-interval',
      '0',
      '--result-dir',
      dir,
    ],
    { WEFT_API_KEY: s.key },
  )
  t.equal(r.code, 0, r.stderr)
  const result = JSON.parse(readFileSync(path.join(dir, readdirSync(dir)[0]!), 'utf8'))
  t.equal(result.acknowledged_calls, 200)
  t.ok(result.duration >= (200 - 20) / 400, `paced at 400 calls/s (${result.duration.toFixed(2)} s)`)
  const held = await postJson(s, '/calls/query_stats', { project_id: 'acme/bench-paced' })
  t.equal(held.json.count, 200)

  const bad = await runCli(
    [
      'bench',
      'trace',
      '--base-url',
      s.url,
      '--project',
      'acme/bench-nokey',
      '--count',
      '40',
      '--batch-size',
      '20',
      '--query-interval',
      '0',
      '--result-dir',
      dir,
    ],
    {
      WEFT_API_KEY: 'wrong-key',
    },
  )
  t.equal(bad.code, 0, 'the run finishes')
  const out = JSON.parse(
    readFileSync(
      path.join(
        dir,
        readdirSync(dir).find((f) => !f.includes(result.date.replace(/[:.]/g, '-')))!,
      ),
      'utf8',
    ),
  )
  t.equal(out.acknowledged_calls, 0)
  t.equal(out.ingest.errors, 2, 'both batches refused')
  t.match(Object.keys(out.ingest.error_reasons)[0], /HTTP 401/)
  t.equal(out.event_loop_delay_ms, null, 'no admin stats without an admin key')
})

t.test('bad arguments: a clear message and exit code 2, before any request', async (t) => {
  // Each run pays the CLI's start (a few seconds on a loaded machine): a few cases, side by side.
  const cases: [string[], RegExp][] = [
    [['bench', 'serve', '--endpoint', '/v1/embeddings'], /--endpoint is \/v1\/chat\/completions or \/v1\/completions/],
    [['bench', 'serve', '--request-rate', 'fast'], /--request-rate takes a number.*or 'inf', not "fast"/],
    [['bench', 'serve', '--trace-to', 'http://127.0.0.1:1'], /--trace-to needs --project/],
    [['bench', 'trace', '--colour', 'blue'], /unknown flag --colour for 'weft bench trace'/],
  ]
  const runs = await Promise.all(cases.map(([args]) => runCli(args)))
  runs.forEach((r, i) => {
    t.equal(r.code, 2, cases[i]![0].join(' '))
    t.match(r.stderr, cases[i]![1])
  })
})
