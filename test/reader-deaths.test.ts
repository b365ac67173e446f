import t from 'tap'
import { existsSync } from 'node:fs'
import { readFile } from 'node:fs/promises'
import path from 'node:path'
import { randomBytes } from 'node:crypto'
import { startServer, postJson, type TestServer } from './helpers/server.js'

// A reader worker (WEFT_READERS) dies in the middle of a /calls/stream_query export: the export must end as a
// failure the client can see (not a hang, not a shorter answer that looks whole), the pool starts another worker,
// the next export is whole, and the dead read's pins are released so a compaction can remove the files it held.

const MARKER = 'weft-failpoint:reader-worker-exit'
const PROJECT = 'acme/reader-deaths'
const PER_BATCH = 1500
const BATCHES = 4
const hex = (n: number) => randomBytes(n / 2).toString('hex')

function batch(ids: string[]) {
  const trace = hex(32)
  const t0 = Date.now() - 60_000
  return ids.flatMap((id, i) => [
    {
      mode: 'start',
      req: {
        start: {
          project_id: PROJECT,
          id,
          trace_id: trace,
          op_name: `op${i % 3}`,
          started_at: new Date(t0 + i).toISOString(),
          attributes: {},
          inputs: { i },
        },
      },
    },
    { mode: 'end', req: { end: { project_id: PROJECT, id, ended_at: new Date(t0 + i + 1).toISOString(), output: i, summary: {} } } },
  ])
}

async function ingest(s: TestServer, n: number): Promise<string[]> {
  const ids = Array.from({ length: n }, () => hex(16))
  const r = await postJson(s, '/call/upsert_batch', { batch: batch(ids) })
  if (r.status !== 200) throw new Error(`ingest answered ${r.status} ${r.text}`)
  return ids
}

/** The export as the client sees it: status, the lines read, and whether the body ended cleanly. */
async function exportAll(s: TestServer, query?: unknown): Promise<{ status: number; ids: string[]; cut: string | null; ms: number }> {
  const t0 = performance.now()
  const r = await fetch(s.url + '/calls/stream_query', {
    method: 'POST',
    headers: { ...s.basic(), 'content-type': 'application/json' },
    body: JSON.stringify({ project_id: PROJECT, columns: ['id'], ...(query ? { query } : {}) }),
    signal: AbortSignal.timeout(20_000),
  })
  let text = ''
  let cut: string | null = null
  try {
    text = await r.text()
  } catch (e) {
    cut = String((e as Error).cause ?? e)
  }
  const ids = text
    .split('\n')
    .filter(Boolean)
    .map((l) => (JSON.parse(l) as { id: string }).id)
  return { status: r.status, ids, cut, ms: performance.now() - t0 }
}

/** A filter every call matches, carrying the marker in a bound value so the worker reading it dies. */
const doomedQuery = { $expr: { $not: [{ $eq: [{ $getField: 'op_name' }, { $literal: MARKER }] }] } }

async function manifest(dir: string): Promise<{ file: string; rows: number }[]> {
  return (JSON.parse(await readFile(path.join(dir, 'calls', 'manifest.json'), 'utf8')) as { segments: { file: string; rows: number }[] })
    .segments
}

async function segmentFiles(dir: string): Promise<string[]> {
  return (await manifest(dir)).map((x) => path.join(dir, 'calls', x.file))
}

async function until(cond: () => Promise<boolean>, what: string): Promise<void> {
  for (let i = 0; i < 300; i++) {
    if (await cond()) return
    await new Promise((r) => setTimeout(r, 50))
  }
  throw new Error(`timed out waiting for ${what}`)
}

t.test('a reader worker killed mid-export: the export fails visibly, the pool recovers, pins are released', async (t) => {
  const s = await startServer({
    env: {
      WEFT_READERS: '2',
      WEFT_FAILPOINTS: 'reader-worker-exit',
      WEFT_SEGMENT_RETIRE_MS: '0',
      WEFT_CALLS_FLUSH_ROWS: '10',
      WEFT_CALLS_FLUSH_INTERVAL_MS: '0',
      WEFT_MODEL: 'none',
    },
  })
  t.teardown(() => s.stop())
  const all: string[] = []
  for (let b = 0; b < BATCHES; b++) all.push(...(await ingest(s, PER_BATCH)))
  const flushed = async () => (await manifest(s.dataDir)).reduce((n, x) => n + x.rows, 0)
  await until(async () => (await flushed()) >= all.length, 'the batches to be flushed')
  const before = await segmentFiles(s.dataDir)

  // Two deaths with two threads: every worker the pool started is gone at least once.
  for (const round of [1, 2]) {
    const dead = await exportAll(s, doomedQuery)
    const failed = dead.status !== 200 || dead.cut !== null
    t.ok(failed, `death ${round}: the export fails (status ${dead.status}, cut: ${dead.cut}, ${dead.ids.length} lines)`)
    t.ok(dead.ids.length < all.length, `death ${round}: fewer than all ${all.length} calls were sent`)
    t.ok(dead.ms < 15_000, `death ${round}: answered in ${Math.round(dead.ms)} ms, no hang`)
  }
  t.match(s.output(), /stream failed|reader worker failed/i, 'the failure is logged')

  const next = await exportAll(s)
  t.equal(next.status, 200, 'the next export: 200')
  t.equal(next.cut, null, 'and ends cleanly')
  t.same([...next.ids].sort(), [...all].sort(), `and holds every call once (${next.ids.length})`)
  const again = await exportAll(s, { $expr: { $eq: [{ $getField: 'op_name' }, { $literal: 'op1' }] } })
  t.equal(again.ids.length, all.filter((_, i) => (i % PER_BATCH) % 3 === 1).length, 'a filtered export after it is exact')

  // More flushes, one at a time, push the store past its segment limit (8): the compaction retires the files the
  // dead reads pinned, and removes them only if those pins were released.
  let extra = 0
  for (let b = 0; b < 20 && before.some((f) => existsSync(f)); b++) {
    const n = (await manifest(s.dataDir)).length
    extra += (await ingest(s, 20)).length
    await until(async () => (await manifest(s.dataDir)).length !== n, 'a flush')
  }
  await until(async () => before.every((f) => !existsSync(f)), 'the compaction to remove the old segments')
  t.pass('the segments the dead reads held were removed by the compaction')
  const after = await exportAll(s)
  t.equal(after.ids.length, all.length + extra, 'an export after the compaction: every call')
  t.equal(s.proc.exitCode, null, 'the server kept running')
})
