import t from 'tap'
import { rm } from 'node:fs/promises'
import { CallStore } from '../src/calls/store.js'
import { tempDir } from './helpers/server.js'
import { plainCalls } from './helpers/plain-calls.js'

/**
 * A client that stops reading an export holds back the reader worker (its credits: readers/protocol.ts) and, since
 * the worker reads a window of start time at a time (readers/worker-read.ts), what the worker holds is a window's
 * calls, not the answer: read whole, DuckDB sorts every call of the export before its first row. 200,000 calls of
 * ~3 KB (~640 MB each answer), two exports stalled after their first batch, the process's RSS measured: read whole
 * they held ~2.2x an answer between them, in windows less than one.
 */

process.env.WEFT_EXPORT_WINDOW_CALLS = '4096'
process.env.WEFT_READERS = '2'
const PROJECT = 'stall/p'
const CALLS = 200_000
/** What DuckDB holds of one call read (its ~3 KB input and the rest), for the bound below. */
const CALL_BYTES = 3200
const MiB = 2 ** 20

/** n calls of ~3 KB inputs (ids in start-time order, as UUIDv7 ids are). */
const calls = (from: number, n: number) => plainCalls(PROJECT, from, n, (i) => ({ i, text: `${i} `.repeat(1000).slice(0, 3000) }))

const rss = () => process.memoryUsage().rss

t.test('two stalled exports through the reader pool hold a window each, not the answer', async (t) => {
  const dir = tempDir()
  t.teardown(() => rm(dir, { recursive: true, force: true }))
  const store = await CallStore.open(dir, { flushIntervalMs: 0, maxSegments: 1000 })
  t.teardown(() => store.close())
  for (let i = 0; i < CALLS; i += 5000) await store.ingest(calls(i, 5000))
  await store.flush()
  await store.compact()

  // The pool's threads and their DuckDB start with the first export: read one whole first, then measure.
  // Its windows are counted as it ends (the stalled ones below never end): the same query reads in windows.
  let n = 0
  const windows = store.exportWindows
  for await (const b of (await store.streamArrow(PROJECT, {})).batches) n += b.numRows
  t.equal(n, CALLS, 'a whole export reads every call')
  t.ok(store.exportWindows - windows > 2, `the pool read it in windows (${store.exportWindows - windows})`)
  const reads = store.readerStats?.reads ?? 0
  global.gc?.()
  const before = rss()

  const stalled = await Promise.all([0, 1].map(async () => (await store.streamArrow(PROJECT, {})).batches))
  for (const s of stalled) t.ok(((await s.next()).value?.numRows ?? 0) > 0, 'the first batch arrives')
  await new Promise((r) => setTimeout(r, 2000))
  const growth = rss() - before
  t.equal((store.readerStats?.reads ?? 0) - reads, 2, 'both read by the pool')
  t.comment(`RSS ${Math.round(before / MiB)} -> ${Math.round((before + growth) / MiB)} MiB with two exports stalled`)
  const answer = CALLS * CALL_BYTES
  t.ok(growth < answer, `RSS grew by ${Math.round(growth / MiB)} MiB (bound: one answer, ${Math.round(answer / MiB)} MiB)`)

  // Leaving the exports stops them; the pool then serves the next in full.
  for (const s of stalled) await s.return(undefined)
  n = 0
  for await (const b of (await store.streamArrow(PROJECT, { sort_by: [{ field: 'started_at', direction: 'desc' }] })).batches)
    n += b.numRows
  t.equal(n, CALLS, 'the next export reads every call')
})
