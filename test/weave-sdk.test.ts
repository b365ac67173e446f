import t from 'tap'
import { startServer, streamQuery, type TestServer } from './helpers/server.js'
import { pointWeaveAt } from './helpers/weave.js'

// No chat in this file: its servers start without the built-in model (about 1 s of CPU less per start).
process.env.WEFT_MODEL ??= 'none'

// The real `weave` npm SDK, pointed at weft the way its docs say to point it at a self-hosted server.
let s: TestServer
t.before(async () => {
  s = await startServer()
  pointWeaveAt(s)
})
t.teardown(() => s.stop())

const query = (body: Record<string, unknown>) => streamQuery(s, body)

t.test('nested ops, one of which throws, are traced and read back', async (t) => {
  const weave = await import('weave')
  const client = await weave.init('acme/sdk')
  const add = weave.op(async function add(a: number, b: number) {
    return a + b
  })
  const explode = weave.op(async function explode(x: number) {
    throw new Error(`kaboom ${x}`)
  })
  const pipeline = weave.op(async function pipeline(x: number) {
    const y = await add(x, 1)
    try {
      await explode(y)
    } catch {
      // the pipeline survives its tool failing
    }
    return y * 2
  })
  t.equal(await pipeline(5), 12)
  await client.waitForBatchProcessing()

  const calls = await query({ project_id: 'acme/sdk', sort_by: [{ field: 'started_at', direction: 'asc' }] })
  t.equal(calls.length, 3)
  const [root, a, e] = calls
  t.match(root, { parent_id: null, inputs: { arg0: 5 }, output: 12, exception: null, svc_user_id: 'admin' })
  t.match(root.op_name, /^weave:\/\/\/acme\/sdk\/op\/pipeline:[A-Za-z0-9]{43}$/)
  t.equal(root.summary.weave.trace_name, 'pipeline')
  t.equal(root.summary.weave.status, 'success')
  t.match(a, { parent_id: root.id, trace_id: root.trace_id, output: 6 })
  t.match(a.op_name, /\/op\/add:/)
  t.match(e, { parent_id: root.id, trace_id: root.trace_id, exception: 'kaboom 6', output: null })
  t.equal(e.summary.weave.status, 'error')
  t.equal(root.attributes.weave.source, 'js-sdk')

  // The op the SDK saved is readable at the digest in its ref, with its code file.
  const [, objectId, digest] = /\/op\/([^:]+):(.+)$/.exec(a.op_name)!
  const obj = await fetch(s.url + '/obj/read', {
    method: 'POST',
    headers: { ...s.basic(), 'content-type': 'application/json' },
    body: JSON.stringify({ project_id: 'acme/sdk', object_id: objectId, digest }),
  })
  t.equal(obj.status, 200)
  const { obj: op } = (await obj.json()) as { obj: { val: { files: Record<string, string> } } }
  t.match(op, { object_id: 'add', digest, kind: 'op', version_index: 0, is_latest: 1 })
  const code = await fetch(s.url + '/file/content', {
    method: 'POST',
    headers: { ...s.basic(), 'content-type': 'application/json' },
    body: JSON.stringify({ project_id: 'acme/sdk', digest: op.val.files['obj.py'] }),
  })
  t.equal(code.status, 200)
  t.match(await code.text(), /return a \+ b/, 'the file digest the SDK computed client side resolves here')

  // And the SDK's own read path (calls/stream_query) sees the same calls.
  const viaSdk = await client.getCalls({ trace_ids: [root.trace_id] })
  t.equal(viaSdk.length, 3)

  const one = await fetch(s.url + '/call/read', {
    method: 'POST',
    headers: { ...s.basic(), 'content-type': 'application/json' },
    body: JSON.stringify({ project_id: 'acme/sdk', id: e.id }),
  })
  t.match(((await one.json()) as { call: unknown }).call, { id: e.id, exception: 'kaboom 6' })
})
