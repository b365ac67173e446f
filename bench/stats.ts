/**
 * Statistics bench: the dashboard requests of issue 4 against weft over HTTP, and the same
 * statistics as hand-written SQL in DuckDB (the same Parquet files) and ClickHouse (chdb,
 * MergeTree tables loaded from those files), in the same run.
 *
 *   npm run build && node dist/bench/stats.js [--sizes 1000000,10000000] [--runs 7] [--keep DIR [--only-generate] [--rebuild-rollups]]
 *     [--tail N]
 *   (ClickHouse: npm --prefix bench/peer-deps install; skipped when absent)
 *
 * Per size: scripts/gen-calls writes 30 days of calls (20 ops, 5 models, traces of 100, 1% errors),
 * the store compacts them, the server starts and builds its rollups (timed), then per request weft's
 * answer is checked against each peer's (stats-check.ts) and the runs alternate between weft and the
 * peers. After the server stops, the same process opens the store to time weft's scan path for the
 * stats requests (`weft_scan`: what answers without rollups, in process) and a full rollup build. `--tail N`:
 * before that, the stats requests again with N fresh calls in the tail (stats-tail.ts).
 * Writes bench/results/stats-<stamp>.json and .svg.
 */
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { createRequire } from 'node:module'
import os from 'node:os'
import path from 'node:path'
import { DuckDBInstance, type DuckDBConnection } from '@duckdb/node-api'
import { Catalog } from '../src/catalog/db.js'
import { Prices, defaultPrices } from '../src/catalog/prices.js'
import { CallStore } from '../src/calls/store.js'
import type { CallStatsReq } from '../src/schemas/calls.js'
import { CallStats } from '../src/stats/engine.js'
import { Rollups } from '../src/stats/rollups.js'
import { parseFlags } from '../src/core/config.js'
import { ROOT_DIR, VERSION } from '../src/core/version.js'
import { genCalls } from '../scripts/gen-calls.js'
import { sizeChart } from './chart.js'
import { compareBucketed, compareUsage100, peerBucketed, weftBucketed } from './stats-check.js'
import { spread, startWeft, type Spread } from './util.js'
import { tailRun } from './stats-tail.js'

const { flags } = parseFlags(process.argv.slice(2))
const sizes = (flags.sizes ?? '1000000,10000000').split(',').map(Number)
const runs = Number(flags.runs ?? 7)
/** Keep each size's generated, compacted store in DIR/calls-<n> and reuse it, with its rollups, in later runs (100M takes ~40 min to make). */
const keepDir = flags.keep ? path.resolve(flags.keep) : null
/** Calls added to the tail for the run with a tail (bench/stats-tail.ts); 0: none. */
const tail = Number(flags.tail ?? 0)
const KEY = 'bench-key'
const PROJECT = 'bench/stats'
const OP = `weave:///${PROJECT}/op/op_3:v1`
const DAY = 86_400_000

interface Chdb {
  Session: new (dir?: string) => { query(sql: string, format?: string): string; cleanup?: () => void; close?: () => void }
}
function loadChdb(): Chdb | null {
  try {
    return createRequire(path.join(ROOT_DIR, 'bench', 'peer-deps', 'package.json'))('chdb') as Chdb
  } catch {
    return null
  }
}

async function timed<T>(f: () => Promise<T>): Promise<{ ms: number; out: T }> {
  const t = performance.now()
  const out = await f()
  return { ms: performance.now() - t, out }
}

type Req = 'stats_30d' | 'stats_24h' | 'count_op' | 'usage_100_roots'
const TARGET_MS: Record<Req, number> = { stats_30d: 100, stats_24h: 30, count_op: 30, usage_100_roots: 50 }

/** The request a dashboard makes: 3 usage sums per day and model, call count, errors and latency p50/p95/p99 per bucket. */
const statsBody = (start: number, end: number) => ({
  project_id: PROJECT,
  start: new Date(start).toISOString(),
  end: new Date(end).toISOString(),
  usage_metrics: ['input_tokens', 'output_tokens', 'total_tokens'].map((metric) => ({ metric, aggregations: ['sum'] })),
  call_metrics: [
    { metric: 'latency_ms', aggregations: [], percentiles: [50, 95, 99] },
    { metric: 'call_count', aggregations: ['sum'] },
    { metric: 'error_count', aggregations: ['sum'] },
  ],
})

/** DuckDB, hand-written over the compacted files (one row per call there), the same answers. */
function duckSql(files: string[]) {
  const src = `read_parquet([${files.map((f) => `'${f}'`).join(', ')}])`
  const bucket = (g: number) => `time_bucket(INTERVAL '${g} seconds', started_at)`
  return {
    usage: (g: number) => `SELECT ${bucket(g)} AS b, u.model, sum(coalesce(u.prompt_tokens, 0) + coalesce(u.input_tokens, 0)) AS i,
        sum(coalesce(u.completion_tokens, 0) + coalesce(u.output_tokens, 0)) AS o, sum(u.total_tokens) AS t
      FROM (SELECT started_at, unnest(usage) AS u FROM ${src} WHERE project_id = $1 AND started_at >= $2 AND started_at < $3 AND deleted_at IS NULL) GROUP BY ALL`,
    calls: (g: number) => `SELECT ${bucket(g)} AS b, count(*) AS n, count(exception) AS e,
        quantile_cont(epoch_ms(ended_at) - epoch_ms(started_at), [0.5, 0.95, 0.99]) AS p
      FROM ${src} WHERE project_id = $1 AND started_at >= $2 AND started_at < $3 AND deleted_at IS NULL GROUP BY 1`,
    count: `SELECT count(*) AS n FROM ${src} WHERE project_id = $1 AND op_name = $2 AND deleted_at IS NULL AND started_at IS NOT NULL`,
    usage100: `WITH roots AS (SELECT id, trace_id FROM ${src} WHERE project_id = $1 AND list_contains($2, id))
      SELECT r.id, u.model, sum(coalesce(u.prompt_tokens, 0) + coalesce(u.input_tokens, 0)) AS p, sum(coalesce(u.completion_tokens, 0) + coalesce(u.output_tokens, 0)) AS c
      FROM (SELECT trace_id, unnest(usage) AS u FROM ${src} WHERE project_id = $1 AND trace_id IN (SELECT trace_id FROM roots) AND deleted_at IS NULL) x JOIN roots r USING (trace_id) GROUP BY ALL`,
  }
}

/** ClickHouse over MergeTree tables loaded from the same files (Weave's own engine). */
const chSql = {
  usage: (g: number, lo: string, hi: string) => `SELECT toStartOfInterval(started_at, INTERVAL ${g} SECOND) AS b, u.model AS model,
      sum(ifNull(u.prompt_tokens, 0) + ifNull(u.input_tokens, 0)), sum(ifNull(u.completion_tokens, 0) + ifNull(u.output_tokens, 0)), sum(u.total_tokens)
    FROM calls ARRAY JOIN usage AS u WHERE project_id = '${PROJECT}' AND started_at >= '${lo}' AND started_at < '${hi}' GROUP BY b, model FORMAT Null`,
  calls: (
    g: number,
    lo: string,
    hi: string,
  ) => `SELECT toStartOfInterval(started_at, INTERVAL ${g} SECOND) AS b, count(), countIf(exception IS NOT NULL),
      quantiles(0.5, 0.95, 0.99)(dateDiff('millisecond', started_at, ended_at))
    FROM calls WHERE project_id = '${PROJECT}' AND started_at >= '${lo}' AND started_at < '${hi}' GROUP BY b FORMAT Null`,
  count: `SELECT count() FROM calls WHERE project_id = '${PROJECT}' AND op_name = '${OP}' FORMAT Null`,
  usage100: (
    ids: string[],
  ) => `SELECT r.id, u.model, sum(ifNull(u.prompt_tokens, 0) + ifNull(u.input_tokens, 0)), sum(ifNull(u.completion_tokens, 0) + ifNull(u.output_tokens, 0))
    FROM calls ARRAY JOIN usage AS u INNER JOIN (SELECT id, trace_id FROM calls WHERE id IN (${ids.map((i) => `'${i}'`).join(', ')})) AS r ON calls.trace_id = r.trace_id
    WHERE calls.trace_id IN (SELECT trace_id FROM calls WHERE id IN (${ids.map((i) => `'${i}'`).join(', ')})) GROUP BY r.id, u.model FORMAT Null`,
}

async function main(): Promise<void> {
  const chdb = loadChdb()
  if (!chdb) process.stdout.write('chdb not installed (npm --prefix bench/peer-deps install): ClickHouse peer skipped\n')
  const results: Record<string, unknown> = {}
  const curve: Record<string, Record<string, (number | null)[]>> = {}
  for (const [si, n] of sizes.entries()) {
    const dir = keepDir ? path.join(keepDir, `calls-${n}`) : mkdtempSync(path.join(os.tmpdir(), 'weft-stats-'))
    const made = path.join(dir, 'generated.json')
    let gen: { ms: number }, compaction: { ms: number }, now: number
    if (keepDir && existsSync(made)) {
      ;({ gen, compaction, now } = JSON.parse(readFileSync(made, 'utf8')) as {
        gen: { ms: number }
        compaction: { ms: number }
        now: number
      })
      // The rollups are derived data: kept from the last run unless asked (a server of another rollup format rebuilds them anyway).
      if (flags['rebuild-rollups']) rmSync(path.join(dir, 'rollups'), { recursive: true, force: true })
      process.stdout.write(`${n} calls: reusing ${dir} (made ${new Date(now).toISOString()})\n`)
    } else {
      rmSync(dir, { recursive: true, force: true })
      mkdirSync(dir, { recursive: true })
      now = Date.now()
      gen = await timed(() =>
        genCalls({ dataDir: dir, calls: n, project: PROJECT, days: 30, ops: 20, models: 5, traceSize: 100, end: new Date(now) }),
      )
      process.stdout.write(`${n} calls: generated in ${(gen.ms / 1000).toFixed(1)} s\n`)
      const store = await CallStore.open(dir, { flushIntervalMs: 0 })
      compaction = await timed(() => store.compact())
      await store.close()
      if (keepDir) writeFileSync(made, JSON.stringify({ gen: { ms: gen.ms }, compaction: { ms: compaction.ms }, now }))
    }
    if (keepDir && flags['only-generate']) continue
    const store = await CallStore.open(dir, { flushIntervalMs: 0 })
    const files = store.segments.map((s) => path.join(dir, 'calls', s.file))
    const bytes = store.segments.reduce((a, s) => a + s.bytes, 0)
    await store.close()
    process.stdout.write(
      `  compaction ${(compaction.ms / 1000).toFixed(1)} s, ${files.length} segments, ${(bytes / n).toFixed(1)} bytes/call\n`,
    )

    // ClickHouse loads first: chdb's calls are synchronous, and a blocked event loop would leave
    // idle sockets to the server unreaped.
    let ch: InstanceType<Chdb['Session']> | null = null
    let chLoadS: number | null = null
    const chDir = mkdtempSync(path.join(os.tmpdir(), 'weft-chdb-'))
    if (chdb) {
      ch = new chdb.Session(chDir)
      const t = performance.now()
      const cols = `assumeNotNull(project_id) AS project_id, id, trace_id, parent_id, op_name, assumeNotNull(started_at) AS started_at, ended_at, exception, usage`
      ch.query(
        `CREATE TABLE calls ENGINE = MergeTree ORDER BY (project_id, started_at) AS SELECT ${cols} FROM file('${files[0]}', Parquet) WHERE deleted_at IS NULL AND started_at IS NOT NULL`,
      )
      for (const f of files.slice(1))
        ch.query(`INSERT INTO calls SELECT ${cols} FROM file('${f}', Parquet) WHERE deleted_at IS NULL AND started_at IS NOT NULL`)
      ch.query('OPTIMIZE TABLE calls FINAL')
      chLoadS = (performance.now() - t) / 1000
      process.stdout.write(`  ClickHouse MergeTree load ${chLoadS.toFixed(1)} s\n`)
    }

    const rollupsFound = existsSync(path.join(dir, 'rollups', 'rollups.duckdb'))
    const server = await startWeft({
      root: ROOT_DIR,
      dataDir: dir,
      key: KEY,
      env: { WEFT_ACCESS_LOG: 'false' },
    })
    const auth = { authorization: 'Basic ' + Buffer.from('api:' + KEY).toString('base64'), 'content-type': 'application/json' }
    const post = async (p: string, body: unknown) => {
      const r = await fetch(server.url + p, { method: 'POST', headers: auth, body: JSON.stringify(body) })
      const text = await r.text()
      if (r.status !== 200) throw new Error(`${p} answered ${r.status}: ${text.slice(0, 300)}`)
      return { json: JSON.parse(text) as Record<string, unknown>, path: r.headers.get('x-weft-stats-path') }
    }
    // The rollups build in the background after start; statistics scan until then.
    const rollupStart = performance.now()
    while ((await post('/calls/stats', statsBody(now - DAY, now))).path !== 'rollup') await new Promise((r) => setTimeout(r, 200))
    const rollupS = (performance.now() - rollupStart) / 1000
    process.stdout.write(`  rollups ready ${rollupS.toFixed(1)} s after start${rollupsFound ? ' (found from an earlier run)' : ''}\n`)

    // Every side's range ends on a whole second: ClickHouse's bounds are written to the second, and the answers are compared.
    const end = Math.floor(now / 1000) * 1000
    const db = await DuckDBInstance.create(':memory:')
    const conn: DuckDBConnection = await db.connect()
    const dq = duckSql(files)
    const rootIds = (
      await conn.runAndReadAll(
        `SELECT id FROM read_parquet([${files.map((f) => `'${f}'`).join(', ')}]) WHERE parent_id IS NULL ORDER BY id DESC LIMIT 100`,
      )
    )
      .getRowObjectsJS()
      .map((r) => String(r.id))
    const { listValue, timestampValue } = await import('@duckdb/node-api')
    const tsv = (ms: number) => timestampValue(BigInt(ms) * 1000n)

    const cases: Record<Req, { weft: () => Promise<unknown>; duckdb: () => Promise<unknown>; clickhouse?: () => unknown }> = {
      stats_30d: {
        weft: () => post('/calls/stats', statsBody(end - 30 * DAY, end)),
        duckdb: async () => {
          const p = [PROJECT, tsv(end - 30 * DAY), tsv(end)]
          await conn.runAndReadAll(dq.usage(86400), p)
          await conn.runAndReadAll(dq.calls(86400), p)
        },
        clickhouse: ch
          ? () => {
              const [lo, hi] = [
                new Date(end - 30 * DAY).toISOString().slice(0, 19).replace('T', ' '),
                new Date(end).toISOString().slice(0, 19).replace('T', ' '),
              ]
              ch!.query(chSql.usage(86400, lo, hi))
              ch!.query(chSql.calls(86400, lo, hi))
            }
          : undefined,
      },
      stats_24h: {
        weft: () => post('/calls/stats', statsBody(end - DAY, end)),
        duckdb: async () => {
          const p = [PROJECT, tsv(end - DAY), tsv(end)]
          await conn.runAndReadAll(dq.usage(21600), p)
          await conn.runAndReadAll(dq.calls(21600), p)
        },
        clickhouse: ch
          ? () => {
              const [lo, hi] = [
                new Date(end - DAY).toISOString().slice(0, 19).replace('T', ' '),
                new Date(end).toISOString().slice(0, 19).replace('T', ' '),
              ]
              ch!.query(chSql.usage(21600, lo, hi))
              ch!.query(chSql.calls(21600, lo, hi))
            }
          : undefined,
      },
      count_op: {
        weft: () => post('/calls/query_stats', { project_id: PROJECT, filter: { op_names: [OP] } }),
        duckdb: () => conn.runAndReadAll(dq.count, [PROJECT, OP]),
        clickhouse: ch ? () => ch!.query(chSql.count) : undefined,
      },
      usage_100_roots: {
        weft: () => post('/calls/usage', { project_id: PROJECT, call_ids: rootIds }),
        duckdb: () => conn.runAndReadAll(dq.usage100, [PROJECT, listValue(rootIds)]),
        clickhouse: ch ? () => ch!.query(chSql.usage100(rootIds)) : undefined,
      },
    }
    const sizeResult: Record<string, unknown> = {
      calls: n,
      generate_s: Math.round(gen.ms) / 1000,
      compaction_s: Math.round(compaction.ms) / 1000,
      segments: files.length,
      bytes_per_call: bytes / n,
      rollups_ready_s: Math.round(rollupS * 10) / 10,
      // Found in the data directory from an earlier run (loaded, or rebuilt if of another format), or built from scratch.
      rollups_found: rollupsFound,
      clickhouse_load_s: chLoadS,
    }
    const checks = await checkAnswers(post, conn, dq, ch, end, rootIds)
    sizeResult.checks = checks
    for (const [name, byPeer] of Object.entries(checks))
      process.stdout.write(
        `  check ${name}: ${Object.entries(byPeer)
          .map(([peer, bad]) => `${peer} ${bad.length ? `${bad.length} differences, e.g. ${bad.slice(0, 3).join('; ')}` : 'equal'}`)
          .join(', ')}\n`,
      )
    for (const [name, c] of Object.entries(cases) as [Req, (typeof cases)[Req]][]) {
      const times: Record<string, number[]> = { weft: [], duckdb: [] }
      if (c.clickhouse) times.clickhouse = []
      // Warm every side once (file metadata, caches, JIT).
      await c.weft()
      await c.duckdb()
      c.clickhouse?.()
      // Each timed request follows an untimed one of the same side: a peer's full scan in between
      // would otherwise leave the next side with cold caches (weft alone: 97 ms for stats_30d at 10M,
      // 158 ms right after DuckDB's 1.1 s scan).
      for (let r = 0; r < runs; r++) {
        await c.weft()
        times.weft!.push((await timed(c.weft)).ms)
        await c.duckdb()
        times.duckdb!.push((await timed(c.duckdb)).ms)
        if (c.clickhouse) {
          c.clickhouse()
          times.clickhouse!.push((await timed(async () => c.clickhouse!())).ms)
        }
      }
      const s: Record<string, Spread> = Object.fromEntries(
        Object.entries(times).map(([k, v]) => [k, spread(v.map((x) => Math.round(x * 10) / 10))]),
      )
      const ratios = Object.fromEntries(
        Object.keys(s)
          .filter((k) => k !== 'weft')
          .map((k) => [`weft_over_${k}`, Math.round((s.weft!.median / s[k]!.median) * 1000) / 1000]),
      )
      sizeResult[name] = { ms: s, ratios, target_ms: TARGET_MS[name], runs: times }
      process.stdout.write(
        `  ${name}: ${Object.entries(s)
          .map(([k, v]) => `${k} ${v.min}/${v.median}/${v.max} ms`)
          .join(', ')}; ${JSON.stringify(ratios)}\n`,
      )
      curve[name] ??= {}
      for (const k of ['weft', 'duckdb', 'clickhouse']) {
        curve[name]![k] ??= sizes.map(() => null)
        curve[name]![k]![si] = s[k]?.median ?? null
      }
    }
    results[String(n)] = sizeResult
    conn.closeSync()
    db.closeSync()
    await server.stop()
    if (tail > 0) {
      const r = await tailRun({ dir, end, calls: tail, runs, key: KEY, project: PROJECT, body: statsBody })
      sizeResult.with_tail = r
      process.stdout.write(
        `  with ${tail} calls in the tail (sent in ${r.send_s} s): stats_24h ${r.ms.stats_24h.min}/${r.ms.stats_24h.median}/${r.ms.stats_24h.max} ms, stats_30d ${r.ms.stats_30d.min}/${r.ms.stats_30d.median}/${r.ms.stats_30d.max} ms; against the scan path: ${r.differences.length ? r.differences.slice(0, 3).join('; ') : 'equal'}\n`,
      )
    }
    Object.assign(sizeResult, await inProcess(dir, end))
    for (const name of ['stats_30d', 'stats_24h'] as const) {
      const r = sizeResult[name] as { ms: Record<string, Spread> }
      r.ms.weft_scan = (sizeResult.weft_scan as Record<string, Spread>)[name]!
      process.stdout.write(
        `  ${name} weft scan path (in process): ${r.ms.weft_scan.min}/${r.ms.weft_scan.median}/${r.ms.weft_scan.max} ms\n`,
      )
    }
    process.stdout.write(`  rollups full build (in process): ${sizeResult.rollups_build_s} s\n`)
    ch?.cleanup?.()
    if (!keepDir) rmSync(dir, { recursive: true, force: true })
    rmSync(chDir, { recursive: true, force: true })
  }
  if (flags['only-generate']) return
  const stamp = new Date().toISOString().replace(/[:.]/g, '-')
  const outDir = path.join(ROOT_DIR, 'bench', 'results')
  mkdirSync(outDir, { recursive: true })
  const base = path.join(outDir, `stats-${stamp}`)
  writeFileSync(
    base + '.json',
    JSON.stringify(
      {
        bench: 'stats',
        weft_version: VERSION,
        date: new Date().toISOString(),
        machine: { cpus: os.cpus().length, model: os.cpus()[0]?.model, node: process.version },
        setup: {
          data: '30 days, 20 ops, 5 models, traces of 100 calls, 1% errors (scripts/gen-calls)',
          runs,
          peers: 'DuckDB (@duckdb/node-api) on the compacted Parquet; ClickHouse (chdb) MergeTree loaded from it',
        },
        results,
      },
      null,
      2,
    ) + '\n',
  )
  const label = (n: number) => (n >= 1e6 ? `${n / 1e6}M` : `${n / 1e3}k`)
  writeFileSync(
    base + '.svg',
    sizeChart(
      `weft ${VERSION} statistics: median latency against calls in the project`,
      sizes.map(label),
      (Object.keys(curve) as Req[]).map((name) => ({
        title: `${name} (target ${TARGET_MS[name]} ms)`,
        series: Object.entries(curve[name]!)
          .filter(([, v]) => v.some((x) => x !== null))
          .map(([label, values]) => ({ label, values })),
      })),
    ),
  )
  process.stdout.write(`wrote ${base}.json and .svg\n`)
}

type Post = (p: string, body: unknown) => Promise<{ json: Record<string, unknown>; path: string | null }>

/** Each request's answer from weft against each peer's (see stats-check.ts): the differences found, by request and peer. */
async function checkAnswers(
  post: Post,
  conn: DuckDBConnection,
  dq: ReturnType<typeof duckSql>,
  ch: { query(sql: string): string } | null,
  end: number,
  rootIds: string[],
): Promise<Record<string, Record<string, string[]>>> {
  const { listValue, timestampValue } = await import('@duckdb/node-api')
  const tsv = (ms: number) => timestampValue(BigInt(ms) * 1000n)
  const duck = async (sql: string, p: unknown[]) => (await conn.runAndReadAll(sql, p as never)).getRowsJS() as unknown[][]
  const chRows = (sql: string) =>
    ch!
      .query(sql.replace('FORMAT Null', 'FORMAT JSONCompactEachRow'))
      .split('\n')
      .filter(Boolean)
      .map((l) => JSON.parse(l) as unknown[])
  const chTime = (ms: number) => new Date(ms).toISOString().slice(0, 19).replace('T', ' ')
  const out: Record<string, Record<string, string[]>> = {}
  for (const [name, days, g] of [
    ['stats_30d', 30, 86400],
    ['stats_24h', 1, 21600],
  ] as const) {
    const start = end - days * DAY
    const weft = weftBucketed((await post('/calls/stats', statsBody(start, end))).json, g)
    const p = [PROJECT, tsv(start), tsv(end)]
    out[name] = { duckdb: compareBucketed(weft, peerBucketed(await duck(dq.calls(g), p), await duck(dq.usage(g), p))) }
    if (ch) {
      // ClickHouse's quantiles sample: its percentiles are left out of the comparison.
      const calls = chRows(chSql.calls(g, chTime(start), chTime(end))).map((r) => r.slice(0, 3))
      out[name]!.clickhouse = compareBucketed(
        { ...weft, calls: new Map([...weft.calls].map(([b, c]) => [b, { n: c.n, e: c.e }])) },
        peerBucketed(calls, chRows(chSql.usage(g, chTime(start), chTime(end)))),
      )
    }
  }
  const count = Number((await post('/calls/query_stats', { project_id: PROJECT, filter: { op_names: [OP] } })).json.count)
  const want = Number((await duck(dq.count, [PROJECT, OP]))[0]![0])
  out.count_op = { duckdb: count === want ? [] : [`count ${count} vs ${want}`] }
  if (ch) {
    const chCount = Number(chRows(chSql.count)[0]![0])
    out.count_op.clickhouse = count === chCount ? [] : [`count ${count} vs ${chCount}`]
  }
  const usage = (await post('/calls/usage', { project_id: PROJECT, call_ids: rootIds })).json
  out.usage_100_roots = { duckdb: compareUsage100(usage, await duck(dq.usage100, [PROJECT, listValue(rootIds)])) }
  if (ch) out.usage_100_roots.clickhouse = compareUsage100(usage, chRows(chSql.usage100(rootIds)))
  return out
}

/**
 * With the server stopped, in this process over the same store: weft's scan path for the stats requests
 * (the engine without rollups, as before they are built; no HTTP), then a full rollup build, timed.
 */
async function inProcess(dir: string, end: number): Promise<{ weft_scan: Record<string, Spread>; rollups_build_s: number }> {
  const store = await CallStore.open(dir, { flushIntervalMs: 0 })
  const catalog = await Catalog.open(dir)
  const scan = new CallStats(store, null, new Prices(catalog, defaultPrices('')))
  const weftScan: Record<string, Spread> = {}
  for (const [name, days] of [
    ['stats_30d', 30],
    ['stats_24h', 1],
  ] as const) {
    const body = statsBody(end - days * DAY, end) as CallStatsReq
    const first = await scan.run(body, end)
    if (first.path !== 'scan') throw new Error(`${name}: the engine without rollups answered by ${first.path}`)
    const times: number[] = []
    for (let r = 0; r < runs; r++) times.push(Math.round((await timed(() => scan.run(body, end))).ms * 10) / 10)
    weftScan[name] = spread(times)
  }
  const rollups = new Rollups(store)
  await rollups.start()
  await store.exclusive(async () => {})
  const build = await timed(() => store.exclusive(() => rollups.rebuild()))
  await store.exclusive(() => rollups.close())
  await store.close()
  await catalog.close()
  return { weft_scan: weftScan, rollups_build_s: Math.round(build.ms / 100) / 10 }
}

await main()
