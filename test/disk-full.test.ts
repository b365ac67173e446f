import t from 'tap'
import { rm } from 'node:fs/promises'
import { FAST_FLUSH, Ledger, PROJECT, restart, verify, write } from './helpers/crash.js'
import { postJson, startServer, streamQuery, tempDir } from './helpers/server.js'

// A full disk, injected (WEFT_FAILPOINTS=<step>:enospc*N fails the step's first N writes with ENOSPC, then lets
// them through, as if space came back): on the calls log append, the segment write of a flush, a catalog commit and
// a file's bytes. No write is acknowledged without being durable, the server answers 507 and keeps serving reads,
// and once there is room again writes succeed; a restart holds every acknowledged write and none of the refused.
t.test('disk full: 507, reads still served, recovery when space returns', async (t) => {
  const dataDir = tempDir('weft-enospc-')
  t.teardown(() => rm(dataDir, { recursive: true, force: true }))
  const ledger = new Ledger()
  let s = await startServer({ dataDir, env: FAST_FLUSH })
  const key = s.key
  t.equal(await write(s, 'calls', ledger), 200, 'a first batch before the disk fills')
  await s.stop('SIGTERM')
  const points = 'wal.append:enospc*3,flush.before-copy:enospc*2,catalog.before-commit:enospc*2,files.after-data:enospc*1'
  s = await restart(dataDir, key, { WEFT_FAILPOINTS: points })

  const refused = await postJson(s, '/call/upsert_batch', { batch: [] })
  t.equal(refused.status, 200, 'an empty batch logs nothing, so it is not refused')
  const statuses: number[] = []
  for (let i = 0; i < 3; i++) statuses.push(await write(s, 'calls', ledger))
  t.same(statuses, [507, 507, 507], 'the log append fails three times: 507 each')
  t.equal(await write(s, 'calls', ledger), 200, 'the fourth append goes through (space came back)')
  const before = await streamQuery(s, { project_id: PROJECT, columns: ['id'] })
  t.ok(before.length >= 5, `reads are served meanwhile (${before.length} calls)`)
  // Each batch fills the tail: the flushes' segment writes fail twice, the calls stay in the log and tail.
  for (let i = 0; i < 6; i++) t.equal(await write(s, 'calls', ledger), 200, `batch ${i} acknowledged (logged) while flushes fail`)
  const objects = [await write(s, 'object', ledger), await write(s, 'object', ledger), await write(s, 'object', ledger)]
  t.same(objects, [507, 507, 200], 'catalog commits refused twice with 507, then stored')
  const files = [await write(s, 'file', ledger), await write(s, 'file', ledger)]
  t.same(files, [507, 200], "a file's bytes refused once with 507, then stored")
  const obj507 = await postJson(s, '/obj/read', { project_id: PROJECT, object_id: 'nothing', digest: 'latest' })
  t.not(obj507.status, 507, 'reads of the catalog are served')
  await s.stop('SIGKILL')

  s = await restart(dataDir, key)
  t.teardown(() => s.stop())
  await verify(t, s, ledger)
  const calls = new Set((await streamQuery(s, { project_id: PROJECT, columns: ['id'] })).map((c) => c.id))
  const refusedIds = ledger.doubt.filter((w) => w.kind === 'calls').flatMap((w) => w.ids)
  t.equal(refusedIds.filter((id) => calls.has(id)).length, 0, `none of the ${refusedIds.length} refused calls was stored`)
  const versions = await postJson(s, '/objs/query', { project_id: PROJECT, filter: { object_ids: ['crash_obj'] } })
  t.equal(versions.json?.objs?.length, 1, 'only the acknowledged object version exists')
})

t.test("disk full: the 507 is in each family's shape", async (t) => {
  const s = await startServer({ env: { WEFT_FAILPOINTS: 'wal.append:enospc', WEFT_MODEL: 'none' } })
  t.teardown(() => s.stop())
  const r = await postJson(s, '/call/start', {
    start: { project_id: PROJECT, op_name: 'x', started_at: new Date().toISOString(), attributes: {}, inputs: {} },
  })
  t.equal(r.status, 507)
  t.match(r.json, { reason: /Insufficient storage/ }, 'trace family: {"reason"}')
  t.equal(r.headers.get('retry-after'), '30', 'with Retry-After')
  t.equal((await streamQuery(s, { project_id: PROJECT })).length, 0, 'nothing stored, reads served')
})
