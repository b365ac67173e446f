import t from 'tap'
import { readFileSync, readdirSync, rmSync } from 'node:fs'
import path from 'node:path'
import { postJson, runCli, startServer, tempDir, type TestServer } from './helpers/server.js'

// `weft bench trace` run from the built CLI against a real weft: what it says the server acknowledged must be
// what the server holds afterwards, counted by the server itself.

/** A small XML well-formedness check (tags nest and close, attributes quoted, no stray `<` or `&`). */
function wellFormed(xml: string): string | null {
  const stack: string[] = []
  const tag = /<(\/?)([a-zA-Z][\w-]*)((?:\s+[\w:-]+="[^"<]*")*)\s*(\/?)>/y
  let i = 0
  while (i < xml.length) {
    const lt = xml.indexOf('<', i)
    const text = xml.slice(i, lt === -1 ? xml.length : lt)
    if (/&(?!(amp|lt|gt|quot|apos|#\d+);)/.test(text)) return `bad entity in ${JSON.stringify(text.slice(0, 40))}`
    if (lt === -1) break
    tag.lastIndex = lt
    const m = tag.exec(xml)
    if (!m) return `bad tag at ${lt}: ${xml.slice(lt, lt + 60)}`
    if (m[1]) {
      if (stack.pop() !== m[2]) return `</${m[2]}> closes the wrong element at ${lt}`
    } else if (!m[4]) stack.push(m[2]!)
    i = tag.lastIndex
  }
  return stack.length ? `unclosed ${stack.join(', ')}` : null
}

/** The points of the polyline drawn for a series, as [x, y] pairs. */
function polyline(svg: string, series: string): [number, number][] | null {
  const m = new RegExp(`<polyline data-series="${series}" points="([^"]*)"`).exec(svg)
  return m
    ? m[1]!
        .split(' ')
        .filter(Boolean)
        .map((p) => p.split(',').map(Number) as [number, number])
    : null
}

/** The height of a bar by its label. */
function bar(svg: string, label: string): number {
  const m = new RegExp(`<rect data-bar="${label}"[^>]* height="([\\d.]+)"`).exec(svg)
  return m ? Number(m[1]) : NaN
}

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

  // The plot beside the JSON: well-formed SVG holding the run's series.
  const svgName = readdirSync(dir).find((f) => f.endsWith('.svg'))
  t.ok(svgName, 'an .svg beside the .json')
  const svg = readFileSync(path.join(dir, svgName!), 'utf8')
  t.equal(wellFormed(svg), null, 'well-formed XML')
  t.match(svg, /^<svg xmlns="http:\/\/www.w3.org\/2000\/svg"/)
  const perS = result.acknowledged_calls_per_s_series as { t: number; calls_per_s: number }[]
  t.equal(perS.length, Math.ceil(result.duration), 'one calls/s point per second of the run')
  // Each point is a rate over its second (the last over the part that ran): rates × spans add up to the calls.
  const summed = perS.reduce((a, p, i) => a + p.calls_per_s * (i === perS.length - 1 ? result.duration - i : 1), 0)
  t.ok(Math.abs(summed - result.acknowledged_calls) < 1e-6, `calls/s over time sums to the calls (${summed})`)
  t.equal(polyline(svg, 'calls/s')?.length, perS.length, 'the calls/s line has a point per second')
  for (const kind of ['upsert_batch', 'stream_query page', 'calls/stats'])
    t.equal(
      polyline(svg, kind)?.length,
      { upsert_batch: result.ingest, 'stream_query page': result.stream_query, 'calls/stats': result.stats }[kind]!.requests,
      `${kind}: one point per request`,
    )
  // Bar heights are proportional to the values: the p99 bars' ratios are the result's.
  const ratio = bar(svg, 'upsert_batch p99') / bar(svg, 'calls/stats p99')
  t.ok(Math.abs(ratio - result.ingest.p99_ms / result.stats.p99_ms) < 0.02 * ratio, `p99 bars as the result (${ratio.toFixed(3)})`)
  const eld = result.event_loop_delay_series as { p99: number; max: number }[]
  t.ok(eld.length >= 2, `event-loop delay sampled over the run (${eld.length} intervals)`)
  t.equal(polyline(svg, 'p99')?.length, eld.length, 'event-loop p99 line')
  t.equal(polyline(svg, 'max')?.length, eld.length, 'event-loop max line')
  t.equal(result.event_loop_delay_ms.max, Math.max(...eld.map((e) => e.max)), 'the run’s max is the intervals’ max')
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
  const result = JSON.parse(
    readFileSync(
      path.join(
        dir,
        readdirSync(dir).find((f) => f.endsWith('.json'))!,
      ),
      'utf8',
    ),
  )
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
        readdirSync(dir).find((f) => f.endsWith('.json') && !f.includes(result.date.replace(/[:.]/g, '-')))!,
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
