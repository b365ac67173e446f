import t from 'tap'
import { rm } from 'node:fs/promises'
import { tempDir } from './helpers/server.js'
import { openAnalytics, startPart, endPart } from '../src/index.js'

// The store reads its Parquet segments through the OS page cache only: DuckDB's own copy of the bytes it reads
// (external file cache) grew with every segment read (open.ts says why).
t.test("reading segments leaves nothing in DuckDB's file cache", async (t) => {
  const dir = tempDir()
  t.teardown(() => rm(dir, { recursive: true, force: true }))
  const a = await openAnalytics(dir, { flushIntervalMs: 0 })
  t.teardown(() => a.close())
  await a.ready()
  const P = 'e/file-cache'
  const base = Date.parse('2026-05-01T00:00:00Z')
  for (let round = 0; round < 3; round++) {
    const parts = Array.from({ length: 2000 }, (_, i) => {
      const k = round * 2000 + i
      const id = `01900000-0000-7000-e000-${k.toString(16).padStart(12, '0')}`
      const started = new Date(base + k * 1000).toISOString()
      return [
        startPart(
          { project_id: P, id, trace_id: id, op_name: 'op', started_at: started, attributes: {}, inputs: { k, pad: 'x'.repeat(200) } },
          'me',
        ),
        endPart({ project_id: P, id, ended_at: started, output: { k }, summary: {} }),
      ]
    }).flat()
    await a.store.ingest(parts)
    await a.store.flush()
  }
  const rows = await a.store.query(P, { sort_by: [{ field: 'started_at', direction: 'asc' }] })
  t.equal(rows.length, 6000, 'every call read back from the segments')
  const conn = await a.store.connect()
  t.teardown(() => conn.closeSync())
  const cached = (
    await conn.runAndReadAll("SELECT coalesce(sum(memory_usage_bytes), 0) FROM duckdb_memory() WHERE tag = 'EXTERNAL_FILE_CACHE'")
  ).getRows()[0]![0]
  t.equal(Number(cached), 0, 'no bytes held by the external file cache')
})
