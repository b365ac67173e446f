import t from 'tap'
import { existsSync } from 'node:fs'
import { readFile, rm, stat, writeFile } from 'node:fs/promises'
import path from 'node:path'
import { startServer, tempDir } from './helpers/server.js'
import { ADMIN_KEY_FILE, saveFirstAdminKey } from '../src/catalog/keys.js'

// The servers run without a model: only the key and the admin routes matter here.
const noModel = ['--model', 'none']

t.test('the first start keeps the admin key it created in <data dir>/admin-key, mode 0600', async (t) => {
  const dataDir = tempDir()
  t.teardown(() => rm(dataDir, { recursive: true, force: true }))
  const file = path.join(dataDir, ADMIN_KEY_FILE)
  const first = await startServer({ dataDir, key: null, args: noModel })
  t.ok(existsSync(file), 'the file exists')
  const before = await stat(file)
  t.equal(before.mode & 0o777, 0o600, 'readable and writable by its owner only')
  const text = await readFile(file, 'utf8')
  t.match(text, /^weft_\S+\n$/, 'the key and a newline')
  const key = text.trim()
  t.ok(first.output().includes(key), 'the same key as the one printed')
  t.ok(first.output().includes(file), 'the output says where the key is kept')
  t.equal((await fetch(first.url + '/admin/keys', { headers: first.basic(key) })).status, 200, 'the kept key is an admin key')
  t.equal(await first.stop(), 0)

  const second = await startServer({ dataDir, key: null, args: noModel })
  t.equal(await readFile(file, 'utf8'), text, 'a second start leaves the file as it is')
  const after = await stat(file)
  t.equal(after.mtimeMs, before.mtimeMs, 'not even rewritten')
  t.equal(after.mode & 0o777, 0o600)
  t.equal((await fetch(second.url + '/admin/keys', { headers: second.basic(key) })).status, 200, 'the key still works')
  t.equal(await second.stop(), 0)
})

t.test('with WEFT_API_KEY set no file is written', async (t) => {
  const dataDir = tempDir()
  t.teardown(() => rm(dataDir, { recursive: true, force: true }))
  const s = await startServer({ dataDir, args: noModel })
  t.notOk(existsSync(path.join(dataDir, ADMIN_KEY_FILE)), 'no admin-key file')
  t.equal(await s.stop(), 0)
})

t.test('saveFirstAdminKey never overwrites an existing file', async (t) => {
  const dataDir = tempDir()
  t.teardown(() => rm(dataDir, { recursive: true, force: true }))
  const file = path.join(dataDir, ADMIN_KEY_FILE)
  t.equal(await saveFirstAdminKey(dataDir, 'weft_first'), file, 'written: its path')
  t.equal(await readFile(file, 'utf8'), 'weft_first\n')
  await writeFile(file, 'kept by hand\n')
  t.equal(await saveFirstAdminKey(dataDir, 'weft_second'), undefined, 'there already: not written')
  t.equal(await readFile(file, 'utf8'), 'kept by hand\n', 'the existing file is untouched')
})
