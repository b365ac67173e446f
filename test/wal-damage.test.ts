import t from 'tap'
import { randomBytes } from 'node:crypto'
import { appendFile, readFile, readdir, rm, stat, writeFile } from 'node:fs/promises'
import path from 'node:path'
import { Wal } from '../src/calls/storage/wal.js'
import { postJson, startServer, streamQuery, tempDir } from './helpers/server.js'

// No chat in this file: its servers start without the built-in model (about 1 s of CPU less per start).
process.env.WEFT_MODEL ??= 'none'

// A damaged record in the middle of a log (a flipped bit, not a crash) must not take the acknowledged records
// after it with it: they are kept, the damage is set aside in the quarantine file and said in the log.

const hex = (n: number) => randomBytes(n / 2).toString('hex')

async function logOf(n: number): Promise<{ file: string; dir: string; offsets: number[] }> {
  const dir = tempDir()
  const file = path.join(dir, 'wal.log')
  const { wal } = await Wal.open(file)
  const offsets: number[] = []
  for (let i = 0; i < n; i++) {
    offsets.push(wal.bytes)
    await wal.append(Buffer.from(JSON.stringify({ i, pad: 'x'.repeat(40 + i) })))
  }
  await wal.close()
  return { file, dir, offsets }
}

const indexes = (records: Buffer[]) => records.map((r) => (JSON.parse(r.toString()) as { i: number }).i)

t.test('a flipped bit in record 2 of 6: the others are replayed, the damage is quarantined, the log rewritten', async (t) => {
  const { file, dir, offsets } = await logOf(6)
  t.teardown(() => rm(dir, { recursive: true, force: true }))
  const data = await readFile(file)
  data[offsets[2]! + 20]! ^= 0x04
  await writeFile(file, data)
  const quarantined: Buffer[] = []
  const opened = await Wal.open(file, async (d) => void quarantined.push(...d))
  t.same(indexes(opened.records), [0, 1, 3, 4, 5], 'the records after the damage are kept')
  t.equal(opened.damaged.length, 1)
  t.equal(quarantined[0]!.length, offsets[3]! - offsets[2]!, 'exactly the damaged record is set aside')
  await opened.wal.append(Buffer.from(JSON.stringify({ i: 6, pad: '' })))
  await opened.wal.close()
  const again = await Wal.open(file, async () => void t.fail('no damage the second time'))
  t.same(indexes(again.records), [0, 1, 3, 4, 5, 6], 'rewritten without the damage; appends follow')
  await again.wal.close()
})

t.test('a damaged length field: found again at the next intact record', async (t) => {
  const { file, dir, offsets } = await logOf(4)
  t.teardown(() => rm(dir, { recursive: true, force: true }))
  const data = await readFile(file)
  data.writeUInt32LE(0x7fffffff, offsets[1]!)
  await writeFile(file, data)
  const opened = await Wal.open(file, async () => {})
  t.same(indexes(opened.records), [0, 2, 3])
  await opened.wal.close()
})

t.test('torn tails stay torn tails: half a record, or zeros past the end, are cut off without quarantine', async (t) => {
  for (const tail of [Buffer.from([50, 0, 0, 0, 1, 2, 3, 4, 9, 9]), Buffer.alloc(4096)]) {
    const { file, dir } = await logOf(3)
    const good = (await stat(file)).size
    await appendFile(file, tail)
    const opened = await Wal.open(file, async () => void t.fail('a torn tail is not quarantined'))
    t.same(indexes(opened.records), [0, 1, 2])
    t.equal(opened.truncatedBytes, tail.length)
    await opened.wal.close()
    t.equal((await stat(file)).size, good, 'cut back to the last intact record')
    await rm(dir, { recursive: true, force: true })
  }
})

t.test('a server whose log was damaged in the middle keeps the acknowledged calls after the damage', async (t) => {
  const dataDir = tempDir()
  t.teardown(() => rm(dataDir, { recursive: true, force: true }))
  const args = ['--calls-flush-rows', '1000000', '--calls-flush-interval-ms', '0']
  const s = await startServer({ dataDir, args })
  const batches = [0, 1, 2].map(() => [hex(16), hex(16)])
  const start = (id: string) => ({
    mode: 'start',
    req: {
      start: {
        project_id: 'acme/wal',
        id,
        trace_id: hex(32),
        op_name: 'op',
        started_at: new Date().toISOString(),
        attributes: {},
        inputs: {},
      },
    },
  })
  for (const ids of batches) t.equal((await postJson(s, '/call/upsert_batch', { batch: ids.map(start) })).status, 200)
  s.proc.kill('SIGKILL')
  await s.exited()
  const calls = path.join(dataDir, 'calls')
  const logs = (await readdir(calls)).filter((f) => f.startsWith('wal-')).sort()
  const file = path.join(calls, logs[logs.length - 1]!)
  const data = await readFile(file)
  // The records are the three batches in order: damage the middle one's payload.
  let off = 0
  const starts: number[] = []
  while (off + 8 <= data.length) (starts.push(off), (off += 8 + data.readUInt32LE(off)))
  t.ok(starts.length >= 3, `${starts.length} records in the log`)
  data[starts[starts.length - 2]! + 12]! ^= 0x10
  await writeFile(file, data)
  const again = await startServer({ dataDir, args })
  t.teardown(() => again.stop())
  const ids = new Set((await streamQuery(again, { project_id: 'acme/wal' })).map((c) => c.id as string))
  for (const id of [...batches[0]!, ...batches[2]!]) t.ok(ids.has(id), `call ${id} of an intact record is there`)
  t.match(again.output(), /damaged stretch/, 'the damage is said in the log')
  t.ok((await readdir(calls)).includes('quarantine.log'), 'and kept in the quarantine file')
})

t.test('a manifest that is not JSON: the start refuses, naming the file', async (t) => {
  const dataDir = tempDir()
  t.teardown(() => rm(dataDir, { recursive: true, force: true }))
  const s = await startServer({ dataDir })
  await s.stop()
  await writeFile(path.join(dataDir, 'calls', 'manifest.json'), '{"segments": [')
  const err = await startServer({ dataDir }).then(
    (x) => (x.stop(), null),
    (e: Error) => e.message,
  )
  t.match(err, /calls manifest \S*manifest\.json cannot be read/, 'the message names the manifest')
})
