/**
 * Call-query bench: `/calls/stream_query` for a filtered, sorted page of 100 calls, against DuckDB
 * running the same query directly on the same Parquet files, in the same run.
 *
 *   npm run build && node dist/bench/query.js [--sizes 1000000,10000000] [--runs 7]
 *   node dist/bench/query.js --stores DIR1,DIR2 [--project bench/stats] [--runs 7]
 *
 * Per size: scripts/gen-calls writes the store (segments of start and end parts, as flushes leave
 * them), or `--stores` names existing compacted stores (copied: segments hard-linked, never changed);
 * the store compacts them (timed: segment count, bytes per call before and after; with its page
 * index); then two weft servers serve the query over HTTP, one through the page index and one with
 * `WEFT_PAGE_INDEX=off` (pages merged from the parts), while the peer, a DuckDB instance in this
 * process, runs its best two-step query (ids, then rows) on the compacted Parquet. Runs alternate
 * between the three, each with the load average beside it; their answers are checked equal.
 * Writes bench/results/query-<stamp>.json and .svg.
 */
import { copyFileSync, linkSync, mkdirSync, mkdtempSync, readdirSync, rmSync, statSync, writeFileSync } from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { DuckDBInstance, type DuckDBConnection } from '@duckdb/node-api'
import { CallStore } from '../src/calls/store.js'
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
const OP = `weave:///${PROJECT}/op/op_3:v1`
const MIN_LATENCY_MS = 1000

/** The page a trace UI asks for: one op, root calls, slow ones, newest first, 100 of them. */
const QUERY = {
  project_id: PROJECT,
  filter: { op_names: [OP], trace_roots_only: true },
  query: { $expr: { $gt: [{ $getField: 'summary.weave.latency_ms' }, { $literal: MIN_LATENCY_MS }] } },
  sort_by: [{ field: 'started_at', direction: 'desc' }],
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
    if (f.endsWith('.parquet') || f.endsWith('.pidx')) linkSync(path.join(dir, 'calls', f), path.join(out, 'calls', f))
    else if (f !== 'LOCK') copyFileSync(path.join(dir, 'calls', f), path.join(out, 'calls', f))
  return out
}

async function timed<T>(f: () => Promise<T>): Promise<{ ms: number; out: T }> {
  const t = performance.now()
  const out = await f()
  return { ms: performance.now() - t, out }
}

type Json = { id: string }[]

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
  await store.close()
  return { compaction_s: Math.round(compaction.ms) / 1000, after, files }
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
  for (const size of sizes) {
    const { dir, n: generated, gen } = await prepareStore(size)
    if (gen) process.stdout.write(`${generated} calls: generated ${gen.out.length} segments in ${(gen.ms / 1000).toFixed(1)} s\n`)
    const { compaction_s, after, files } = await compactStore(dir)
    const n = generated || after.calls
    process.stdout.write(
      `${size}: compaction (with page index) ${compaction_s} s, ${after.segments} segments, ${(after.bytes / n).toFixed(1)} bytes/call\n`,
    )
    const oldDir = twin(dir)
    // The merge path takes seconds at 10M on a loaded machine: no 504s in the bench.
    const env = { WEFT_ACCESS_LOG: 'false', WEFT_CALLS_FLUSH_INTERVAL_MS: '0', WEFT_QUERY_TIMEOUT_MS: '600000' }
    const server = await startWeft({ root: ROOT_DIR, dataDir: dir, key: KEY, env })
    const old = await startWeft({ root: ROOT_DIR, dataDir: oldDir, key: KEY, env: { ...env, WEFT_PAGE_INDEX: 'off' } })
    const db = await DuckDBInstance.create(':memory:')
    const conn = await db.connect()
    const m = await measure({ weft: weftClient(server.url), weft_merge: weftClient(old.url), duckdb: peerClient(conn, files) })
    conn.closeSync()
    db.closeSync()
    await Promise.all([server.stop(), old.stop()])
    for (const d of [dir, oldDir]) rmSync(d, { recursive: true, force: true })
    const s = Object.fromEntries(Object.entries(m.ms).map(([k, v]) => [k, spread(v)]))
    process.stdout.write(
      `  ${Object.entries(s)
        .map(([k, v]) => `${k} ${v.min}/${v.median}/${v.max} ms`)
        .join(', ')}; load ${Math.min(...m.load)}-${Math.max(...m.load)}\n`,
    )
    results[String(n)] = {
      calls: n,
      store: stores ? size : null,
      generate_s: gen ? Math.round(gen.ms) / 1000 : null,
      compaction_s,
      after_compaction: { ...after, bytes_per_call: after.bytes / n },
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
      weft: 'through the page index; weft_merge: the same server with WEFT_PAGE_INDEX=off (pages merged from the parts)',
      peer: 'DuckDB (@duckdb/node-api, in the bench process) on the same compacted Parquet files, ids first, then the rows',
      runs,
    },
    results,
  }
  const base = path.join(outDir, `query-${stamp}`)
  writeFileSync(base + '.json', JSON.stringify(doc, null, 2) + '\n')
  writeFileSync(
    base + '.svg',
    spreadChart(`weft ${VERSION} /calls/stream_query, page of 100 (filter, $expr, sort) vs DuckDB on the same Parquet`, 'ms', rows),
  )
  process.stdout.write(`wrote ${base}.json and .svg\n`)
}

await main()
