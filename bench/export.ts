/**
 * A whole project's calls exported over HTTP (issue 16: "a 1M-call Arrow export streams at ≥ 200 MB/s with flat
 * RSS; the same export as JSON lines reported"):
 *
 *   npm run build && node dist/bench/export.js [--calls 1000000] [--runs 3] [--keep DIR] [--readers N]
 *
 * The store: scripts/gen-calls (30 days, 20 ops, ~300-byte inputs and outputs), compacted, as the stats bench makes
 * it (`--keep DIR` reuses DIR/calls-<n>, which `bench/stats.js --keep DIR` also writes). One server; per run, the
 * export as Arrow IPC (`Accept: application/vnd.apache.arrow.stream`) and as JSON lines, alternating, each read to
 * its end into a file by this process (checked after it is timed). Per export: time to the first byte, total time, bytes and MB/s, and the server's RSS
 * sampled every 100 ms (before, peak). Checks: both answers hold every call once, in the same order (a hash of the
 * ids in order, Arrow read back with apache-arrow). Beside it, DuckDB alone over the same segment files: the
 * same merge and order (the store's statement) copied to a JSON-lines file, no HTTP, as a floor for the JSON side.
 * Writes bench/results/export-<stamp>.json and .svg.
 */
import { createHash } from 'node:crypto'
import { once } from 'node:events'
import { createInterface } from 'node:readline'
import {
  createReadStream,
  createWriteStream,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  readdirSync,
  rmSync,
  statSync,
  writeFileSync,
} from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { DuckDBInstance } from '@duckdb/node-api'
import { RecordBatchReader } from 'apache-arrow'
import { parseFlags } from '../src/core/config.js'
import { ROOT_DIR, VERSION } from '../src/core/version.js'
import { CallStore } from '../src/calls/store.js'
import { FOLDED, latest } from '../src/calls/model.js'
import { genCalls } from '../scripts/gen-calls.js'
import { spreadChart } from './chart.js'
import { spread, startWeft, type Spread } from './util.js'

const { flags } = parseFlags(process.argv.slice(2))
const calls = Number(flags.calls ?? 1_000_000)
const runs = Number(flags.runs ?? 3)
const keepDir = flags.keep ? path.resolve(String(flags.keep)) : null
const readers = flags.readers ? String(flags.readers) : null
const KEY = 'bench-key'
const PROJECT = 'bench/stats'
const ARROW = 'application/vnd.apache.arrow.stream'

const rssMiB = (pid: number) => {
  const m = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))
  return m ? Number(m[1]) / 1024 : 0
}

interface Export {
  ttfb_ms: number
  total_ms: number
  bytes: number
  mb_per_s: number
  rows: number
  ids_hash: string
  rss_before_mib: number
  rss_peak_mib: number
}

/**
 * Reads one export to its end into a file, as `curl -o` would (the check below reads the file afterwards, so
 * decoding Arrow or JSON in this process does not take the 2 cores from the server while it is timed).
 */
async function exportOnce(url: string, pid: number, arrow: boolean, file: string): Promise<Export> {
  const rssBefore = rssMiB(pid)
  let rssPeak = rssBefore
  const timer = setInterval(() => (rssPeak = Math.max(rssPeak, rssMiB(pid))), 100)
  let bytes = 0
  const t0 = performance.now()
  let ttfb = 0
  try {
    const res = await fetch(url + '/calls/stream_query', {
      method: 'POST',
      headers: {
        authorization: 'Basic ' + Buffer.from('api:' + KEY).toString('base64'),
        'content-type': 'application/json',
        accept: arrow ? ARROW : 'application/jsonl',
      },
      body: JSON.stringify({ project_id: PROJECT }),
    })
    if (!res.ok) throw new Error(`${res.status} ${await res.text()}`)
    const out = createWriteStream(file)
    for await (const chunk of res.body as unknown as AsyncIterable<Uint8Array>) {
      if (!ttfb) ttfb = performance.now() - t0
      bytes += chunk.byteLength
      if (!out.write(chunk)) await once(out, 'drain')
    }
    out.end()
    await once(out, 'finish')
  } finally {
    clearInterval(timer)
  }
  const total = performance.now() - t0
  const { rows, ids_hash } = await checkFile(file, arrow)
  return {
    ttfb_ms: Math.round(ttfb),
    total_ms: Math.round(total),
    bytes,
    mb_per_s: Math.round((bytes / 1e6 / (total / 1000)) * 10) / 10,
    rows,
    ids_hash,
    rss_before_mib: Math.round(rssBefore),
    rss_peak_mib: Math.round(rssPeak),
  }
}

/** An answer's calls and a hash of their ids in order: Arrow read back with apache-arrow, JSON lines parsed. */
async function checkFile(file: string, arrow: boolean): Promise<{ rows: number; ids_hash: string }> {
  const hash = createHash('sha256')
  let rows = 0
  if (arrow) {
    const reader = await RecordBatchReader.from(createReadStream(file))
    for await (const batch of reader) {
      const ids = batch.getChild('id')!
      for (let i = 0; i < batch.numRows; i++) hash.update(String(ids.get(i)) + '\n')
      rows += batch.numRows
    }
  } else {
    for await (const line of createInterface({ input: createReadStream(file), crlfDelay: Infinity })) {
      if (!line) continue
      hash.update((JSON.parse(line) as { id: string }).id + '\n')
      rows++
    }
  }
  rmSync(file, { force: true })
  return { rows, ids_hash: hash.digest('hex').slice(0, 16) }
}

/** DuckDB alone: the store's merge and order over the same segment files, written as JSON lines to a file. */
async function duckdbAlone(dir: string): Promise<{ ms: number; bytes: number }> {
  const segs = readdirSync(path.join(dir, 'calls')).filter((f) => f.endsWith('.parquet'))
  const files = segs.map((f) => `'${path.join(dir, 'calls', f)}'`).join(', ')
  const out = path.join(mkdtempSync(path.join(os.tmpdir(), 'weft-export-peer-')), 'calls.jsonl')
  const db = await DuckDBInstance.create(':memory:')
  const c = await db.connect()
  // The store's own merge of a call's parts (model.ts), the same columns.
  const merged = FOLDED.map(latest).join(', ')
  const sql = `COPY (SELECT * FROM (SELECT project_id, id, ${merged}, max(deleted_at) AS deleted_at FROM read_parquet([${files}], union_by_name = true)
      GROUP BY project_id, id) WHERE deleted_at IS NULL AND started_at IS NOT NULL ORDER BY started_at, id) TO '${out}' (FORMAT json)`
  const t0 = performance.now()
  await c.run(sql)
  const ms = performance.now() - t0
  const bytes = statSync(out).size
  c.closeSync()
  rmSync(path.dirname(out), { recursive: true, force: true })
  return { ms: Math.round(ms), bytes }
}

async function main(): Promise<void> {
  const root = keepDir ?? mkdtempSync(path.join(os.tmpdir(), 'weft-export-'))
  const dir = path.join(root, `calls-${calls}`)
  if (!existsSync(path.join(dir, 'generated.json'))) {
    rmSync(dir, { recursive: true, force: true })
    mkdirSync(dir, { recursive: true })
    const now = Date.now()
    const t0 = performance.now()
    await genCalls({ dataDir: dir, calls, project: PROJECT, days: 30, ops: 20, models: 5, traceSize: 100, end: new Date(now) })
    const gen = performance.now() - t0
    const store = await CallStore.open(dir, { flushIntervalMs: 0 })
    const t1 = performance.now()
    await store.compact()
    const compaction = performance.now() - t1
    await store.close()
    writeFileSync(path.join(dir, 'generated.json'), JSON.stringify({ gen: { ms: gen }, compaction: { ms: compaction }, now }))
    process.stdout.write(`${calls} calls generated (${(gen / 1000).toFixed(1)} s) and compacted (${(compaction / 1000).toFixed(1)} s)\n`)
  }
  const server = await startWeft({ root: ROOT_DIR, dataDir: dir, key: KEY, env: readers ? { WEFT_READERS: readers } : {} })
  const arrow: Export[] = []
  const jsonl: Export[] = []
  const peer: { ms: number; bytes: number }[] = []
  const tmp = mkdtempSync(path.join(os.tmpdir(), 'weft-export-answer-'))
  try {
    for (let r = 0; r < runs; r++) {
      arrow.push(await exportOnce(server.url, server.pid, true, path.join(tmp, 'answer.arrow')))
      jsonl.push(await exportOnce(server.url, server.pid, false, path.join(tmp, 'answer.jsonl')))
      const a = arrow.at(-1)!
      const j = jsonl.at(-1)!
      process.stdout.write(
        `run ${r + 1}: arrow ${a.mb_per_s} MB/s (${a.total_ms} ms, first byte ${a.ttfb_ms} ms, RSS ${a.rss_before_mib} -> ${a.rss_peak_mib} MiB); ` +
          `json lines ${j.mb_per_s} MB/s (${j.total_ms} ms, first byte ${j.ttfb_ms} ms, RSS peak ${j.rss_peak_mib} MiB)\n`,
      )
    }
  } finally {
    await server.stop()
    rmSync(tmp, { recursive: true, force: true })
  }
  for (let r = 0; r < runs; r++) peer.push(await duckdbAlone(dir))
  const all = [...arrow, ...jsonl]
  const equal = all.every((e) => e.rows === calls && e.ids_hash === all[0]!.ids_hash)
  const sp = (xs: Export[], k: keyof Export): Spread => spread(xs.map((e) => e[k] as number))
  const result = {
    date: new Date().toISOString(),
    weft_version: VERSION,
    calls,
    runs,
    readers: readers ?? '0 (in-process)',
    cpus: os.cpus().length,
    load_1m: os.loadavg()[0],
    answers_equal: equal,
    arrow: {
      mb_per_s: sp(arrow, 'mb_per_s'),
      total_ms: sp(arrow, 'total_ms'),
      ttfb_ms: sp(arrow, 'ttfb_ms'),
      rss_peak_mib: sp(arrow, 'rss_peak_mib'),
      bytes: arrow[0]!.bytes,
    },
    jsonl: {
      mb_per_s: sp(jsonl, 'mb_per_s'),
      total_ms: sp(jsonl, 'total_ms'),
      ttfb_ms: sp(jsonl, 'ttfb_ms'),
      rss_peak_mib: sp(jsonl, 'rss_peak_mib'),
      bytes: jsonl[0]!.bytes,
    },
    duckdb_alone_jsonl_file: { total_ms: spread(peer.map((p) => p.ms)), bytes: peer[0]!.bytes },
    each: { arrow, jsonl, duckdb_alone: peer },
  }
  const stamp = result.date.replace(/[:.]/g, '-')
  const out = path.join(ROOT_DIR, 'bench', 'results', `export-${stamp}`)
  writeFileSync(out + '.json', JSON.stringify(result, null, 1) + '\n')
  const secs = (s: Spread) => ({ min: s.min / 1000, median: s.median / 1000, max: s.max / 1000 })
  writeFileSync(
    out + '.svg',
    spreadChart(`${calls.toLocaleString('en')} calls exported (s, min/median/max of ${runs})`, 'seconds', [
      { label: 'weft Arrow', ...secs(result.arrow.total_ms) },
      { label: 'weft JSON lines', ...secs(result.jsonl.total_ms) },
      { label: 'DuckDB to file', ...secs(result.duckdb_alone_jsonl_file.total_ms) },
    ]),
  )
  process.stdout.write(
    `answers equal: ${equal}; arrow ${result.arrow.mb_per_s.median} MB/s median, json lines ${result.jsonl.mb_per_s.median}; DuckDB alone to a file ${result.duckdb_alone_jsonl_file.total_ms.median} ms\nwrote ${out}.json and .svg\n`,
  )
  if (!keepDir) rmSync(root, { recursive: true, force: true })
}

await main()
