import t from 'tap'
import { rm } from 'node:fs/promises'
import { existsSync } from 'node:fs'
import path from 'node:path'
import { CallStore } from '../src/calls/store.js'
import { tempDir } from './helpers/server.js'
import { plainCalls } from './helpers/plain-calls.js'

// One reader thread, and a compaction's replaced files removed at once unless a read holds them.
process.env.WEFT_READERS = '1'
process.env.WEFT_SEGMENT_RETIRE_MS = '0'

/** n plain calls with ~200-byte inputs. */
const calls = (project: string, from: number, n: number) => plainCalls(project, from, n, (i) => ({ i, pad: 'x'.repeat(200) }))

async function rowsOf(s: { batches: AsyncGenerator<{ numRows: number }> }): Promise<number> {
  let n = 0
  for await (const b of s.batches) n += b.numRows
  return n
}

/**
 * A whole read's rows, tried again (for up to a minute) while the reader thread starts: a read that timed out (504)
 * behind the start stays in the pool until the new thread takes it, so the next waits for it to settle.
 */
async function warmRead(store: CallStore, project: string): Promise<number> {
  for (const deadline = Date.now() + 60_000; ;) {
    try {
      return await rowsOf(await store.streamArrow(project, {}))
    } catch (e) {
      const status = (e as { status?: number }).status
      if ((status !== 504 && status !== 503) || Date.now() > deadline) throw e
      while ((store.readerStats?.running ?? 0) > 0 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50))
    }
  }
}

async function until(cond: () => boolean, what: string): Promise<void> {
  for (let i = 0; i < 500 && !cond(); i++) await new Promise((r) => setTimeout(r, 20))
  if (!cond()) throw new Error(`timed out waiting for ${what}`)
}

t.test('a compaction during a pooled read leaves the files the read pinned until it is done', async (t) => {
  const dir = tempDir()
  t.teardown(() => rm(dir, { recursive: true, force: true }))
  const store = await CallStore.open(dir, { flushIntervalMs: 0, maxSegments: 1000, queryTimeoutMs: 60_000 })
  t.teardown(() => store.close())
  const per = 8_000
  for (let s = 0; s < 3; s++) {
    await store.ingest(calls('pin/p', s * per, per))
    await store.flush()
  }
  const old = store.segments.map((s) => path.join(dir, 'calls', s.file))
  t.equal(old.length, 3, 'three flushed segments')

  // The one reader thread is held by a read whose consumer has taken one batch (the worker waits for credit).
  const first = await store.streamArrow('pin/p', {})
  const head = await first.batches.next()
  t.ok(!head.done, 'the first read is under way')
  // The second read pins its snapshot, then waits in the pool's queue.
  const second = store.streamArrow('pin/p', {})
  await until(() => (store.readerStats?.queued ?? 0) === 1, 'the second read to queue')
  await store.compact()
  t.ok(
    store.segments.every((s) => s.level === 1),
    'the compaction replaced the segments',
  )
  t.ok(
    old.every((f) => existsSync(f)),
    'the replaced files stay while a read holds them',
  )

  t.equal((head.value?.numRows ?? 0) + (await rowsOf(first)), 3 * per, 'the first read saw every call')
  t.equal(await rowsOf(await second), 3 * per, 'the queued read, run after the compaction, read its pinned files whole')
  await until(() => old.every((f) => !existsSync(f)), 'the replaced files to go')
  t.pass('the replaced files are removed once the reads are done')
  t.equal(await rowsOf(await store.streamArrow('pin/p', {})), 3 * per, 'a read after it reads the compacted segment')
})

t.test('bounds: a full read queue answers 503 and a read waiting past the timeout 504', async (t) => {
  process.env.WEFT_READER_QUEUE = '1'
  t.teardown(() => delete process.env.WEFT_READER_QUEUE)
  const dir = tempDir()
  t.teardown(() => rm(dir, { recursive: true, force: true }))
  // The queued read's 504 comes after this wait: short, yet far past a batch's round trip once the reader thread is up
  // (a warm read's first batch took 1.5 s at a load average of 13 on 2 cores). The read holding the thread waits for
  // credit, which no timeout covers, so it is unaffected.
  const store = await CallStore.open(dir, { flushIntervalMs: 0, maxSegments: 1000, queryTimeoutMs: 8_000 })
  t.teardown(() => store.close())
  await store.ingest(calls('b/p', 0, 12_000))
  await store.flush()
  // Whole reads first, until one is done within the timeout: the thread's start (its modules loaded, DuckDB opened)
  // took 14 s on a loaded machine, and would count against the first read's wait for its first batch.
  t.equal(await warmRead(store, 'b/p'), 12_000, 'the reader thread is up')
  const first = await store.streamArrow('b/p', {})
  await first.batches.next()
  const queued = store.streamArrow('b/p', {})
  await until(() => (store.readerStats?.queued ?? 0) === 1, 'a read to queue')
  await t.rejects(store.streamArrow('b/p', {}), { status: 503, message: /./ }, 'a read past the queue bound: 503')
  await t.rejects(queued, { status: 504, message: /./ }, 'the queued read waited longer than the query timeout: 504')
  t.equal((await rowsOf(first)) + 2048, 12_000, 'the read holding the thread is unaffected')
})
