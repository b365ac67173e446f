import t from 'tap'
import { createHash, randomBytes } from 'node:crypto'
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs'
import { rm } from 'node:fs/promises'
import http from 'node:http'
import path from 'node:path'
import zlib from 'node:zlib'
import { DuckDBInstance, blobValue } from '@duckdb/node-api'
import { postJson, startServer, tempDir, type TestServer } from './helpers/server.js'
import { pointWeaveAt } from './helpers/weave.js'
import { catalogAt } from './helpers/catalog.js'

const MiB = 1024 * 1024

/** Weave's file digest, written out here from its definition: base64 of SHA-256, '+'→'X', '/'→'Y', unpadded. */
function weaveDigest(sha256: Buffer): string {
  return sha256.toString('base64').replace(/\+/g, 'X').replace(/\//g, 'Y').replace(/=+$/, '')
}
const digestOf = (b: Uint8Array) => weaveDigest(createHash('sha256').update(b).digest())

async function upload(s: TestServer, project: string, bytes: Uint8Array, extra: Record<string, string> = {}, auth = s.basic()) {
  const form = new FormData()
  form.append('project_id', project)
  for (const [k, v] of Object.entries(extra)) form.append(k, v)
  form.append('file', new Blob([bytes]), 'blob')
  const r = await fetch(s.url + '/file/create', { method: 'POST', headers: auth, body: form })
  return { status: r.status, json: (await r.json()) as any }
}

async function content(s: TestServer, project: string, digest: string, auth = s.basic()) {
  const r = await fetch(s.url + '/file/content', {
    method: 'POST',
    headers: { ...auth, 'content-type': 'application/json' },
    body: JSON.stringify({ project_id: project, digest }),
  })
  return { status: r.status, bytes: Buffer.from(await r.arrayBuffer()) }
}

async function totalSize(s: TestServer, project: string, auth = s.basic()): Promise<number> {
  const r = await postJson(s, '/files/query_stats', { project_id: project }, auth)
  return r.json.total_size_bytes
}

/** Peak and current resident memory of a process, in bytes (Linux). */
function memory(pid: number): { hwm: number; rss: number } {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8')
  const kb = (name: string) => Number(new RegExp(`^${name}:\\s+(\\d+) kB`, 'm').exec(status)![1]) * 1024
  return { hwm: kb('VmHWM'), rss: kb('VmRSS') }
}

/** Every file under `<data>/files`, except in-flight temporaries. */
function storedFiles(dataDir: string): string[] {
  const root = path.join(dataDir, 'files')
  if (!existsSync(root)) return []
  return readdirSync(root, { recursive: true, encoding: 'utf8' })
    .filter((p) => !p.startsWith('tmp') && statSync(path.join(root, p)).isFile())
    .sort()
}
const tmpFiles = (dataDir: string) => readdirSync(path.join(dataDir, 'files', 'tmp'))

const BOUNDARY = 'weft-test-boundary-7d1c'
function formParts(project: string): { head: Buffer; tail: Buffer } {
  const head =
    `--${BOUNDARY}\r\nContent-Disposition: form-data; name="project_id"\r\n\r\n${project}\r\n` +
    `--${BOUNDARY}\r\nContent-Disposition: form-data; name="file"; filename="big.bin"\r\n` +
    `Content-Type: application/octet-stream\r\n\r\n`
  return { head: Buffer.from(head), tail: Buffer.from(`\r\n--${BOUNDARY}--\r\n`) }
}

/** A raw upload request to /file/create for a file of `size` bytes (no Content-Length when `chunked`), with the form parts to send around them. */
function uploadRequest(s: TestServer, project: string, size: number, chunked = false) {
  const { head, tail } = formParts(project)
  const req = http.request(s.url + '/file/create', {
    method: 'POST',
    headers: {
      ...s.basic(),
      'content-type': `multipart/form-data; boundary=${BOUNDARY}`,
      ...(chunked ? {} : { 'content-length': String(head.length + size + tail.length) }),
    },
  })
  return { req, head, tail }
}

interface StreamedUpload {
  status: number
  body: any
  sha256: Buffer
}

/**
 * A multipart upload of `size` bytes made as it is sent (1 MiB random chunks, hashed on the way), with a
 * Content-Length, honouring the socket's backpressure; `stopAfter` bytes: the client goes away there.
 */
function streamUpload(s: TestServer, project: string, size: number, stopAfter?: number, chunked = false): Promise<StreamedUpload> {
  const { req, head, tail } = uploadRequest(s, project, size, chunked)
  const hash = createHash('sha256')
  return new Promise((resolve, reject) => {
    let status = 0
    let text = ''
    const done = () => resolve({ status, body: status ? JSON.parse(text || 'null') : null, sha256: hash.digest() })
    req.on('response', (res) => {
      status = res.statusCode!
      res.on('data', (d) => (text += d))
      res.on('end', done)
    })
    // The server may answer (413) and close while we are still sending: the answer, if it came, is what counts.
    req.on('error', (e) => (stopAfter === undefined ? reject(e) : done()))
    void (async () => {
      req.write(head)
      for (let sent = 0; sent < size;) {
        if (stopAfter !== undefined && sent >= stopAfter) {
          req.destroy()
          resolve({ status: 0, body: null, sha256: Buffer.alloc(0) })
          return
        }
        const chunk = randomBytes(Math.min(MiB, size - sent))
        hash.update(chunk)
        sent += chunk.length
        if (!req.write(chunk)) await new Promise((r) => req.once('drain', r))
        if (req.destroyed) return
      }
      req.end(tail)
    })()
  })
}

/** Sends only the headers of an upload of `size` bytes (as a client waiting for 100-continue would) and reads the answer. */
function refusedUnread(s: TestServer, project: string, size: number): Promise<{ status: number; text: string }> {
  const { req } = uploadRequest(s, project, size)
  return new Promise((resolve, reject) => {
    req.on('response', (res) => {
      let text = ''
      res.on('data', (d) => (text += d))
      res.on('end', () => {
        resolve({ status: res.statusCode!, text })
        req.destroy()
      })
    })
    req.on('error', reject)
    req.flushHeaders()
  })
}

/** Reads /file/content as a stream, hashing it, never holding it whole. */
function streamDownload(s: TestServer, project: string, digest: string): Promise<{ status: number; size: number; sha256: Buffer }> {
  return new Promise((resolve, reject) => {
    const req = http.request(s.url + '/file/content', {
      method: 'POST',
      headers: { ...s.basic(), 'content-type': 'application/json' },
    })
    req.on('response', (res) => {
      const hash = createHash('sha256')
      let size = 0
      res.on('data', (d: Buffer) => {
        hash.update(d)
        size += d.length
      })
      res.on('end', () => resolve({ status: res.statusCode!, size, sha256: hash.digest() }))
    })
    req.on('error', reject)
    req.end(JSON.stringify({ project_id: project, digest }))
  })
}

/** A real PNG (RGB gradient), made from the format's definition. */
function png(width: number, height: number): Buffer {
  const chunk = (type: string, data: Buffer) => {
    const td = Buffer.concat([Buffer.from(type, 'ascii'), data])
    const out = Buffer.alloc(12 + data.length)
    out.writeUInt32BE(data.length, 0)
    td.copy(out, 4)
    out.writeUInt32BE(zlib.crc32(td), 8 + data.length)
    return out
  }
  const ihdr = Buffer.alloc(13)
  ihdr.writeUInt32BE(width, 0)
  ihdr.writeUInt32BE(height, 4)
  ihdr.set([8, 2, 0, 0, 0], 8)
  const raw = Buffer.alloc(height * (1 + width * 3))
  for (let y = 0; y < height; y++) for (let x = 0; x < width; x++) raw.set([x * 4, y * 4, (x + y) * 2], y * (1 + width * 3) + 1 + x * 3)
  return Buffer.concat([
    Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]),
    chunk('IHDR', ihdr),
    chunk('IDAT', zlib.deflateSync(raw)),
    chunk('IEND', Buffer.alloc(0)),
  ])
}

let s: TestServer
t.before(async () => {
  s = await startServer({ args: ['--model', 'none'] })
})
t.teardown(() => s.stop())

t.test('multipart upload, read back, digests, stats, expected_digest', async (t) => {
  const P = 'acme/files'
  const a = Buffer.from('print("hi")\n\ttabs, CR\r and é')
  const b = randomBytes(300_000)
  const up = await upload(s, P, a)
  t.equal(up.status, 200)
  t.equal(up.json.digest, digestOf(a), "Weave's digest, as the SDKs compute it client side")
  t.same((await content(s, P, up.json.digest)).bytes, a)
  const big = await upload(s, P, b, { expected_digest: digestOf(b) })
  t.equal(big.status, 200, 'the right expected_digest is accepted')
  t.same((await content(s, P, digestOf(b))).bytes, b)
  t.equal((await upload(s, P, a)).json.digest, up.json.digest, 'the same content again: the same digest')
  t.equal(await totalSize(s, P), a.length + b.length, 'each content counted once')
  t.equal(await totalSize(s, 'acme/empty'), 0)

  const c = randomBytes(1000)
  const wrong = await upload(s, P, c, { expected_digest: digestOf(a) })
  t.equal(wrong.status, 409)
  t.match(wrong.json.reason, /Digest mismatch/)
  t.equal((await content(s, P, digestOf(c))).status, 404, 'a refused upload is not stored')
  t.equal(await totalSize(s, P), a.length + b.length)

  t.equal((await content(s, P, digestOf(randomBytes(8)))).status, 404, 'unknown digest')
  t.equal((await content(s, P, '../../catalog.duckdb')).status, 404, 'a path is not a digest')
  t.equal((await content(s, 'acme/other', up.json.digest)).status, 404, 'another project cannot read it')
  const empty = await upload(s, P, new Uint8Array(0))
  t.equal(empty.json.digest, digestOf(new Uint8Array(0)))
  t.equal((await content(s, P, empty.json.digest)).bytes.length, 0, 'an empty file round-trips')
})

t.test('bad uploads: 400 and nothing stored', async (t) => {
  const before = storedFiles(s.dataDir).length
  const notMultipart = await postJson(s, '/file/create', {})
  t.equal(notMultipart.status, 400)
  const noFile = new FormData()
  noFile.append('project_id', 'acme/files')
  t.equal((await fetch(s.url + '/file/create', { method: 'POST', headers: s.basic(), body: noFile })).status, 400)
  t.equal((await upload(s, 'no-slash', Buffer.from('x'))).status, 400)
  t.equal((await upload(s, "acme/x'; DROP TABLE files; --", Buffer.from('x'))).status, 400, 'whitespace is not allowed in a project')
  const truncated = await fetch(s.url + '/file/create', {
    method: 'POST',
    headers: { ...s.basic(), 'content-type': `multipart/form-data; boundary=${BOUNDARY}` },
    body: formParts('acme/files').head.toString() + 'no closing boundary',
  })
  t.equal(truncated.status, 400, 'a form cut short')
  t.equal(storedFiles(s.dataDir).length, before)
  t.same(tmpFiles(s.dataDir), [])
  t.equal((await postJson(s, '/files/query_stats', { project_id: 'nope' })).status, 422)
  t.equal((await postJson(s, '/file/content', { project_id: 'acme/files' })).status, 422)
})

t.test('a key limited to another entity gets 403', async (t) => {
  const made = await postJson(s, '/admin/keys', { user_id: 'bob', entities: ['acme'] })
  const bob = s.basic(made.json.key)
  const mine = randomBytes(64)
  t.equal((await upload(s, 'acme/bob', mine, {}, bob)).status, 200)
  t.same((await content(s, 'acme/bob', digestOf(mine), bob)).bytes, mine)
  const theirs = randomBytes(64)
  t.equal((await upload(s, 'other/p', theirs)).status, 200, 'the admin key stores in other/p')
  const refused = await upload(s, 'other/p', randomBytes(64), {}, bob)
  t.equal(refused.status, 403)
  t.equal(await totalSize(s, 'other/p'), 64, "bob's upload to other/p was not stored")
  t.equal((await content(s, 'other/p', digestOf(theirs), bob)).status, 403)
  t.equal((await postJson(s, '/files/query_stats', { project_id: 'other/p' }, bob)).status, 403)
})

t.test("the weave SDK's weaveImage uploads through /file/create and reads back byte-identical", async (t) => {
  pointWeaveAt(s)
  const weave = await import('weave')
  const client = await weave.init('acme/images')
  const image = png(64, 48)
  const draw = weave.op(async function draw(n: number) {
    return { n, picture: weave.weaveImage({ data: image }) }
  })
  await draw(3)
  await client.waitForBatchProcessing()
  const r = await postJson(s, '/calls/query', { project_id: 'acme/images' })
  const out = r.json.calls.find((c: any) => /\/op\/draw:/.test(c.op_name)).output
  t.equal(out.n, 3)
  t.match(out.picture, { _type: 'CustomWeaveType', weave_type: { type: 'PIL.Image.Image' } })
  const digest = out.picture.files['image.png']
  t.equal(digest, digestOf(image))
  const back = await content(s, 'acme/images', digest)
  t.equal(back.status, 200)
  t.ok(back.bytes.equals(image), 'the PNG comes back byte for byte')
  t.equal((await totalSize(s, 'acme/images')) >= image.length, true)
})

t.test('200 MB up and down without holding it in memory', async (t) => {
  const P = 'acme/big'
  const size = 200 * MiB
  const pid = s.proc.pid!
  const before = memory(pid)
  const up = await streamUpload(s, P, size)
  const afterUp = memory(pid)
  t.equal(up.status, 200)
  t.equal(up.body.digest, weaveDigest(up.sha256))
  t.ok(afterUp.hwm - before.hwm < 64 * MiB, `upload: peak memory grew ${((afterUp.hwm - before.hwm) / MiB).toFixed(1)} MiB for 200 MiB`)
  t.equal(await totalSize(s, P), size)
  const down = await streamDownload(s, P, up.body.digest)
  const afterDown = memory(pid)
  t.equal(down.status, 200)
  t.equal(down.size, size)
  t.ok(down.sha256.equals(up.sha256), 'the same sha256 comes back')
  t.ok(afterDown.hwm - before.hwm < 64 * MiB, `download: peak memory grew ${((afterDown.hwm - before.hwm) / MiB).toFixed(1)} MiB`)
})

t.test('the file-size limit: 413 and nothing left on disk', async (t) => {
  const small = await startServer({ args: ['--model', 'none', '--max-file-bytes', String(MiB)] })
  t.teardown(() => small.stop())
  const P = 'acme/limit'
  const exact = randomBytes(MiB)
  t.equal((await upload(small, P, exact)).status, 200, 'exactly the limit is fine')
  const over = await upload(small, P, randomBytes(MiB + 1))
  t.equal(over.status, 413, 'one byte over')
  t.match(over.json.reason, /larger than the limit of 1048576 bytes/)
  const declared = await refusedUnread(small, P, 3 * MiB)
  t.equal(declared.status, 413, 'a declared length past the limit is refused before it is read')
  t.match(declared.text, /larger than the limit/)
  const undeclared = await streamUpload(small, P, 3 * MiB, 3 * MiB, true)
  // Past the limit the server answers 413 and closes while the client is still sending, so the client may see
  // the connection cut before it reads the answer; either way nothing is stored.
  t.ok([413, 0].includes(undeclared.status), `a chunked body is cut off once past the limit (${undeclared.status})`)
  t.equal(storedFiles(small.dataDir).length, 1)
  t.same(tmpFiles(small.dataDir), [])
  t.equal(await totalSize(small, P), MiB)
  t.equal((await content(small, P, digestOf(exact))).status, 200, 'the server still answers')
})

t.test('crash safety: a cut or killed upload never shows under a digest', async (t) => {
  const dataDir = tempDir()
  t.teardown(() => rm(dataDir, { recursive: true, force: true }))
  let srv = await startServer({ dataDir, args: ['--model', 'none'] })
  const P = 'acme/crash'
  t.equal((await streamUpload(srv, P, 20 * MiB, 8 * MiB)).status, 0, 'the client went away')
  for (let i = 0; i < 50 && tmpFiles(dataDir).length > 0; i++) await new Promise((r) => setTimeout(r, 100))
  t.same(tmpFiles(dataDir), [], 'the aborted upload left no temporary file')
  t.same(storedFiles(dataDir), [])

  // Killed mid-upload: the partial bytes are only ever in a temporary file, cleared at the next start.
  const cut = streamUpload(srv, P, 64 * MiB, 48 * MiB)
  for (let i = 0; i < 300; i++) {
    const tmp = tmpFiles(dataDir)
    if (tmp.length && statSync(path.join(dataDir, 'files', 'tmp', tmp[0]!)).size > 4 * MiB) break
    await new Promise((r) => setTimeout(r, 20))
  }
  t.equal(tmpFiles(dataDir).length, 1, 'the upload is under way')
  await srv.stop('SIGKILL')
  await cut
  t.same(storedFiles(dataDir), [], 'nothing under a digest name')
  srv = await startServer({ dataDir, args: ['--model', 'none'] })
  t.teardown(() => srv.stop())
  t.same(tmpFiles(dataDir), [], 'the next start cleared the temporary file')
  t.equal(await totalSize(srv, P), 0)
  const ok = await upload(srv, P, Buffer.from('after the crash'))
  t.same((await content(srv, P, ok.json.digest)).bytes, Buffer.from('after the crash'))
})

t.test('a database from before keeps its files: bytes carried out of the catalog', async (t) => {
  const dataDir = tempDir()
  t.teardown(() => rm(dataDir, { recursive: true, force: true }))
  const old = Buffer.from('bytes an older weft kept in catalog.duckdb')
  const digest = digestOf(old)
  const { db, conn: c } = await catalogAt(dataDir, 5)
  await c.run('INSERT INTO files VALUES ($1, $2, $3::BLOB, $4, now()::TIMESTAMP)', [
    'acme/old',
    digest,
    blobValue(new Uint8Array(old)),
    old.length,
  ])
  c.closeSync()
  db.closeSync()

  const srv = await startServer({ dataDir, args: ['--model', 'none'] })
  t.same((await content(srv, 'acme/old', digest)).bytes, old)
  t.equal(await totalSize(srv, 'acme/old'), old.length)
  t.equal(storedFiles(dataDir).length, 1, 'the bytes are on disk now')
  await srv.stop()

  const again = await DuckDBInstance.create(path.join(dataDir, 'catalog.duckdb'))
  const c2 = await again.connect()
  const rows = (await c2.runAndReadAll('SELECT content IS NULL AS moved, size_bytes FROM files')).getRowObjectsJS()
  t.same(rows, [{ moved: true, size_bytes: BigInt(old.length) }], 'and out of the catalog')
  c2.closeSync()
  again.closeSync()
})
