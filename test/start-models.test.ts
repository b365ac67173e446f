import t from 'tap'
import { mkdir, readdir, rm } from 'node:fs/promises'
import path from 'node:path'
import { postJson, runCli, startServer, tempDir, type TestServer } from './helpers/server.js'

// `weft serve` starts its model workers before it loads the server's modules and opens the catalog (src/models.ts):
// the built-in model is then made before the data dir's lock is held, and a model that fails to load fails a start
// that has opened other things meanwhile.

t.test('two starts on one fresh data dir: one serves the built-in model, the other stops at the lock', async (t) => {
  const dataDir = tempDir()
  t.teardown(() => rm(dataDir, { recursive: true, force: true }))
  const starts = await Promise.allSettled([startServer({ dataDir }), startServer({ dataDir })])
  const up = starts.filter((s): s is PromiseFulfilledResult<TestServer> => s.status === 'fulfilled').map((s) => s.value)
  const failed = starts.filter((s): s is PromiseRejectedResult => s.status === 'rejected').map((s) => String(s.reason))
  t.teardown(() => Promise.all(up.map((s) => s.stop())))
  t.equal(up.length, 1, 'one of them listens')
  t.match(failed, [/exited with 1 before listening[\s\S]*lock/i], 'the other exits, saying the catalog is locked')
  const chat = await postJson(up[0]!, '/v1/chat/completions', {
    model: 'weft-tiny',
    messages: [{ role: 'user', content: 'hi' }],
    max_tokens: 3,
    seed: 1,
  })
  t.equal(chat.status, 200, 'the one that listens answers with the built-in model')
  t.same(await readdir(path.join(dataDir, 'models')), ['weft-tiny'], 'one model dir; no copy of the loser left beside it')
})

t.test('a model that fails to load fails the start, which closes what it opened and exits', async (t) => {
  const dataDir = tempDir()
  t.teardown(() => rm(dataDir, { recursive: true, force: true }))
  const empty = path.join(dataDir, 'empty-model')
  await mkdir(empty)
  const r = await runCli(['serve', '--port', '0', '--data-dir', dataDir, '--model', empty], { WEFT_LOG_LEVEL: 'warn' })
  t.equal(r.code, 1, 'exit code 1')
  t.match(r.stderr, /weft: model .*empty-model.*no config\.json/, 'the model error is what it says')
  t.notOk(r.stdout.includes('listening'), 'it never listened')
  const again = await startServer({ dataDir, args: ['--model', 'none'] })
  t.teardown(() => again.stop())
  t.pass('the catalog is free again')
})
