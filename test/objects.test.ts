import t from 'tap'
import { digestBytes, pythonJsonDumps, valueDigest } from '../src/catalog/digest.js'
import { startServer, type TestServer } from './helpers/server.js'

// No chat in this file: its servers start without the built-in model (about 1 s of CPU less per start).
process.env.WEFT_MODEL ??= 'none'

t.test('digests match Python json.dumps + Weave digest', async (t) => {
  // Reference vector computed with CPython: json.dumps(v) and Weave's str_digest.
  const v = {
    _type: 'CustomWeaveType',
    weave_type: { type: 'Op' },
    files: { 'obj.py': 'abc' },
    load_op: 'NO_LOAD_OP',
    x: [1, 2.5, 1e-5, 'é\n\u007f'],
    n: null,
    t: true,
  }
  t.equal(
    pythonJsonDumps(v),
    '{"_type": "CustomWeaveType", "weave_type": {"type": "Op"}, "files": {"obj.py": "abc"}, "load_op": "NO_LOAD_OP", "x": [1, 2.5, 1e-05, "\\u00e9\\n\\u007f"], "n": null, "t": true}',
  )
  t.equal(pythonJsonDumps([1.25e-7, 0.0001, 123.456, -0.5, 1.5e300, '😀']), '[1.25e-07, 0.0001, 123.456, -0.5, 1.5e+300, "\\ud83d\\ude00"]')
  t.equal(digestBytes('hello'), 'LPJNul+wow4m6DsqxbninhsWHlwfp0JecwQzYpOLmCQ'.replace(/\+/g, 'X').replace(/\//g, 'Y'))
  t.match(valueDigest({ a: 1 }), /^[A-Za-z0-9]{43}$/)
})

let s: TestServer
t.before(async () => {
  s = await startServer()
})
t.teardown(() => s.stop())

const post = async (path: string, body: unknown) => {
  const r = await fetch(s.url + path, {
    method: 'POST',
    headers: { ...s.basic(), 'content-type': 'application/json' },
    body: JSON.stringify(body),
  })
  return { status: r.status, json: (await r.json()) as any }
}

t.test('obj/create versions and obj/read by digest, latest and v<N>', async (t) => {
  const P = 'acme/objs'
  const a = await post('/obj/create', { obj: { project_id: P, object_id: 'cfg', val: { _type: 'Cfg', k: 1 } } })
  t.equal(a.status, 200)
  const again = await post('/obj/create', { obj: { project_id: P, object_id: 'cfg', val: { _type: 'Cfg', k: 1 } } })
  t.same(again.json, a.json, 'same content, same digest, no new version')
  const b = await post('/obj/create', { obj: { project_id: P, object_id: 'cfg', val: { _type: 'Cfg', k: 2 } } })
  t.not(b.json.digest, a.json.digest)
  const latest = await post('/obj/read', { project_id: P, object_id: 'cfg', digest: 'latest' })
  t.match(latest.json.obj, { digest: b.json.digest, version_index: 1, is_latest: 1, kind: 'object', val: { k: 2 } })
  const v0 = await post('/obj/read', { project_id: P, object_id: 'cfg', digest: 'v0' })
  t.match(v0.json.obj, { digest: a.json.digest, version_index: 0, is_latest: 0 })
  const meta = await post('/obj/read', { project_id: P, object_id: 'cfg', digest: a.json.digest, metadata_only: true })
  t.same(meta.json.obj.val, {})
  const ds = await post('/obj/create', {
    obj: {
      project_id: P,
      object_id: 'ds',
      val: { _type: 'Dataset', _class_name: 'Dataset', _bases: ['Object', 'BaseModel'], rows: 'weave:///acme/objs/table/x' },
    },
  })
  t.match((await post('/obj/read', { project_id: P, object_id: 'ds', digest: ds.json.digest })).json.obj, {
    base_object_class: 'Dataset',
    leaf_object_class: 'Dataset',
  })
  t.equal((await post('/obj/read', { project_id: P, object_id: 'nope', digest: 'latest' })).status, 404)
  const bad = await post('/obj/create', { obj: { project_id: P, object_id: 'bad id/..', val: 1 } })
  t.equal(bad.status, 403)
  const mismatch = await post('/obj/create', { obj: { project_id: P, object_id: 'cfg', val: { k: 3 }, expected_digest: 'x' } })
  t.equal(mismatch.status, 409)
  t.equal(
    (await post('/obj/create', { obj: { project_id: 'other/p', object_id: 'x', val: 1 } })).status,
    200,
    'admin key may write anywhere',
  )
})

t.test('file/create and file/content', async (t) => {
  const form = new FormData()
  form.append('project_id', 'acme/files')
  form.append('file', new Blob(['print("hi")']), 'blob')
  const r = await fetch(s.url + '/file/create', { method: 'POST', headers: s.basic(), body: form })
  t.equal(r.status, 200)
  const { digest } = (await r.json()) as { digest: string }
  t.equal(digest, digestBytes('print("hi")'), 'the digest the SDKs compute client side')
  const c = await fetch(s.url + '/file/content', {
    method: 'POST',
    headers: { ...s.basic(), 'content-type': 'application/json' },
    body: JSON.stringify({ project_id: 'acme/files', digest }),
  })
  t.equal(await c.text(), 'print("hi")')
  const missing = await post('/file/content', { project_id: 'acme/files', digest: 'nope' })
  t.equal(missing.status, 404)
  const notMultipart = await fetch(s.url + '/file/create', {
    method: 'POST',
    headers: { ...s.basic(), 'content-type': 'application/json' },
    body: '{}',
  })
  t.equal(notMultipart.status, 400)
  const noFile = new FormData()
  noFile.append('project_id', 'acme/files')
  t.equal((await fetch(s.url + '/file/create', { method: 'POST', headers: s.basic(), body: noFile })).status, 400)
  const badProject = new FormData()
  badProject.append('project_id', 'no-slash')
  badProject.append('file', new Blob(['x']))
  t.equal((await fetch(s.url + '/file/create', { method: 'POST', headers: s.basic(), body: badProject })).status, 400)
})
