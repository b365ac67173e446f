/**
 * Both backends: the statistics and query requests against weft's embedded backend and its ClickHouse
 * backend (`--storage chdb`, ClickHouse in-process), the same calls in both, in the same run, every
 * answer checked equal.
 *
 *   npm run build && node dist/bench/backends.js [--sizes 100000,1000000] [--runs 5] [--backends embedded,chdb] [--weft-root DIR] [--keep] [--help]
 *   (chdb: npm --prefix bench/peer-deps install)
 *
 * Per size: scripts/gen-calls makes the calls (30 days, 20 ops, 5 models, traces of 10, 1% errors),
 * two fresh servers start, and the calls go to both over HTTP (`/call/upsert_batch`, as a client sends
 * them; bench/backends-load.ts), timed per server. Then each request of bench/backends-requests.ts is
 * sent to both and the answers compared (numbers to 1e-9 relative, everything else exactly, calls in
 * order), and with what is known from the generated calls (`query_stats_all` is every call; the
 * 30-day statistics' call, error and token totals are the generated ones). A difference fails the run
 * (exit code 1, listed in the results). The timed runs alternate between the servers (which goes first
 * alternates too), each with the load average beside it. RSS is the server's process tree (chdb's
 * child process included), disk the data directory's files.
 *
 * `--weft-root` serves from another build of weft (its dist/: another commit's, or one broken on
 * purpose to see the check fail); `--keep` leaves the servers' data directories, to look at plans and
 * parts afterwards. Writes bench/results/backends-<stamp>.json and .svg.
 */
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { DuckDBInstance } from '@duckdb/node-api'
import { chdbResolvable } from '../src/clickhouse/chdb-executor.js'
import { parseFlags } from '../src/core/config.js'
import { ROOT_DIR, VERSION } from '../src/core/version.js'
import { backendsChart, type ChartRow } from './backends-chart.js'
import { directChdb, directEmbedded, type DirectLoad } from './backends-direct.js'
import { generate, loadAll, removeGenerated, type Generated } from './backends-load.js'
import { benchRequests, differences, pageFilter, tiesById, type BenchRequest, type RequestContext } from './backends-requests.js'
import { diskBytes, startBackend, type BackendKind, type BackendServer } from './backends-servers.js'
import { spread, type Spread } from './util.js'

const { flags } = parseFlags(process.argv.slice(2))
const HELP = `node dist/bench/backends.js [flags]   (chdb: npm --prefix bench/peer-deps install)

  --sizes N,N,...      calls per size, each a fresh pair of servers (default 1000000,10000000)
  --runs N             timed runs of every request after the first (default 5)
  --backends A,B       embedded,chdb (default both; the first is the one answers are compared with)
  --load http|direct   how the calls get in (default http): over HTTP as a client sends them, timed; or
                       straight into each backend's storage (bench/backends-direct.ts), for 1M and 10M
  --weft-root DIR      serve from another build of weft (its dist/)
  --keep               leave the servers' data directories
  --help               this, and exit

Writes bench/results/backends-<stamp>.json and .svg.
`
if (flags.help) {
  process.stdout.write(HELP)
  process.exit(0)
}
const sizes = (flags.sizes ?? '1000000,10000000').split(',').map(Number)
const runs = Number(flags.runs ?? 5)
const kinds = (flags.backends ?? 'embedded,chdb').split(',') as BackendKind[]
const loadMethod = flags.load ?? 'http'
if (loadMethod !== 'http' && loadMethod !== 'direct') throw new Error(`--load ${loadMethod}: http or direct`)
const KEY = 'bench-key'
const AUTH = 'Basic ' + Buffer.from('api:' + KEY).toString('base64')
const PROJECT = 'bench/backends'
const OP = `weave:///${PROJECT}/op/op_3:v1`
/** The user of KEY (WEFT_API_KEY is an admin key of user 'admin', catalog/keys.ts ensureAdmin): every call's. */
const USER = 'admin'
const MB = 2 ** 20
const DAY = 86_400_000
const weftRoot = flags['weft-root'] ? path.resolve(flags['weft-root']) : ROOT_DIR
/** Where chdb is resolved from (bench/peer-deps holds it). */
const CHDB_FROM = [ROOT_DIR, path.join(ROOT_DIR, 'bench', 'peer-deps')].map((d) => path.join(d, 'package.json'))

interface Answer {
  ms: number
  body: unknown
  /** `x-weft-stats-path` (rollup or scan), where the server says. */
  path: string | null
}

async function ask(s: BackendServer, r: BenchRequest): Promise<Answer> {
  const t = performance.now()
  const res = await fetch(s.url + r.path, {
    method: 'POST',
    headers: { authorization: AUTH, 'content-type': 'application/json' },
    body: JSON.stringify(r.body),
  })
  const text = await res.text()
  const ms = performance.now() - t
  if (res.status !== 200) throw new Error(`${s.kind} ${r.path} answered ${res.status}: ${text.slice(0, 300)}`)
  const body = r.lines
    ? tiesById(
        text
          .split('\n')
          .filter(Boolean)
          .map((l) => JSON.parse(l) as { id: string; started_at: string }),
      )
    : JSON.parse(text)
  return { ms: Math.round(ms * 10) / 10, body, path: res.headers.get('x-weft-stats-path') }
}

/** Totals of a range worked out from the generated files, independently of both servers. */
interface Totals {
  calls: number
  errors: number
  input: number
  output: number
  total: number
}

/**
 * From the generated files: root ids for the usage request (the newest 100), one trace from the middle of
 * the range, and the totals of calls started in [lo, hi) (each generated call has one end and one model).
 */
async function facts(g: Generated, n: number, lo: number, hi: number): Promise<{ roots: string[]; traceId: string; totals: Totals }> {
  const db = await DuckDBInstance.create(':memory:')
  const conn = await db.connect()
  const src = `read_parquet([${g.files.map((f) => `'${f}'`).join(', ')}])`
  const rows = async (sql: string) => (await conn.runAndReadAll(sql)).getRowObjectsJS()
  const ids = async (sql: string) => (await rows(sql)).map((r) => String(Object.values(r)[0]))
  const roots = await ids(`SELECT id FROM ${src} WHERE kind = 'start' AND parent_id IS NULL ORDER BY id DESC LIMIT 100`)
  const [traceId] = await ids(
    `SELECT trace_id FROM ${src} WHERE kind = 'start' AND parent_id IS NULL ORDER BY id LIMIT 1 OFFSET ${Math.floor(n / 20)}`,
  )
  const [t] = await rows(`SELECT count(*) AS calls, count(exception) AS errors, sum(u.prompt_tokens) AS input,
      sum(u.completion_tokens) AS output, sum(u.total_tokens) AS total
    FROM (SELECT id, exception, unnest(usage) AS u FROM ${src} WHERE kind = 'end')
    WHERE id IN (SELECT id FROM ${src} WHERE kind = 'start' AND epoch_ms(started_at) >= ${lo} AND epoch_ms(started_at) < ${hi})`)
  conn.closeSync()
  db.closeSync()
  const totals = Object.fromEntries(Object.entries(t!).map(([k, v]) => [k, Number(v)])) as unknown as Totals
  return { roots, traceId: traceId!, totals }
}

/** A /calls/stats answer's totals against the generated ones. */
function statsTotals(want: Totals) {
  return (body: unknown): string[] => {
    const b = body as { call_buckets: Record<string, number>[]; usage_buckets: Record<string, number>[] }
    const sum = (xs: Record<string, number>[], k: string) => xs.reduce((a, x) => a + (x[k] ?? 0), 0)
    const got: Totals = {
      calls: sum(b.call_buckets, 'sum_call_count'),
      errors: sum(b.call_buckets, 'sum_error_count'),
      input: sum(b.usage_buckets, 'sum_input_tokens'),
      output: sum(b.usage_buckets, 'sum_output_tokens'),
      total: sum(b.usage_buckets, 'sum_total_tokens'),
    }
    return (Object.keys(want) as (keyof Totals)[]).filter((k) => got[k] !== want[k]).map((k) => `${k} ${got[k]}, generated ${want[k]}`)
  }
}

/** What each server holds and uses: RSS of its process tree, bytes on disk, and (embedded) its store's and rollups' state. */
async function snapshot(servers: BackendServer[]): Promise<Record<string, unknown>> {
  const out: Record<string, unknown> = {}
  for (const s of servers) {
    const admin = (await (await fetch(s.url + '/admin/stats', { headers: { authorization: `Bearer ${KEY}` } })).json()) as Record<
      string,
      unknown
    >
    out[s.kind] = {
      rss_mb: Math.round(s.rss() / MB),
      disk_mb: Math.round((diskBytes(s.dataDir) / MB) * 10) / 10,
      calls: admin.calls,
      rollups: admin.rollups,
    }
  }
  return out
}

interface Timed {
  first_ms: number
  ms: Spread
  runs: number[]
  path: string | null
}

/** What an answer must be, known independently of both servers: its differences from that, by request. */
type Expected = Record<string, (body: unknown) => string[]>

/** Every request once to every server, answers compared with the first server's and with `expect`; then the timed runs. */
async function measure(servers: BackendServer[], reqs: Record<string, BenchRequest>, expect: Expected) {
  const mismatches: Record<string, string[]> = {}
  const timing: Record<string, Record<string, Timed>> = {}
  for (const [name, r] of Object.entries(reqs)) {
    const answers: Answer[] = []
    for (const s of servers) answers.push(await ask(s, r))
    timing[name] = Object.fromEntries(
      servers.map((s, i) => [s.kind, { first_ms: answers[i]!.ms, ms: spread([0]), runs: [], path: answers[i]!.path }]),
    )
    const bad = answers.slice(1).flatMap((a, i) => differences(answers[0]!.body, a.body).map((d) => `${servers[i + 1]!.kind}: ${d}`))
    const want = expect[name]
    if (want) for (const [i, a] of answers.entries()) bad.push(...want(a.body).map((d) => `${servers[i]!.kind}: ${d}`))
    if (bad.length) mismatches[name] = bad
    process.stdout.write(
      `  ${name}: ${bad.length ? 'MISMATCH ' + bad.slice(0, 3).join('; ') : 'equal'} (${answers.map((a, i) => `${servers[i]!.kind} ${a.ms} ms${a.path ? ` ${a.path}` : ''}`).join(', ')})\n`,
    )
  }
  const load: number[] = []
  for (let run = 0; run < runs; run++) {
    load.push(Math.round(os.loadavg()[0]! * 10) / 10)
    for (const [name, r] of Object.entries(reqs)) {
      const order = run % 2 ? [...servers].reverse() : servers
      for (const s of order) timing[name]![s.kind]!.runs.push((await ask(s, r)).ms)
    }
  }
  for (const byKind of Object.values(timing)) for (const t of Object.values(byKind)) t.ms = spread(t.runs)
  return { mismatches, timing, load_average: load }
}

async function oneSize(n: number): Promise<Record<string, unknown>> {
  const end = Math.floor(Date.now() / 1000) * 1000
  const g = await generate(n, PROJECT, end - 1000, 30, USER)
  process.stdout.write(`${n} calls: generated in ${g.gen_s} s\n`)
  const { roots, traceId, totals } = await facts(g, n, end - 30 * DAY, end)
  const root = mkdtempSync(path.join(os.tmpdir(), 'weft-backends-'))
  const servers: BackendServer[] = []
  try {
    const loadStart = os.loadavg()[0]!
    let loadS: Record<string, number>
    const loadSteps: Record<string, Record<string, number>> = {}
    if (loadMethod === 'direct') {
      loadS = {}
      for (const k of kinds) {
        const d: DirectLoad =
          k === 'embedded'
            ? await directEmbedded(weftRoot, g, path.join(root, k), KEY)
            : await directChdb(weftRoot, g, path.join(root, k), KEY, CHDB_FROM)
        servers.push(d.server)
        loadS[k] = d.total_s
        loadSteps[k] = d.steps
        process.stdout.write(`  ${k} direct load: ${JSON.stringify(d.steps)}\n`)
      }
    } else {
      for (const k of kinds) servers.push(await startBackend(weftRoot, k, path.join(root, k), KEY))
      loadS = await loadAll(g, n, Object.fromEntries(servers.map((s) => [s.kind, s.url])), AUTH)
    }
    process.stdout.write(
      `  load: ${Object.entries(loadS)
        .map(([k, s]) => `${k} ${s} s (${Math.round(n / s)} calls/s)`)
        .join(', ')}\n`,
    )
    const afterLoad = await snapshot(servers)
    const count = (await ask(servers[0]!, { path: '/calls/query_stats', body: pageFilter({ project: PROJECT, op: OP }) })).body as {
      count: number
    }
    const ctx: RequestContext = { project: PROJECT, op: OP, user: USER, end, roots, traceId, deepOffset: Math.floor(count.count * 0.9) }
    const m = await measure(servers, benchRequests(ctx), {
      query_stats_all: (b) => ((b as { count: number }).count === n ? [] : [`count ${(b as { count: number }).count}, generated ${n}`]),
      stats_30d_daily: statsTotals(totals),
    })
    return {
      calls: n,
      generate_s: g.gen_s,
      load_method: loadMethod,
      load_s: loadS,
      ...(loadMethod === 'direct' ? { load_steps_s: loadSteps } : {}),
      load_calls_per_s: Object.fromEntries(Object.entries(loadS).map(([k, s]) => [k, Math.round(n / s)])),
      load_average_at_load_start: Math.round(loadStart * 10) / 10,
      page_matches: count.count,
      deep_offset: ctx.deepOffset,
      after_load: afterLoad,
      after_queries: await snapshot(servers),
      ...m,
    }
  } finally {
    for (const s of servers) await s.stop()
    if (flags.keep) process.stdout.write(`  kept the servers' data in ${root}\n`)
    else rmSync(root, { recursive: true, force: true })
    removeGenerated(g)
  }
}

/** The results so far (rewritten after each size, so a long run that fails late keeps its smaller sizes). */
function write(results: Record<string, Record<string, unknown>>, base: string): void {
  const doc = {
    bench: 'backends',
    weft_version: VERSION,
    date: new Date().toISOString(),
    machine: { cpus: os.cpus().length, model: os.cpus()[0]?.model, node: process.version },
    setup: { backends: kinds, project: PROJECT, op: OP, runs, load: loadMethod, requests: 'bench/backends-requests.ts' },
    results,
  }
  writeFileSync(base + '.json', JSON.stringify(doc, null, 2) + '\n')
  const rows: ChartRow[] = Object.entries(results).flatMap(([size, r]) =>
    Object.entries(r.timing as Record<string, Record<string, Timed>>).map(([name, byKind]) => ({
      label: `${name} ${Number(size) / 1e6}M`,
      bars: kinds.map((k) => byKind[k]!.ms),
    })),
  )
  writeFileSync(base + '.svg', backendsChart(`weft ${VERSION}: the same requests on each backend, ms (median, min–max)`, kinds, rows))
}

async function main(): Promise<void> {
  if (kinds.includes('chdb') && !chdbResolvable(CHDB_FROM)) {
    process.stderr.write('chdb is not installed: npm --prefix bench/peer-deps install\n')
    process.exit(2)
  }
  const outDir = path.join(ROOT_DIR, 'bench', 'results')
  mkdirSync(outDir, { recursive: true })
  const base = path.join(outDir, `backends-${new Date().toISOString().replace(/[:.]/g, '-')}`)
  const results: Record<string, Record<string, unknown>> = {}
  for (const n of sizes) {
    results[String(n)] = await oneSize(n)
    write(results, base)
  }
  process.stdout.write(`wrote ${base}.json and .svg\n`)
  const bad = Object.entries(results).flatMap(([n, r]) =>
    Object.entries(r.mismatches as Record<string, string[]>).map(([k, v]) => `${n} ${k}: ${v.join('; ')}`),
  )
  if (bad.length) {
    process.stderr.write(`ANSWERS DIFFER between backends:\n${bad.join('\n')}\n`)
    process.exitCode = 1
  }
}

await main()
