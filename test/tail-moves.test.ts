import t, { type Test } from 'tap'
import { rm } from 'node:fs/promises'
import { DuckDBInstance, type DuckDBConnection } from '@duckdb/node-api'
import { encodeParts } from '../src/calls/ingest/encode.js'
import type { CallPart } from '../src/calls/model.js'
import { Tail, tailMoves } from '../src/calls/storage/tail.js'
import { tempDir } from './helpers/server.js'

// Acknowledged batches move into the tail table together (an insert's cost is mostly fixed): when a read or a flush
// needs them, when `tailMoves.bytes` are staged, or once the first has waited `tailMoves.delayMs` (src/calls/storage/tail.ts).

const part = (id: string, pad = 0): CallPart => ({
  kind: 'start',
  project_id: 'acme/tail-moves',
  id,
  started_us: 1_700_000_000_000_000,
  op_name: 'x'.repeat(pad),
})
const batch = (prefix: string, n: number, pad = 0): Buffer => encodeParts(Array.from({ length: n }, (_, i) => part(`${prefix}${i}`, pad)))
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms))

async function open(t: Test): Promise<{ tail: Tail; conn: DuckDBConnection; rows: () => Promise<number> }> {
  const db = await DuckDBInstance.create(':memory:')
  const conn = await db.connect()
  const dir = tempDir('tail-moves-')
  const tail = await Tail.create(conn, `${dir}/files`)
  t.teardown(async () => {
    conn.closeSync()
    db.closeSync()
    await rm(dir, { recursive: true, force: true })
  })
  const rows = async () => Number((await conn.runAndReadAll('SELECT count(*) FROM call_parts')).getRowsJS()[0]![0])
  return { tail, conn, rows }
}

t.test('batches arriving apart, with no read waiting, share an insert', async (t) => {
  const { tail, rows } = await open(t)
  // Ten batches 10 ms apart: one insert each when every batch moved at once (an idle insert takes a few ms).
  const moved: Promise<number>[] = []
  for (let i = 0; i < 10; i++) {
    moved.push(tail.insert(batch(`b${i}-`, 5), BigInt(1 + i * 5), 1, 5))
    await sleep(10)
  }
  await Promise.all(moved)
  t.equal(await rows(), 50, 'every part is in the table')
  t.ok(tail.timings.inserts.count <= 2, `10 batches in ${tail.timings.inserts.count} insert(s)`)
})

t.test('a read moves what was acknowledged before it at once; a mark waits for no later batch', async (t) => {
  const { tail, rows } = await open(t)
  void tail.insert(batch('a', 3), 1n, 1, 3)
  const t0 = performance.now()
  await tail.visible()
  t.equal(await rows(), 3, 'the read sees the batch acknowledged before it')
  t.comment(`visible after ${(performance.now() - t0).toFixed(1)} ms (the timer is ${tailMoves.delayMs} ms)`)
  const mark = tail.mark()
  void tail.insert(batch('b', 2), 4n, 1, 2)
  await tail.visible(mark)
  t.equal(await rows(), 3, "a request's later read waits only for what its mark counted")
  await tail.visible()
  t.equal(await rows(), 5, 'a read without a mark waits for everything acknowledged')
})

t.test('staged bytes past the bound move without waiting for the timer', async (t) => {
  const { tail, rows } = await open(t)
  // A timer of a minute: the batches can only move by their size.
  const delay = tailMoves.delayMs
  tailMoves.delayMs = 60_000
  t.teardown(() => void (tailMoves.delayMs = delay))
  // Three batches of a third of the bound and more (parts of ~1.1 KB): past it on the third, at once.
  const n = Math.ceil(tailMoves.bytes / 3 / 1000)
  const t0 = performance.now()
  const moved = [
    tail.insert(batch('x', n, 1000), 1n, 1, n),
    tail.insert(batch('y', n, 1000), BigInt(1 + n), 1, n),
    tail.insert(batch('z', n, 1000), BigInt(1 + 2 * n), 1, n),
  ]
  t.ok(tail.unmovedBytes >= tailMoves.bytes, `${tail.unmovedBytes} bytes staged`)
  t.same(await Promise.all(moved), [3 * n, 3 * n, 3 * n], 'all three went in together')
  t.equal(tail.timings.inserts.count, 1, 'in one insert')
  t.ok(performance.now() - t0 < 30_000, `moved after ${(performance.now() - t0).toFixed(1)} ms, not at the timer's minute`)
})

t.test('a settle (a flush, a close) moves the staged batches', async (t) => {
  const { tail, rows } = await open(t)
  // A timer of a minute: only the settle can move the batch in time.
  const delay = tailMoves.delayMs
  tailMoves.delayMs = 60_000
  t.teardown(() => void (tailMoves.delayMs = delay))
  const t0 = performance.now()
  tail.pending(1)
  void tail.insert(batch('s', 4), 1n, 1, 4).then(() => tail.released(1))
  await tail.settled([1])
  t.equal(await rows(), 4, 'in the table once settled')
  t.ok(performance.now() - t0 < 30_000, 'without waiting for the timer')
})
