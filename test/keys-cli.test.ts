import t from 'tap'
import { rm } from 'node:fs/promises'
import { runCli, startServer, tempDir } from './helpers/server.js'

// No chat in this file: its servers start without the built-in model (about 1 s of CPU less per start).
process.env.WEFT_MODEL ??= 'none'

const basic = (k: string) => ({ authorization: 'Basic ' + Buffer.from('api:' + k).toString('base64') })

t.test('first start creates an admin key and prints it once', async (t) => {
  const dataDir = tempDir()
  t.teardown(() => rm(dataDir, { recursive: true, force: true }))
  const first = await startServer({ dataDir, key: null })
  const m = /shown this once[^\n]*\n\n\s+(weft_\S+)/.exec(first.output())
  t.ok(m, 'the key is printed')
  const key = m![1]!
  const ok = await fetch(first.url + '/admin/keys', { headers: basic(key) })
  t.equal(ok.status, 200, 'the printed key is an admin key')
  t.equal(await first.stop(), 0, 'clean exit on SIGTERM')

  const second = await startServer({ dataDir, key: null })
  t.notOk(/shown this once/.test(second.output()), 'not printed again')
  t.notOk(second.output().includes(key), 'and the key is nowhere in the output')
  t.equal((await fetch(second.url + '/admin/keys', { headers: basic(key) })).status, 200, 'the key survives a restart')
  t.equal(await second.stop('SIGINT'), 0)
})

t.test('weft keys create/list/revoke on a stopped server', async (t) => {
  const dataDir = tempDir()
  t.teardown(() => rm(dataDir, { recursive: true, force: true }))
  const made = await runCli(['keys', 'create', '--user', 'bob', '--entities', 'acme,labs', '--name', 'bob laptop', '--data-dir', dataDir])
  t.equal(made.code, 0, made.stderr)
  const key = made.stdout.trim()
  t.match(key, /^weft_/)
  const list = await runCli(['keys', 'list', '--data-dir', dataDir])
  t.equal(list.code, 0)
  t.match(list.stdout, /bob\s+acme,labs/)
  t.notOk(list.stdout.includes(key), 'list never prints keys')
  const id = /(key_[0-9a-f]{12})/.exec(list.stdout)![1]!

  // A server started on this data dir with WEFT_API_KEY set accepts both keys.
  const s = await startServer({ dataDir })
  const body = JSON.stringify({ project_id: 'acme/x', start: '2026-01-01T00:00:00Z', end: '2026-01-02T00:00:00Z' })
  t.equal((await fetch(s.url + '/calls/stats', { method: 'POST', headers: basic(key), body })).status, 200)
  t.equal(
    (await fetch(s.url + '/calls/stats', { method: 'POST', headers: basic(key), body: body.replace('acme/x', 'other/x') })).status,
    403,
  )

  // While the server holds the catalog, the CLI goes through its admin API.
  const viaNoKey = await runCli(['keys', 'list', '--data-dir', dataDir], { WEFT_API_KEY: '' })
  t.equal(viaNoKey.code, 1)
  t.match(viaNoKey.stderr, /holds the catalog; pass an admin key/)
  const via = await runCli(['keys', 'revoke', id, '--data-dir', dataDir], { WEFT_API_KEY: s.key })
  t.equal(via.code, 0, via.stderr)
  t.equal(
    (await fetch(s.url + '/calls/stats', { method: 'POST', headers: basic(key), body })).status,
    401,
    'revoked through the running server',
  )
  const created = await runCli(['keys', 'create', '--user', 'carol', '--data-dir', dataDir], { WEFT_API_KEY: s.key })
  t.equal(created.code, 0, created.stderr)
  t.equal((await fetch(s.url + '/calls/stats', { method: 'POST', headers: basic(created.stdout.trim()), body })).status, 200)
  t.equal(await s.stop(), 0)

  const after = await runCli(['keys', 'list', '--data-dir', dataDir])
  t.match(after.stdout, new RegExp(`${id}.*revoked`))
  t.match(after.stdout, /carol/)
})

t.test('CLI input errors', async (t) => {
  const dataDir = tempDir()
  t.teardown(() => rm(dataDir, { recursive: true, force: true }))
  const noUser = await runCli(['keys', 'create', '--data-dir', dataDir])
  t.equal(noUser.code, 2)
  t.match(noUser.stderr, /needs --user/)
  const badEntity = await runCli(['keys', 'create', '--user', 'x', '--entities', 'a b', '--data-dir', dataDir])
  t.equal(badEntity.code, 1)
  t.match(badEntity.stderr, /entity "a b"/)
  const badFlag = await runCli(['serve', '--prot', '1'])
  t.equal(badFlag.code, 2)
  t.match(badFlag.stderr, /unknown flag --prot/)
  const badPort = await runCli(['serve', '--port', '99999'])
  t.equal(badPort.code, 2)
  t.match(badPort.stderr, /port must be an integer/)
  const unknownRevoke = await runCli(['keys', 'revoke', 'key_000000000000', '--data-dir', dataDir])
  t.equal(unknownRevoke.code, 1)
})
