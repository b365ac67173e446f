import t from 'tap'
import { rm } from 'node:fs/promises'
import { DuckDBInstance } from '@duckdb/node-api'
import { encodeParts } from '../src/calls/ingest/encode.js'
import { RawJson } from '../src/calls/ingest/raw-json.js'
import type { CallPart } from '../src/calls/model.js'
import { tempDir } from './helpers/server.js'

// The group file's first two writes find the disk full (read when failpoints.js loads, so set before tail.js is).
process.env.WEFT_FAILPOINTS = 'tail.file:enospc*2'
const { Tail, tailMoves } = await import('../src/calls/storage/tail.js')

// These await each insert themselves, with no read to move it: batches move at the next turn rather than after
// the 100 ms a server's batches may wait for others (test/tail-moves covers that).
tailMoves.delayMs = 0

// The tail reads a group of batches as one JSON file and numbers each part by its place in it (see Tail.moveNow):
// only batches whose seqs follow on in one log generation may share a group, whatever order they are handed over in.

const part = (id: string): CallPart => ({
  kind: 'start',
  project_id: 'acme/tail-groups',
  id,
  started_us: 1_700_000_000_000_000,
  inputs: new RawJson(Buffer.from(`{ "id" : "${id}", "n": [1, 2.50] }`), []),
  usage: [{ model: 'm', input_tokens: 1 }],
})
const batch = (prefix: string, n: number): Buffer => encodeParts(Array.from({ length: n }, (_, i) => part(`${prefix}${i}`)))

t.test('a disk too full for a group file: the batch is retried until it goes in', async (t) => {
  const db = await DuckDBInstance.create(':memory:')
  const conn = await db.connect()
  const dir = tempDir('tail-groups-')
  const tail = await Tail.create(conn, `${dir}/files`)
  t.equal(await tail.insert(batch('z', 3), 1n, 1, 3), 3, 'the batch went in after two failed writes')
  t.ok(tail.oomRetries >= 1 && tail.failure === null, `retried (${tail.oomRetries}), no failure`)
  conn.closeSync()
  db.closeSync()
  await rm(dir, { recursive: true, force: true })
})

t.test('batches handed over out of seq order, across generations, and a replay group: every part numbered as logged', async (t) => {
  const db = await DuckDBInstance.create(':memory:')
  const conn = await db.connect()
  const dir = tempDir('tail-groups-')
  const tail = await Tail.create(conn, `${dir}/files`)
  // Logged as a (seqs 1-3), b (4-5), c (6-9), d (10-11), e (12-13, the next log); handed over as a, c, d, b, e at once:
  // while a is read, c and d go together (their seqs follow on), then b, then e.
  const [a, b, c, d, e] = [batch('a', 3), batch('b', 2), batch('c', 4), batch('d', 2), batch('e', 2)]
  const n = await Promise.all([
    tail.insert(a, 1n, 1, 3),
    tail.insert(c, 6n, 1, 4),
    tail.insert(d, 10n, 1, 2),
    tail.insert(b, 4n, 1, 2),
    tail.insert(e, 12n, 2, 2),
  ])
  t.same(n, [3, 6, 6, 2, 2], "parts each batch's group added")
  // A replay's group: records of one log numbered in a row from 14, counted by the insert.
  t.equal(await tail.insertRecords([batch('f', 2), batch('g', 3)], 14n, 3), 5, 'the replay group added its 5 parts')
  const rows = (await conn.runAndReadAll('SELECT seq, id, wal_gen, inputs, usage[1].input_tokens FROM call_parts ORDER BY seq')).getRowsJS()
  const expected = ['a0', 'a1', 'a2', 'b0', 'b1', 'c0', 'c1', 'c2', 'c3', 'd0', 'd1', 'e0', 'e1', 'f0', 'f1', 'g0', 'g1', 'g2']
  t.same(
    rows.map((r) => [Number(r[0]), r[1], r[2]]),
    expected.map((id, i) => [i + 1, id, id < 'e' ? 1 : id < 'f' ? 2 : 3]),
    'seq, id and log generation of every part',
  )
  t.equal(rows[0]![3], '{"id":"a0","n":[1,2.5]}', 'a raw value is stored as its JSON text')
  t.equal(Number(rows[0]![4]), 1, 'usage rows kept')
  conn.closeSync()
  db.closeSync()
  await rm(dir, { recursive: true, force: true })
})
