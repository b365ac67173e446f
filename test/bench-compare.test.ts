import t from 'tap'
import { readFileSync, rmSync, writeFileSync } from 'node:fs'
import path from 'node:path'
import { runCli, startServer, tempDir, type TestServer } from './helpers/server.js'

// `weft bench compare` on results of real short runs (`bench serve` against the tiny model, `bench trace`), its
// ratios checked against values computed here from the two JSON files.

let s: TestServer
const dir = tempDir('weft-bench-compare-')
t.before(async () => {
  s = await startServer()
})
t.teardown(async () => {
  await s?.stop()
  rmSync(dir, { recursive: true, force: true })
})

const file = (name: string) => path.join(dir, name)
const load = (name: string) => JSON.parse(readFileSync(file(name), 'utf8'))

async function cli(args: string[]) {
  return runCli(args, { OPENAI_API_KEY: s.key, WEFT_API_KEY: s.key })
}

/** Two `bench serve` runs (all at once, then one at a time) and two `bench trace` runs, side by side: the CLI's start dominates. */
t.before(async () => {
  const serve = (name: string, extra: string[]) =>
    cli([
      ...['bench', 'serve', '--base-url', s.url, '--model', 'weft-tiny', '--num-prompts', '6', '--input-len', '16'],
      ...['--output-len', '6', '--seed', '3', '--ignore-eos', '--result-dir', dir, '--result-filename', name, ...extra],
    ])
  const trace = (name: string, batch: string) =>
    cli([
      ...['bench', 'trace', '--base-url', s.url, '--project', `acme/cmp-${name}`, '--count', '200', '--batch-size', batch],
      ...['--connections', '2', '--payload-bytes', '100', '--query-interval', '0.3', '--result-dir', dir, '--result-filename', name],
    ])
  const runs = await Promise.all([
    serve('a.json', ['--request-rate', 'inf']),
    serve('b.json', ['--request-rate', 'inf', '--max-concurrency', '1']),
    trace('t1.json', '20'),
    trace('t2.json', '50'),
  ])
  for (const r of runs) if (r.code !== 0) throw new Error(`a bench run failed: ${r.stderr}`)
})

const SERVE_LATENCY = /^(mean|median|std|p\d+)_(ttft|tpot|itl|e2el)_ms$/
const HIGHER = new Set(['completed', 'request_throughput', 'output_throughput', 'total_token_throughput', 'max_output_tokens_per_s'])

t.test('two bench serve runs: every metric, its ratio, change and verdict as computed from the files', async (t) => {
  const r = await cli(['bench', 'compare', file('a.json'), file('b.json'), '--format', 'json'])
  t.equal(r.code, 0, r.stderr)
  const out = JSON.parse(r.stdout)
  const [a, b] = [load('a.json'), load('b.json')]
  t.equal(out.kind, 'serve')
  t.same(out.files, [file('a.json'), file('b.json')])
  t.equal(out.runs[1].max_concurrency, 1, "each run's settings")
  // The metrics expected: the latency statistics the files hold, and the throughput and count keys.
  const expected = [...Object.keys(a).filter((k) => SERVE_LATENCY.test(k)), ...HIGHER, 'failed', 'duration']
  const got = new Map<string, any>(out.metrics.map((m: any) => [m.metric, m]))
  t.ok(expected.length >= 20, `${expected.length} metrics expected`)
  for (const k of expected) {
    const m = got.get(k)
    if (!t.ok(m, `${k} compared`)) continue
    t.same(m.values, [a[k], b[k]], `${k}: both values`)
    const ratio = a[k] === 0 ? null : b[k] / a[k]
    t.equal(m.ratio[1], ratio, `${k}: ratio B/A = ${ratio}`)
    t.equal(m.change_percent[1], ratio === null ? null : (ratio - 1) * 100, `${k}: change %`)
    const better = HIGHER.has(k) ? 'higher' : 'lower'
    t.equal(m.better, better, `${k}: ${better} is better`)
    const verdict = a[k] === b[k] ? 'same' : b[k] > a[k] === (better === 'higher') ? 'better' : 'worse'
    t.equal(m.verdict[1], verdict, `${k}: B is ${verdict}`)
  }
  t.notOk(got.has('request_goodput'), 'goodput left out when no run has it')
  t.equal(b.max_concurrent_requests, 1, 'the runs differ: one at a time')
  t.ok(a.max_concurrent_requests > 1, 'and all at once')

  const table = await cli(['bench', 'compare', file('a.json'), file('b.json')])
  t.equal(table.code, 0, table.stderr)
  const line = table.stdout.split('\n').find((l) => l.startsWith('request_throughput '))!
  const ratio = b.request_throughput / a.request_throughput
  t.match(line, new RegExp(`${a.request_throughput.toFixed(2)}\\s+${b.request_throughput.toFixed(2)}\\s+${ratio.toFixed(3)}×`), line)
  t.match(table.stdout, /A \(baseline\): .*a\.json — .*model_id=weft-tiny/)

  const md = await cli(['bench', 'compare', file('a.json'), file('b.json'), file('a.json'), '--format', 'markdown'])
  t.equal(md.code, 0, md.stderr)
  t.match(md.stdout, /^\| metric \| better \| A \| B \| B\/A \| change \| B is \| C \| C\/A \| change \| C is \|$/m)
  const row = md.stdout.split('\n').find((l) => l.startsWith('| median_e2el_ms |'))!
  const cellsOf = row.split('|').map((x) => x.trim())
  t.equal(cellsOf[8], a.median_e2el_ms.toFixed(2), 'the third run (the baseline again)')
  t.equal(cellsOf[9], '1.000×')
  t.equal(cellsOf[11], 'same')
})

t.test('two bench trace runs: throughput, latency and event-loop delay compared', async (t) => {
  const r = await cli(['bench', 'compare', file('t1.json'), file('t2.json'), '--format', 'json'])
  t.equal(r.code, 0, r.stderr)
  const out = JSON.parse(r.stdout)
  const [a, b] = [load('t1.json'), load('t2.json')]
  t.equal(out.kind, 'trace')
  const get = (k: string) => out.metrics.find((m: any) => m.metric === k)
  const at = (o: any, k: string) => k.split('.').reduce((v, p) => v[p], o)
  for (const k of ['acknowledged_calls_per_s', 'ingest.p99_ms', 'stream_query.median_ms', 'stats.p90_ms', 'event_loop_delay_ms.max']) {
    const [x, y] = [at(a, k), at(b, k)]
    t.same(get(k)?.values, [x, y], `${k}: values`)
    t.equal(get(k)?.ratio[1], x === 0 ? null : y / x, `${k}: ratio`)
  }
  t.equal(get('acknowledged_calls_per_s').better, 'higher')
  t.equal(get('ingest.p99_ms').better, 'lower')
  t.equal(out.runs[1].batch_size, 50)
})

t.test('what cannot be compared: a clear message, exit code 2', async (t) => {
  const b = load('b.json')
  delete b.median_ttft_ms
  b.p99_itl_ms = 'fast'
  writeFileSync(file('b-missing.json'), JSON.stringify(b))
  writeFileSync(file('other.json'), JSON.stringify({ hello: 1 }))
  writeFileSync(file('broken.json'), '{"completed": 3,')
  const cases: [string[], RegExp][] = [
    [
      [file('a.json'), file('t1.json')],
      /a\.json is a 'bench serve' result but .*t1\.json a 'bench trace' result: compare results of one kind/,
    ],
    [
      [file('a.json'), file('b-missing.json')],
      /missing or non-numeric keys[\s\S]*b-missing\.json: median_ttft_ms[\s\S]*b-missing\.json: p99_itl_ms/,
    ],
    [[file('a.json'), file('other.json')], /other\.json is not a result of 'weft bench serve'.* nor of 'weft bench trace'/],
    [[file('a.json'), file('broken.json')], /broken\.json is not JSON/],
    [[file('a.json'), file('nowhere.json')], /cannot read .*nowhere\.json/],
    [[file('a.json')], /takes two or more result files/],
    [[file('a.json'), file('b.json'), '--format', 'csv'], /--format is table, markdown or json, not "csv"/],
  ]
  const runs = await Promise.all(cases.map(([args]) => runCli(['bench', 'compare', ...args])))
  runs.forEach((r, i) => {
    t.equal(r.code, 2, cases[i]![0].map((x) => path.basename(x)).join(' '))
    t.match(r.stderr, cases[i]![1])
    t.equal(r.stdout, '', 'nothing on stdout')
  })
})
