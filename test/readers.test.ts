import t from 'tap'
import { rm } from 'node:fs/promises'
import { existsSync } from 'node:fs'
import path from 'node:path'
import { CallStore } from '../src/calls/store.js'
import { tempDir } from './helpers/server.js'
import { exportArrowRows, exportCalls } from './helpers/readers.js'
import { rng } from './helpers/rng.js'
import { shuffle, traceParts } from './helpers/merge-order.js'

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
  const viaPool = await exportCalls(store, 'a/b', {}, true)
  const inProcess = await exportCalls(store, 'a/b', {}, false)
  t.ok(viaPool.length > 100, `${viaPool.length} calls`)
  t.same(viaPool, inProcess, 'JSON: the same calls in the same order')
  t.ok(store.readerStats && store.readerStats.completed >= 1, 'the pool ran the read')
  const a = await exportArrowRows(store, 'a/b', {}, true)
  const b = await exportArrowRows(store, 'a/b', {}, false)
  t.equal(a.length, viaPool.length)
  t.same(a, b, 'Arrow: the same rows')
})
