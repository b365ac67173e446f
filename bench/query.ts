/**
 * Call-query bench: `/calls/stream_query` for a filtered, sorted page of 100 calls, against DuckDB
 * running the same query directly on the same Parquet files, in the same run.
 *
 *   npm run build && node dist/bench/query.js [--sizes 1000000,10000000] [--runs 7]
 *   node dist/bench/query.js --stores DIR1,DIR2 [--project bench/stats] [--runs 7]
 *   [--clickhouse off]: leave the chdb side out (its load of 10M calls takes tens of minutes on a busy machine)
 *   [--before ROOT]: a fourth side, `weft_before`: the server of another checkout (a git worktree of an earlier
 *   commit, built, node_modules linked) on the same files, so that a change is measured against its parent in one run
 *
 * Per size: scripts/gen-calls writes the store (segments of start and end parts, as flushes leave
 * them), or `--stores` names existing compacted stores (copied: segments hard-linked, never changed);
 * the store compacts them (timed: segment count, bytes per call before and after; with its page
 * index); then three weft servers serve the query over HTTP, one through the page index and one with
 * `WEFT_PAGE_INDEX=off` (pages merged from the parts), a third with `WEFT_PAGE_BLOCKS=off` (calls fetched by id
 * rather than from the block files), while the peer, a DuckDB instance in this
 * process, runs its best two-step query (ids, then rows) on the compacted Parquet, and ClickHouse (chdb,
 * in this process, when bench/peer-deps is installed) runs Weave's shape of the page on the backend's
 * `calls_merged` table loaded from the same files. Runs alternate between the sides, each with the load
 * average beside it; their answers are checked equal. Then one page is taken apart in-process (the ids
 * step against the fetch of the whole calls, wall and CPU time), as bench/README.md reports it.
 * Writes bench/results/query-<stamp>.json and .svg.
 */
import { copyFileSync, linkSync, mkdirSync, mkdtempSync, readdirSync, rmSync, statSync, writeFileSync } from 'node:fs'
import { createRequire } from 'node:module'
import os from 'node:os'
import path from 'node:path'
import { DuckDBInstance, type DuckDBConnection } from '@duckdb/node-api'
import { CallStore } from '../src/calls/store.js'
import { fetchSql, pagePlan } from '../src/calls/read/order.js'
import { pageCalls } from '../src/calls/read/page-fetch.js'
import { pageIdsPaths } from '../src/calls/read/page-index.js'
import { writeBlockFile } from '../src/calls/storage/page-blocks.js'
import { CALL_FIELDS, CALLS_MERGED, createTable } from '../src/clickhouse/schema.js'
import { parseFlags } from '../src/core/config.js'
import { ROOT_DIR, VERSION } from '../src/core/version.js'
import { genCalls } from '../scripts/gen-calls.js'
import { spreadChart } from './chart.js'
import { spread, startWeft } from './util.js'

const { flags } = parseFlags(process.argv.slice(2))
const stores = flags.stores ? flags.stores.split(',') : null
const sizes = stores ?? (flags.sizes ?? '1000000,10000000').split(',')
const runs = Number(flags.runs ?? 7)
const KEY = 'bench-key'
const PROJECT = flags.project ?? 'bench/query'
const BEFORE_ROOT = flags.before ? path.resolve(flags.before) : null
const OP = `weave:///${PROJECT}/op/op_3:v1`
const MIN_LATENCY_MS = 1000

/** The page a trace UI asks for: one op, root calls, slow ones, newest first, 100 of them. */
const QUERY = {
  project_id: PROJECT,
  filter: { op_names: [OP], trace_roots_only: true },
  query: { $expr: { $gt: [{ $getField: 'summary.weave.latency_ms' }, { $literal: MIN_LATENCY_MS }] } },
  sort_by: [{ field: 'started_at', direction: 'desc' as const }],
  limit: 100,
}

/**
 * The same question as a DuckDB user asks it of the compacted files (one row per call there), in
 * two steps as weft does: the page's ids from the small columns, then the rows of those ids.
 */
const PEER_IDS_SQL = (files: string[]) => `
  SELECT id FROM read_parquet([${files.map((f) => `'${f}'`).join(', ')}])
  WHERE project_id = $1 AND op_name = $2 AND parent_id IS NULL AND deleted_at IS NULL AND started_at IS NOT NULL
    AND epoch_ms(ended_at) - epoch_ms(started_at) > $3
  ORDER BY started_at DESC, id LIMIT 100`
const PEER_ROWS_SQL = (files: string[], n: number) => `
  SELECT * FROM read_parquet([${files.map((f) => `'${f}'`).join(', ')}])
  WHERE id IN (${Array.from({ length: n }, (_, i) => `$${i + 1}`).join(', ')}) ORDER BY started_at DESC, id`

/** A store to measure: a copy of an existing one (segments hard-linked: they never change), or a generated one. */
async function prepareStore(size: string): Promise<{ dir: string; n: number; gen: { ms: number; out: { bytes: number }[] } | null }> {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'weft-query-'))
  if (!stores) {
    const n = Number(size)
    return { dir, n, gen: await timed(() => genCalls({ dataDir: dir, calls: n, project: PROJECT })) }
  }
  mkdirSync(path.join(dir, 'calls'))
  for (const f of readdirSync(path.join(size, 'calls'))) {
    const from = path.join(size, 'calls', f)
    if (f.endsWith('.parquet')) linkSync(from, path.join(dir, 'calls', f))
    else if (statSync(from).isFile() && f !== 'LOCK') copyFileSync(from, path.join(dir, 'calls', f))
  }
  return { dir, n: 0, gen: null }
}

/** A copy of a prepared store sharing its (immutable) files, for a second server. */
function twin(dir: string): string {
  const out = mkdtempSync(path.join(os.tmpdir(), 'weft-query-old-'))
  mkdirSync(path.join(out, 'calls'))
  for (const f of readdirSync(path.join(dir, 'calls')))
    if (f.endsWith('.parquet') || f.endsWith('.pidx') || f.endsWith('.pblk'))
      linkSync(path.join(dir, 'calls', f), path.join(out, 'calls', f))
    else if (f !== 'LOCK') copyFileSync(path.join(dir, 'calls', f), path.join(out, 'calls', f))
  return out
}

async function timed<T>(f: () => Promise<T>): Promise<{ ms: number; out: T }> {
  const t = performance.now()
  const out = await f()
  return { ms: performance.now() - t, out }
}

type Json = { id: string }[]

/** Seconds until a server's `/ready` answers 200 (nothing warming up: log replay, rollups). */
async function ready(url: string): Promise<number> {
  const t = performance.now()
  while ((await fetch(url + '/ready')).status !== 200) await new Promise((r) => setTimeout(r, 500))
  return (performance.now() - t) / 1000
}

/** A page from a weft server, as the client reads it. */
function weftClient(url: string) {
  const auth = 'Basic ' + Buffer.from('api:' + KEY).toString('base64')
  return async (): Promise<Json> => {
    const r = await fetch(url + '/calls/stream_query', {
      method: 'POST',
      headers: { authorization: auth, 'content-type': 'application/json' },
      body: JSON.stringify(QUERY),
    })
    const text = await r.text()
    if (r.status !== 200) throw new Error(`weft answered ${r.status}: ${text.slice(0, 300)}`)
    return text
      .split('\n')
      .filter(Boolean)
      .map((l) => JSON.parse(l) as { id: string })
  }
}

/** The DuckDB peer's two steps; it also turns its rows into JSON text, as weft does for the wire. */
function peerClient(conn: DuckDBConnection, files: string[]) {
  return async (): Promise<Json> => {
    const ids = (await conn.runAndReadAll(PEER_IDS_SQL(files), [PROJECT, OP, MIN_LATENCY_MS])).getRowObjectsJS().map((r) => String(r.id))
    if (ids.length === 0) return []
    const res = await conn.runAndReadAll(PEER_ROWS_SQL(files, ids.length), ids)
    return res
      .getRowObjectsJson()
      .map((r) => JSON.stringify(r))
      .map((l) => JSON.parse(l) as { id: string })
  }
}

interface ChSession {
  query(sql: string, format?: string): string
  cleanup?: () => void
}
function loadChdb(): { Session: new (dir?: string) => ChSession } | null {
  try {
    return createRequire(path.join(ROOT_DIR, 'bench', 'peer-deps', 'package.json'))('chdb') as { Session: new (dir?: string) => ChSession }
  } catch {
    return null
  }
}

/** The merged value of a `calls_merged` field (a tuple of seq and value; see src/clickhouse/schema.ts). */
const v = (c: string) => `max(${c}).2`
const LAYOUT = { database: 'default' }

/**
 * ClickHouse (chdb) with the backend's `calls_merged` (Weave's AggregatingMergeTree ordered by project and id,
 * each field the latest by seq) loaded from the compacted files (one row per call there, so seq 1). Timed.
 */
function loadChdbCalls(ch: ChSession, files: string[]): number {
  const t = performance.now()
  ch.query(createTable(LAYOUT, CALLS_MERGED)[0]!)
  const fields = CALLS_MERGED.columns
    .filter((c) => / SimpleAggregateFunction\(max, Tuple/.test(c))
    .map((c) => c.split(' ')[0]!)
    .map((c) => `(toUInt64(1), ${c}) AS ${c}`)
  for (const f of files)
    ch.query(`INSERT INTO default.calls_merged (project_id, id, ${fields.map((x) => x.split(' AS ')[1]).join(', ')}, deleted_at, input_refs, output_refs, updated_at)
      SELECT project_id, id, ${fields.join(', ')}, deleted_at, input_refs, output_refs, now64(3) FROM file('${f}', Parquet)`)
  ch.query('OPTIMIZE TABLE default.calls_merged FINAL')
  return (performance.now() - t) / 1000
}

/**
 * Weave's page over calls_merged: the page's ids from the light fields (merged per call by GROUP BY, conditions
 * in HAVING, rows narrowed by op first as Weave's query builder does), then the rows of those ids with the
 * large fields. Values are spliced (bench constants and ids read back from ClickHouse, never a client's).
 */
function chdbClient(ch: ChSession) {
  return async (): Promise<Json> => {
    const ids = ch
      .query(
        `SELECT id FROM default.calls_merged
          WHERE project_id = '${PROJECT}' AND (op_name.2 = '${OP}' OR op_name.2 IS NULL)
          GROUP BY project_id, id
          HAVING max(deleted_at) IS NULL AND ${v('op_name')} = '${OP}' AND ${v('parent_id')} IS NULL AND ${v('started_at')} IS NOT NULL
            AND toUnixTimestamp64Milli(${v('ended_at')}) - toUnixTimestamp64Milli(${v('started_at')}) > ${MIN_LATENCY_MS}
          ORDER BY ${v('started_at')} DESC, id LIMIT 100`,
        'JSONEachRow',
      )
      .split('\n')
      .filter(Boolean)
      .map((l) => (JSON.parse(l) as { id: string }).id)
    if (ids.length === 0) return []
    const out = CALL_FIELDS.map(([c]) => c)
    return ch
      .query(
        `SELECT project_id, id, ${out.map((c) => `${v(c)} AS ${c}`).join(', ')} FROM default.calls_merged
          WHERE project_id = '${PROJECT}' AND id IN (${ids.map((id) => `'${id}'`).join(', ')})
          GROUP BY project_id, id HAVING max(deleted_at) IS NULL ORDER BY started_at DESC, id`,
        'JSONEachRow',
      )
      .split('\n')
      .filter(Boolean)
      .map((l) => JSON.parse(l) as { id: string })
  }
}

/**
 * One page taken apart in-process on the store (after the servers stopped): the ids step (every statement
 * before the fetch) against the fetch of the 100 whole calls, wall and CPU milliseconds (the CPU of this
 * process, DuckDB's threads included: less moved by other work on the machine than wall time). The fetch two
 * ways in turn: from the block files (and parsed into calls, as a page answers), and by id as before (the
 * statement alone, rows not turned into calls).
 */
async function pageSteps(dir: string) {
  const store = await CallStore.open(dir, { flushIntervalMs: 0 })
  const out: Record<string, number>[] = []
  const ms = (x: number) => Math.round(x * 10) / 10
  const cpuMs = (c: NodeJS.CpuUsage) => ms((c.user + c.system) / 1000)
  try {
    for (let r = 0; r < runs; r++) {
      const conn = await store.connect()
      try {
        const readAll = async (s: string, p: { values: unknown[] }) => (await conn.runAndReadAll(s, p.values as never)).getRowObjectsJS()
        const indexOnly = pageIdsPaths.index
        const cpu0 = process.cpuUsage()
        const t0 = performance.now()
        const plan = (await pagePlan(PROJECT, QUERY, readAll))!
        const t1 = performance.now()
        const cpu1 = process.cpuUsage()
        const calls = await pageCalls(path.join(dir, 'calls'), PROJECT, plan, readAll, () => {})
        const t2 = performance.now()
        const cpu2 = process.cpuUsage()
        const { sql, params } = fetchSql(PROJECT, plan.ids)
        const rows = await conn.runAndReadAll(sql, params.values)
        const t3 = performance.now()
        if (calls.length !== rows.currentRowCount)
          throw new Error(`the block fetch gave ${calls.length} calls, by id ${rows.currentRowCount}`)
        out.push({
          ids_ms: ms(t1 - t0),
          ids_cpu_ms: cpuMs({ user: cpu1.user - cpu0.user, system: cpu1.system - cpu0.system }),
          fetch_ms: ms(t2 - t1),
          fetch_cpu_ms: cpuMs({ user: cpu2.user - cpu1.user, system: cpu2.system - cpu1.system }),
          fetch_by_id_ms: ms(t3 - t2),
          fetch_by_id_cpu_ms: cpuMs(process.cpuUsage(cpu2)),
          located: plan.located.length,
          // 1: the ids from the index alone (no part newer than it), 0: merged with newer parts.
          index_only: pageIdsPaths.index - indexOnly,
          load: Math.round(os.loadavg()[0]! * 10) / 10,
        })
      } finally {
        conn.closeSync()
      }
    }
  } finally {
    await store.close()
  }
  return out
}

/** The block files' bytes, and the time to write them again (to a scratch name): the cost they add to a compaction. */
async function blockCost(store: CallStore, dir: string) {
  const conn = await store.connect()
  let bytes = 0
  const cpu0 = process.cpuUsage()
  const t0 = performance.now()
  try {
    for (const s of store.segments.filter((x) => x.blocks)) {
      bytes += statSync(path.join(dir, 'calls', s.blocks!)).size
      const scratch = path.join(dir, 'calls', 'blk-rewrite.tmp')
      await writeBlockFile(conn, path.join(dir, 'calls', s.file), scratch)
      rmSync(scratch, { force: true })
    }
  } finally {
    conn.closeSync()
  }
  const cpu = process.cpuUsage(cpu0)
  return { bytes, write_s: Math.round(performance.now() - t0) / 1000, write_cpu_s: Math.round((cpu.user + cpu.system) / 1000) / 1000 }
}

/** Compacts (or, when already compacted, indexes) a prepared store, timed. */
async function compactStore(dir: string) {
  const store = await CallStore.open(dir, { flushIntervalMs: 0 })
  const compaction = await timed(() => store.compact())
  const after = {
    segments: store.segments.length,
    bytes: store.segments.reduce((a, s) => a + s.bytes, 0),
    calls: store.segmentRows,
  }
  const files = store.segments.map((s) => path.join(dir, 'calls', s.file))
  const blocks = await blockCost(store, dir)
  await store.close()
  return { compaction_s: Math.round(compaction.ms) / 1000, after, files, blocks }
}

/** Runs alternate between the sides (each after the other's), with the load average beside each. */
async function measure(sides: Record<string, () => Promise<Json>>) {
  const first: Record<string, Json> = {}
  for (const [k, f] of Object.entries(sides)) first[k] = await f()
  const ref = Object.values(first)[0]!
  for (const [k, v] of Object.entries(first))
    if (v.length !== ref.length || v.some((c, i) => c.id !== ref[i]!.id)) throw new Error(`answers differ: ${k} gave ${v.length} rows`)
  const ms: Record<string, number[]> = Object.fromEntries(Object.keys(sides).map((k) => [k, []]))
  const load: number[] = []
  for (let r = 0; r < runs; r++) {
    load.push(Math.round(os.loadavg()[0]! * 10) / 10)
    for (const [k, f] of Object.entries(sides)) ms[k]!.push(Math.round((await timed(f)).ms * 10) / 10)
  }
  return { rows_returned: ref.length, ms, load }
}

async function main(): Promise<void> {
  const results: Record<string, unknown> = {}
  const rows: { label: string; min: number; median: number; max: number }[] = []
  const chdbLib = flags.clickhouse === 'off' ? null : loadChdb()
  if (!chdbLib && flags.clickhouse !== 'off')
    process.stdout.write('chdb not installed (npm --prefix bench/peer-deps install): ClickHouse peer skipped\n')
  for (const size of sizes) {
    const { dir, n: generated, gen } = await prepareStore(size)
    if (gen) process.stdout.write(`${generated} calls: generated ${gen.out.length} segments in ${(gen.ms / 1000).toFixed(1)} s\n`)
    const { compaction_s, after, files, blocks } = await compactStore(dir)
    const n = generated || after.calls
    process.stdout.write(
      `${size}: compaction (with page index and block files) ${compaction_s} s, ${after.segments} segments, ${(after.bytes / n).toFixed(1)} bytes/call; ` +
        `block files ${(blocks.bytes / n).toFixed(1)} bytes/call, written again in ${blocks.write_s} s (CPU ${blocks.write_cpu_s} s)\n`,
    )
    // ClickHouse loads first: chdb's calls are synchronous (as in bench/stats.ts).
    const chDir = mkdtempSync(path.join(os.tmpdir(), 'weft-query-chdb-'))
    const ch = chdbLib ? new chdbLib.Session(chDir) : null
    const chLoadS = ch ? loadChdbCalls(ch, files) : null
    if (ch) process.stdout.write(`  ClickHouse calls_merged load ${chLoadS!.toFixed(1)} s\n`)
    const oldDir = twin(dir)
    const byIdDir = twin(dir)
    // The merge path takes seconds at 10M on a loaded machine: no 504s in the bench.
    const env = { WEFT_ACCESS_LOG: 'false', WEFT_CALLS_FLUSH_INTERVAL_MS: '0', WEFT_QUERY_TIMEOUT_MS: '600000' }
    const server = await startWeft({ root: ROOT_DIR, dataDir: dir, key: KEY, env })
    const old = await startWeft({ root: ROOT_DIR, dataDir: oldDir, key: KEY, env: { ...env, WEFT_PAGE_INDEX: 'off' } })
    const byId = await startWeft({ root: ROOT_DIR, dataDir: byIdDir, key: KEY, env: { ...env, WEFT_PAGE_BLOCKS: 'off' } })
    const beforeDir = BEFORE_ROOT && twin(dir)
    const before = beforeDir ? await startWeft({ root: BEFORE_ROOT!, dataDir: beforeDir, key: KEY, env }) : null
    const servers = [server, old, byId, ...(before ? [before] : [])]
    // Measured once all have warmed up: a rollup build right after start took the page from ~0.15 s to 0.35-0.6 s.
    const warmupS = await Promise.all(servers.map((x) => ready(x.url)))
    process.stdout.write(`  servers ready after ${warmupS.map((x) => x.toFixed(1)).join(' and ')} s\n`)
    const db = await DuckDBInstance.create(':memory:')
    const conn = await db.connect()
    const sides: Record<string, () => Promise<Json>> = {
      weft: weftClient(server.url),
      weft_by_id: weftClient(byId.url),
      weft_merge: weftClient(old.url),
      ...(before ? { weft_before: weftClient(before.url) } : {}),
      duckdb: peerClient(conn, files),
    }
    if (ch) sides.clickhouse = chdbClient(ch)
    // Answers that differ end the run: the servers stop first, or they would outlive it.
    const m = await measure(sides).finally(async () => {
      conn.closeSync()
      db.closeSync()
      ch?.cleanup?.()
      await Promise.all(servers.map((x) => x.stop()))
    })
    const steps = await pageSteps(dir)
    for (const d of [dir, oldDir, byIdDir, chDir, ...(beforeDir ? [beforeDir] : [])]) rmSync(d, { recursive: true, force: true })
    const s = Object.fromEntries(Object.entries(m.ms).map(([k, v]) => [k, spread(v)]))
    process.stdout.write(
      `  ${Object.entries(s)
        .map(([k, v]) => `${k} ${v.min}/${v.median}/${v.max} ms`)
        .join(', ')}; load ${Math.min(...m.load)}-${Math.max(...m.load)}\n`,
    )
    const keys = ['ids_ms', 'ids_cpu_ms', 'fetch_ms', 'fetch_cpu_ms', 'fetch_by_id_ms', 'fetch_by_id_cpu_ms']
    const breakdown = Object.fromEntries(keys.map((k) => [k, spread(steps.map((x) => x[k]!))]))
    process.stdout.write(
      `  in-process: ${Object.entries(breakdown)
        .map(([k, x]) => `${k} ${Math.round(x.min)}/${Math.round(x.median)}/${Math.round(x.max)}`)
        .join(', ')}; load ${Math.min(...steps.map((x) => x.load))}-${Math.max(...steps.map((x) => x.load))}\n`,
    )
    results[String(n)] = {
      calls: n,
      store: stores ? size : null,
      generate_s: gen ? Math.round(gen.ms) / 1000 : null,
      compaction_s,
      block_files: { ...blocks, bytes_per_call: blocks.bytes / n },
      after_compaction: { ...after, bytes_per_call: after.bytes / n },
      clickhouse_load_s: chLoadS,
      before_root: BEFORE_ROOT,
      servers_ready_s: warmupS,
      page_steps: { ...breakdown, runs: steps },
      rows_returned: m.rows_returned,
      ms: s,
      load_average: m.load,
      runs: m.ms,
    }
    for (const [k, v] of Object.entries(s)) rows.push({ label: `${k} ${n / 1e6}M`, ...v })
  }
  writeResults(results, rows)
}

function writeResults(results: Record<string, unknown>, rows: { label: string; min: number; median: number; max: number }[]): void {
  const stamp = new Date().toISOString().replace(/[:.]/g, '-')
  const outDir = path.join(ROOT_DIR, 'bench', 'results')
  mkdirSync(outDir, { recursive: true })
  const doc = {
    bench: 'query',
    weft_version: VERSION,
    date: new Date().toISOString(),
    machine: { cpus: os.cpus().length, model: os.cpus()[0]?.model, node: process.version },
    setup: {
      query: QUERY,
      weft: 'through the page index, calls from the block files; weft_by_id: the same with WEFT_PAGE_BLOCKS=off (calls fetched by id as before); weft_merge: the same server with WEFT_PAGE_INDEX=off (pages merged from the parts); weft_before (with --before): the server of another checkout on the same files',
      peer: 'DuckDB (@duckdb/node-api, in the bench process) on the same compacted Parquet files, ids first, then the rows',
      clickhouse:
        "chdb (in the bench process) with the ClickHouse backend's calls_merged (src/clickhouse/schema.ts) loaded from the same files; Weave's shape: ids from the light fields (GROUP BY, HAVING), then the rows of those ids",
      page_steps:
        'one page in-process on the store after the servers stopped: the ids step, the fetch from the block files (parsed into calls) and the fetch by id (the statement alone), wall and CPU ms',
      runs,
    },
    results,
  }
  const base = path.join(outDir, `query-${stamp}`)
  writeFileSync(base + '.json', JSON.stringify(doc, null, 2) + '\n')
  writeFileSync(
    base + '.svg',
    spreadChart(`weft ${VERSION} /calls/stream_query, page of 100 (filter, $expr, sort) vs DuckDB and ClickHouse (chdb)`, 'ms', rows),
  )
  process.stdout.write(`wrote ${base}.json and .svg\n`)
}

await main()
