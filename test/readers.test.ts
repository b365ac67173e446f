import t from 'tap'
import { rm } from 'node:fs/promises'
import { existsSync } from 'node:fs'
import path from 'node:path'
import { tableFromIPC } from 'apache-arrow'
import { CallStore } from '../src/calls/store.js'
import { ipcStream } from '../src/calls/arrow/ipc.js'
import type { CallRecord, QueryOptions } from '../src/calls/model.js'
import { tempDir } from './helpers/server.js'
import { rng } from './helpers/rng.js'
import { shuffle, traceParts } from './helpers/merge-order.js'

/** An export through the pool (the default) or in-process (WEFT_READERS=0, the path before the pool). */
async function exported(store: CallStore, project: string, opts: QueryOptions, pool: boolean): Promise<CallRecord[]> {
  process.env.WEFT_READERS = pool ? '2' : '0'
  const out: CallRecord[] = []
  try {
    for await (const page of await store.stream(project, opts)) out.push(...page)
  } finally {
    delete process.env.WEFT_READERS
  }
  return out
}

async function arrowRows(store: CallStore, project: string, opts: QueryOptions, pool: boolean): Promise<Record<string, unknown>[]> {
  process.env.WEFT_READERS = pool ? '2' : '0'
  try {
    const { schema, batches } = await store.streamArrow(project, opts)
    const bytes: Buffer[] = []
    for await (const b of ipcStream(schema, batches)) bytes.push(b)
    return tableFromIPC(Buffer.concat(bytes))
      .toArray()
      .map((r) => ({ ...r.toJSON() }))
  } finally {
    delete process.env.WEFT_READERS
  }
}

t.test('an export reads segments in the pool and the tail here, and answers as the in-process read does', async (t) => {
  const dir = tempDir()
  t.teardown(() => rm(dir, { recursive: true, force: true }))
  const store = await CallStore.open(dir, { flushIntervalMs: 0, maxSegments: 1000 })
  t.teardown(() => store.close())
  const r = rng(5)
  const parts = shuffle(Array.from({ length: 60 }, () => traceParts('a/b', r)).flat(), r)
  const half = Math.floor(parts.length / 2)
  await store.ingest(parts.slice(0, half))
  await store.flush()
  await store.ingest(parts.slice(half))
  const viaPool = await exported(store, 'a/b', {}, true)
  const inProcess = await exported(store, 'a/b', {}, false)
  t.ok(viaPool.length > 100, `${viaPool.length} calls`)
  t.same(viaPool, inProcess, 'JSON: the same calls in the same order')
  t.ok(store.readerStats && store.readerStats.completed >= 1, 'the pool ran the read')
  const a = await arrowRows(store, 'a/b', {}, true)
  const b = await arrowRows(store, 'a/b', {}, false)
  t.equal(a.length, viaPool.length)
  t.same(a, b, 'Arrow: the same rows')
})
