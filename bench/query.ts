/**
 * Call-query bench: `/calls/stream_query` for a filtered, sorted page of 100 calls, against DuckDB
 * running the same query directly on the same Parquet files, in the same run.
 *
 *   npm run build && node dist/bench/query.js [--sizes 1000000,10000000] [--runs 7]
 *
 * Per size: scripts/gen-calls writes the store (segments of start and end parts, as flushes leave
 * them); the store compacts them (timed: segment count, bytes per call before and after); then weft
 * serves the query over HTTP while the peer, a DuckDB instance in this process, reads the compacted
 * Parquet. Runs alternate between the two. Writes bench/results/query-<stamp>.json and .svg.
 */
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { DuckDBInstance } from '@duckdb/node-api'
import { CallStore } from '../src/calls/store.js'
import { parseFlags } from '../src/core/config.js'
import { ROOT_DIR, VERSION } from '../src/core/version.js'
import { genCalls } from '../scripts/gen-calls.js'
import { spreadChart } from './chart.js'
import { spread, startWeft } from './util.js'

const { flags } = parseFlags(process.argv.slice(2))
const sizes = (flags.sizes ?? '1000000,10000000').split(',').map(Number)
const runs = Number(flags.runs ?? 7)
const KEY = 'bench-key'
const PROJECT = 'bench/query'
const OP = `weave:///${PROJECT}/op/op_3:v1`
const MIN_LATENCY_MS = 1000

/** The page a trace UI asks for: one op, slow calls, newest first, 100 of them. */
const QUERY = {
  project_id: PROJECT,
  filter: { op_names: [OP] },
  query: { $expr: { $gt: [{ $getField: 'summary.weave.latency_ms' }, { $literal: MIN_LATENCY_MS }] } },
  sort_by: [{ field: 'started_at', direction: 'desc' }],
  limit: 100,
}

/** The same question as a DuckDB user asks it of the compacted files (one row per call there). */
const PEER_SQL = (files: string[]) => `
  SELECT * FROM read_parquet([${files.map((f) => `'${f}'`).join(', ')}])
  WHERE project_id = $1 AND op_name = $2 AND deleted_at IS NULL AND started_at IS NOT NULL
    AND date_diff('millisecond', started_at, ended_at) > $3
  ORDER BY started_at DESC LIMIT 100`

async function timed<T>(f: () => Promise<T>): Promise<{ ms: number; out: T }> {
  const t = performance.now()
  const out = await f()
  return { ms: performance.now() - t, out }
}

async function main(): Promise<void> {
  const results: Record<string, unknown> = {}
  const rows: { label: string; min: number; median: number; max: number }[] = []
  for (const n of sizes) {
    const dir = mkdtempSync(path.join(os.tmpdir(), 'weft-query-'))
    const gen = await timed(() => genCalls({ dataDir: dir, calls: n, project: PROJECT }))
    const before = { segments: gen.out.length, bytes: gen.out.reduce((a, s) => a + s.bytes, 0) }
    process.stdout.write(`${n} calls: generated ${before.segments} segments, ${before.bytes} bytes in ${(gen.ms / 1000).toFixed(1)} s\n`)

    const store = await CallStore.open(dir, { flushIntervalMs: 0 })
    const compaction = await timed(() => store.compact())
    const after = { segments: store.segments.length, bytes: store.segments.reduce((a, s) => a + s.bytes, 0) }
    const files = store.segments.map((s) => path.join(dir, 'calls', s.file))
    await store.close()
    process.stdout.write(
      `  compaction: ${(compaction.ms / 1000).toFixed(1)} s, ${after.segments} segment, ${(after.bytes / n).toFixed(1)} bytes/call\n`,
    )

    const server = await startWeft({
      root: ROOT_DIR,
      dataDir: dir,
      key: KEY,
      env: { WEFT_ACCESS_LOG: 'false' },
    })
    const auth = 'Basic ' + Buffer.from('api:' + KEY).toString('base64')
    const weft = async () => {
      const r = await fetch(server.url + '/calls/stream_query', {
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
    const db = await DuckDBInstance.create(':memory:')
    const conn = await db.connect()
    const peer = async () => {
      const res = await conn.runAndReadAll(PEER_SQL(files), [PROJECT, OP, MIN_LATENCY_MS])
      // The peer also turns its rows into JSON text, as weft does for the wire.
      return res
        .getRowObjectsJson()
        .map((r) => JSON.stringify(r))
        .map((l) => JSON.parse(l) as { id: string })
    }
    // Warm both (file metadata, caches), and check they agree.
    const [w0, p0] = [await weft(), await peer()]
    const same = w0.length === p0.length && w0.every((c, i) => c.id === p0[i]!.id)
    if (!same) throw new Error(`weft and DuckDB disagree: ${w0.length} vs ${p0.length} rows`)
    const wm: number[] = []
    const pm: number[] = []
    for (let r = 0; r < runs; r++) {
      wm.push((await timed(weft)).ms)
      pm.push((await timed(peer)).ms)
    }
    conn.closeSync()
    db.closeSync()
    await server.stop()
    rmSync(dir, { recursive: true, force: true })
    const w = spread(wm.map((x) => Math.round(x * 10) / 10))
    const p = spread(pm.map((x) => Math.round(x * 10) / 10))
    process.stdout.write(
      `  weft ${w.min}/${w.median}/${w.max} ms, DuckDB ${p.min}/${p.median}/${p.max} ms, ratio ${(w.median / p.median).toFixed(2)}\n`,
    )
    results[String(n)] = {
      calls: n,
      rows_returned: w0.length,
      generate_s: Math.round(gen.ms) / 1000,
      before_compaction: { ...before, bytes_per_call: before.bytes / n },
      compaction_s: Math.round(compaction.ms) / 1000,
      after_compaction: { ...after, bytes_per_call: after.bytes / n },
      weft_ms: w,
      duckdb_ms: p,
      ratio_weft_over_duckdb: Math.round((w.median / p.median) * 100) / 100,
      runs: { weft: wm, duckdb: pm },
    }
    rows.push({ label: `weft ${n / 1e6}M`, ...w }, { label: `DuckDB ${n / 1e6}M`, ...p })
  }
  const stamp = new Date().toISOString().replace(/[:.]/g, '-')
  const outDir = path.join(ROOT_DIR, 'bench', 'results')
  mkdirSync(outDir, { recursive: true })
  const doc = {
    bench: 'query',
    weft_version: VERSION,
    date: new Date().toISOString(),
    machine: { cpus: os.cpus().length, model: os.cpus()[0]?.model, node: process.version },
    setup: { query: QUERY, peer: 'DuckDB (@duckdb/node-api, in the bench process) on the same compacted Parquet files', runs },
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
