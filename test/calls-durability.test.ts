import t from 'tap'
import { randomBytes } from 'node:crypto'
import { appendFile, rm, stat } from 'node:fs/promises'
import path from 'node:path'
import { readdirSync, readFileSync } from 'node:fs'
import { Wal } from '../src/calls/storage/wal.js'
import { startServer, tempDir } from './helpers/server.js'

// No chat in this file: its servers start without the built-in model (about 1 s of CPU less per start).
process.env.WEFT_MODEL ??= 'none'

const hex = (n: number) => randomBytes(n / 2).toString('hex')

t.test('WAL: a torn tail is cut off, intact records survive', async (t) => {
  const dir = tempDir()
  t.teardown(() => rm(dir, { recursive: true, force: true }))
  const file = path.join(dir, 'wal.log')
  const { wal } = await Wal.open(file)
  await Promise.all(Array.from({ length: 50 }, (_, i) => wal.append(Buffer.from(JSON.stringify({ i })))))
  await wal.close()
  const good = (await stat(file)).size
  // A crash in the middle of a write: a length header promising more bytes than arrived.
  const torn = Buffer.alloc(8 + 5)
  torn.writeUInt32LE(100, 0)
  await appendFile(file, torn)
  const again = await Wal.open(file)
  t.equal(again.records.length, 50)
  t.same(
    again.records.map((r) => JSON.parse(r.toString()).i),
    Array.from({ length: 50 }, (_, i) => i),
    'in order',
  )
  t.equal(again.truncatedBytes, 13)
  t.equal((await stat(file)).size, good, 'file cut back to the last intact record')
  // A flipped byte inside the last record fails its checksum.
  await again.wal.append(Buffer.from('{"i":50}'))
  await again.wal.close()
  await appendFile(file, Buffer.concat([Buffer.from([8, 0, 0, 0, 1, 2, 3, 4]), Buffer.from('{"i":51}')]))
  const third = await Wal.open(file)
  t.equal(third.records.length, 51, 'the record with a bad checksum is dropped')
  await third.wal.close()
})

for (const flushRows of ['200000', '1500'])
  t.test(
    `SIGKILL during heavy ingest (flush every ${flushRows} parts): every acknowledged call is there after restart, once`,
    async (t) => {
      const dataDir = tempDir()
      t.teardown(() => rm(dataDir, { recursive: true, force: true }))
      const project = 'acme/durable'
      const env = { WEFT_CALLS_FLUSH_ROWS: flushRows }
      let s = await startServer({ dataDir, env })
      const headers = { ...s.basic(), 'content-type': 'application/json' }
      const acked = new Set<string>()
      let stop = false
      let batches = 0
      const writer = async () => {
        while (!stop) {
          const ids = Array.from({ length: 50 }, () => hex(16))
          const trace = hex(32)
          const batch = ids.flatMap((id) => [
            {
              mode: 'start',
              req: {
                start: {
                  project_id: project,
                  id,
                  trace_id: trace,
                  op_name: 'ingest',
                  started_at: new Date().toISOString(),
                  attributes: {},
                  inputs: { x: 'y'.repeat(200) },
                },
              },
            },
            {
              mode: 'end',
              req: {
                end: {
                  project_id: project,
                  id,
                  ended_at: new Date().toISOString(),
                  output: { ok: true },
                  summary: { usage: { m: { prompt_tokens: 1 } } },
                },
              },
            },
          ])
          try {
            const r = await fetch(s.url + '/call/upsert_batch', { method: 'POST', headers, body: JSON.stringify({ batch }) })
            if (r.status === 200) {
              await r.json()
              for (const id of ids) acked.add(id)
              batches++
            }
          } catch {
            return // the server is gone
          }
        }
      }
      const writers = Array.from({ length: 8 }, writer)
      await new Promise((r) => setTimeout(r, 2500))
      // Then on until more than 500 calls are acknowledged and, with small flushes, the manifest lists a first segment:
      // a loaded machine may need longer than 2.5 s for either (at a load average of ~10 on 2 cores, 500 calls took
      // that long). A segment file the manifest does not name yet is removed at the next start, its parts still logged.
      const flushed = () => {
        try {
          return JSON.parse(readFileSync(path.join(dataDir, 'calls', 'manifest.json'), 'utf8')).segments.length > 0
        } catch {
          return false
        }
      }
      const ready = () => acked.size > 500 && (flushRows === '200000' || flushed())
      for (let i = 0; i < 300 && !ready(); i++) await new Promise((r) => setTimeout(r, 100))
      s.proc.kill('SIGKILL')
      stop = true
      await Promise.all(writers)
      await s.exited()
      t.ok(acked.size > 500, `acknowledged ${acked.size} calls in ${batches} batches before the kill`)

      s = await startServer({ dataDir, env })
      t.teardown(() => s.stop())
      const segments = readdirSync(path.join(dataDir, 'calls')).filter((f) => f.endsWith('.parquet')).length
      if (flushRows !== '200000') t.ok(segments > 0, `${segments} segments were flushed before the kill`)
      const r = await fetch(s.url + '/calls/stream_query', {
        method: 'POST',
        headers: { ...s.basic(), 'content-type': 'application/json' },
        body: JSON.stringify({ project_id: project, columns: ['id', 'summary'] }),
      })
      const calls = (await r.text())
        .split('\n')
        .filter(Boolean)
        .map((l) => JSON.parse(l))
      const seen = new Map<string, number>()
      for (const c of calls) seen.set(c.id, (seen.get(c.id) ?? 0) + 1)
      const missing = [...acked].filter((id) => !seen.has(id))
      t.equal(missing.length, 0, `no acknowledged call lost (${acked.size} acknowledged, ${calls.length} present)`)
      t.equal([...seen.values()].filter((n) => n > 1).length, 0, 'none twice')
      const unfinished = calls.filter((c) => acked.has(c.id) && c.summary.weave.status !== 'success')
      t.equal(unfinished.length, 0, 'acknowledged starts and ends both survived')
    },
  )
