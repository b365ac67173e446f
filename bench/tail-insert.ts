/**
 * The calls tail's insert, through the store, on the soak's calls (issue 18):
 *
 *   npm run build && node dist/bench/tail-insert.js [--rounds 10] [--records 20] [--in-flight 8] [--batch-size 500]
 *
 * `weft bench trace` bodies (batches of `--batch-size` calls, ~1 KB of inputs and of output) go through the ingest worker's
 * code (prepareIngest) once, beforehand. Each round then hands `--records` log records to CallStore.ingestRecord
 * three times, `--in-flight` at a time: as JSON (`now`: inputs, output and attributes sent without whitespace are JSON
 * strings, copied by DuckDB), as JSON before that (`before`: the same values as raw JSON, parsed and written again by
 * DuckDB), and as the Arrow batches the server's workers log (`arrow`: partsBatch, inserted into the tail through the
 * `weft_arrow_group()` table function, ArrowGroupScan). Sides rotate; process CPU (every thread: DuckDB's too) per
 * 1,000 parts, and the worker-side encode of both JSON ways.
 * Writes bench/results/tail-insert-<stamp>.json.
 */
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { parseFlags } from '../src/core/config.js'
import { ROOT_DIR } from '../src/core/version.js'
import { CallStore } from '../src/calls/store.js'
import { encodeParts } from '../src/calls/ingest/encode.js'
import { ARROW_MAX_PARTS, ARROW_MIN_PARTS } from '../src/calls/ingest/parts-batch.js'
import { prepareIngest } from '../src/calls/ingest/prepare.js'
import { RawJson } from '../src/calls/ingest/raw-json.js'
import { isArrowBatch, walRecord } from '../src/calls/storage/wal.js'
import type { CallPart } from '../src/calls/model.js'
import { ingestBody } from '../src/bench/trace-load.js'
import { traceOptions } from '../src/bench/trace-options.js'
import { spread } from './util.js'

const { flags } = parseFlags(process.argv.slice(2))
const rounds = Number(flags.rounds ?? 10)
const records = Number(flags.records ?? 20)
const inFlight = Number(flags['in-flight'] ?? 8)
const batchSize = Number(flags['batch-size'] ?? 500)
const RAW_FIELDS = ['inputs', 'output', 'attributes'] as const

/** A record's parts, read back from its JSON; with `raw`, the fields the fast path keeps as bytes become RawJson again. */
function partsOf(record: Uint8Array, raw: boolean, exact: boolean): CallPart[] {
  const parts = JSON.parse(Buffer.from(record.subarray(8)).toString()) as Record<string, unknown>[]
  if (raw) for (const p of parts) for (const f of RAW_FIELDS) if (typeof p[f] === 'string') p[f] = new RawJson(Buffer.from(p[f]), [], exact)
  return parts as unknown as CallPart[]
}

const cpuMs = (from: NodeJS.CpuUsage) => {
  const u = process.cpuUsage(from)
  return (u.user + u.system) / 1000
}

const opts = traceOptions({ project: 'bench/tail', 'batch-size': String(batchSize), 'payload-bytes': '1000' })
const now: Uint8Array[] = []
const arrow: Uint8Array[] = []
let parts = 0
for (let i = 0; i < records; i++) {
  const body = Buffer.from(ingestBody(opts))
  const r = await prepareIngest({ route: 'batch', body: Buffer.from(body), userId: 'bench', entities: null })
  const a = await prepareIngest({ route: 'batch', body, userId: 'bench', entities: null, arrow: true })
  if (!r.ok) throw new Error(r.message)
  // A record is an 8-byte header (length, checksum) and its payload.
  if (!a.ok || !isArrowBatch(a.record.subarray(8)))
    throw new Error(`no Arrow batch: batches of ${ARROW_MIN_PARTS} to ${ARROW_MAX_PARTS} parts are Arrow (--batch-size)`)
  now.push(r.record)
  arrow.push(a.record)
  parts += r.count
}
const before = now.map((r) => walRecord(encodeParts(partsOf(r, true, false))))
if (!now.every((r) => Buffer.compare(walRecord(encodeParts(partsOf(r, true, true))), r) === 0)) throw new Error('records differ')

const dir = mkdtempSync(path.join(os.tmpdir(), 'weft-tail-insert-'))
const store = await CallStore.open(dir, { flushRows: 1e9, flushBytes: 2 ** 40, flushIntervalMs: 0 })

/** Per side: the tail's inserts (statements) and their wall time, summed over the rounds. */
const inserts = { now: { count: 0, ms: 0 }, before: { count: 0, ms: 0 }, arrow: { count: 0, ms: 0 } }

async function side(rs: Uint8Array[]): Promise<number> {
  store.resetTimings()
  const t0 = process.cpuUsage()
  let next = 0
  const run = async () => {
    while (next < rs.length) {
      const r = rs[next++]!
      await store.ingestRecord(Buffer.from(r), batchSize)
    }
  }
  await Promise.all(Array.from({ length: inFlight }, run))
  await store.visible()
  return (cpuMs(t0) * 1000) / parts
}

const loadBefore = os.loadavg()[0]!
const out = { now: [] as number[], before: [] as number[], arrow: [] as number[], encodeNow: [] as number[], encodeBefore: [] as number[] }
const SIDES = ['now', 'before', 'arrow'] as const
const recordsOf = { now, before, arrow }
for (let round = 0; round <= rounds; round++) {
  // Round 0 warms up every side; which goes first rotates.
  for (let k = 0; k < SIDES.length; k++) {
    const which = SIDES[(round + k) % SIDES.length]!
    const ms = await side(recordsOf[which])
    if (round === 0) continue
    out[which].push(ms)
    const t = store.stats().timings_ms.tail_inserts
    inserts[which].count += t.count
    inserts[which].ms += t.total_ms
  }
  for (const [key, exact] of [
    ['encodeNow', true],
    ['encodeBefore', false],
  ] as const) {
    const ps = now.map((r) => partsOf(r, true, exact))
    const t0 = process.cpuUsage()
    for (const p of ps) encodeParts(p)
    if (round > 0) out[key].push((cpuMs(t0) * 1000) / parts)
  }
}
await store.close()
rmSync(dir, { recursive: true, force: true })
const f = (xs: number[]) => {
  const s = spread(xs)
  return `${s.min.toFixed(0)} / ${s.median.toFixed(0)} / ${s.max.toFixed(0)}`
}
console.log(
  `load ${os
    .loadavg()
    .map((x) => x.toFixed(1))
    .join(' ')}; ${rounds} rounds of ${parts} parts, CPU ms per 1,000 parts min / median / max`,
)
console.log(`store insert: before ${f(out.before)}, now ${f(out.now)}, arrow ${f(out.arrow)}`)
const wall = (w: (typeof SIDES)[number]) => `${inserts[w].count} inserts, ${((inserts[w].ms * 1000) / (parts * rounds)).toFixed(0)} ms`
console.log(`tail inserts' wall time per 1,000 parts: before ${wall('before')}, now ${wall('now')}, arrow ${wall('arrow')}`)
console.log(`encodeParts:  before ${f(out.encodeBefore)}, now ${f(out.encodeNow)}`)

const stamp = new Date().toISOString().replace(/[:.]/g, '-')
mkdirSync(path.join(ROOT_DIR, 'bench', 'results'), { recursive: true })
const result = {
  date: new Date().toISOString(),
  rounds,
  parts_per_side: parts,
  in_flight: inFlight,
  load_1m: [loadBefore, os.loadavg()[0]!],
}
const file = path.join(ROOT_DIR, 'bench', 'results', `tail-insert-${stamp}.json`)
writeFileSync(file, JSON.stringify({ ...result, cpu_ms_per_1000_parts: out, tail_inserts: inserts }, null, 1))
console.log(`wrote ${file}`)
