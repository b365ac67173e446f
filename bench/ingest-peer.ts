/**
 * The ClickHouse peer of the ingest bench, run as a process of its own (pinned to the server's CPUs by
 * bench/ingest.ts): chdb inserting the same calls into weft's ClickHouse `call_parts` (Weave's shape: MergeTree ordered
 * by `(project_id, id)`) as JSONEachRow, in process: no HTTP, no validation, no log, no fsync. What it inserts is what
 * weft stores for a `weft bench trace` batch: the batch's start and end items made into parts as weft's ingest does
 * (startPart / endPart, folded into one part per call) and written as the ClickHouse backend writes parts (src/clickhouse/parts.ts).
 * That text is made once, with holes for the ids and times; every insert fills it with fresh ids (UUIDv7 at the
 * insert's time), so no two calls are the same, as the load generator does for weft. Filling is a join (~1 ms a
 * batch) and is inside the timed loop; ClickHouse's background merges run meanwhile and are part of the figure.
 *
 *   node dist/bench/ingest-peer.js DIR SECONDS BATCH  -> one JSON line: { calls, seconds, inserts }
 */
import { endPart, foldParts, startPart } from '../src/calls/ingest/parts.js'
import type { EndedCall, StartedCall } from '../src/schemas/calls-write.js'
import { ingestBody } from '../src/bench/trace-load.js'
import { uuidv7 } from '../src/bench/random.js'
import type { TraceOptions } from '../src/bench/trace-options.js'
import { partRow } from '../src/clickhouse/parts.js'
import { CALL_PARTS, createTable } from '../src/clickhouse/schema.js'
import { loadChdb } from './tables-peer.js'

const [dir, secondsArg, batchArg] = process.argv.slice(2)
const seconds = Number(secondsArg)
const batch = Number(batchArg)
const chdb = loadChdb()
if (!chdb || !dir) {
  process.stdout.write(JSON.stringify({ error: 'chdb not installed (cd bench/peer-deps && npm install)' }) + '\n')
  process.exit(1)
}

/** The batch as JSONEachRow, split at its holes: even places are text, odd places name the hole (see fill). */
function template(): string[] {
  const o = { project: 'bench/ingest', batchSize: batch, payloadBytes: 1000, models: 3 } as TraceOptions
  const body = JSON.parse(ingestBody(o)) as { batch: { mode: string; req: { start?: StartedCall; end?: EndedCall } }[] }
  const parts = foldParts(body.batch.map((item) => (item.mode === 'start' ? startPart(item.req.start!, 'bench') : endPart(item.req.end!))))
  if (parts.length !== batch) throw new Error(`${parts.length} parts for ${batch} calls`)
  const lines = parts.map((p, i) => {
    const row = partRow(p, 0n)
    return JSON.stringify({ ...row, id: `@@ID${i}@@`, trace_id: '@@TRACE@@', seq: '@@SEQ@@', started_at: '@@T@@', ended_at: '@@T@@' })
  })
  return lines.join('\n').split(/@@(ID\d+|TRACE|SEQ|T)@@/)
}

function fill(holes: string[], seq: bigint): Buffer {
  const now = Date.now()
  const at = new Date(now).toISOString().replace('T', ' ').slice(0, -1) + '000'
  const trace = uuidv7(now).replaceAll('-', '')
  const ids = Array.from({ length: batch }, () => uuidv7(now))
  let k = 0n
  const text = holes
    .map((h, i) => (i % 2 === 0 ? h : h === 'TRACE' ? trace : h === 'T' ? at : h === 'SEQ' ? String(seq + k++) : ids[Number(h.slice(2))]!))
    .join('')
  return Buffer.from(text)
}

const session = new chdb.Session(dir)
for (const q of createTable({ database: 'default' }, CALL_PARTS)) session.query(q)
const holes = template()
// Runs go one after another into one directory (as weft's into one server): the check below counts this run's rows.
const count = () => Number(session.query('SELECT count() FROM call_parts', 'CSV').trim())
const before = count()
let calls = 0
let inserts = 0
let seq = 1n
const t0 = performance.now()
while (performance.now() - t0 < seconds * 1000) {
  await session.insert({ table: 'call_parts', values: fill(holes, seq), format: 'JSONEachRow' })
  seq += BigInt(batch)
  calls += batch
  inserts++
}
const elapsed = (performance.now() - t0) / 1000
const stored = count() - before
if (stored !== calls) throw new Error(`chdb holds ${stored} more calls after ${calls} inserted`)
process.stdout.write(JSON.stringify({ calls, seconds: elapsed, inserts }) + '\n')
session.cleanup?.()
