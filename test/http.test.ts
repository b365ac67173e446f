import t from 'tap'
import http from 'node:http'
import { startServer, type TestServer } from './helpers/server.js'

let s: TestServer
t.before(async () => {
  s = await startServer({ args: ['--max-body-bytes', '4096', '--cors-origins', 'https://app.example'] })
})
t.teardown(async () => {
  await s.stop()
})

async function call(method: string, path: string, init: { headers?: Record<string, string>; body?: string } = {}) {
  const res = await fetch(s.url + path, { method, headers: init.headers, body: init.body })
  const text = await res.text()
  let json: unknown
  try {
    json = JSON.parse(text)
  } catch {
    json = undefined
  }
  return { status: res.status, headers: res.headers, text, json: json as any }
}

/** A raw request with full control over headers and body framing. */
function raw(path: string, opts: { method?: string; headers?: Record<string, string>; chunks?: Buffer[] }) {
  const u = new URL(s.url + path)
  return new Promise<{ status: number; body: string; headers: http.IncomingHttpHeaders }>((resolve, reject) => {
    const req = http.request(
      { host: u.hostname, port: u.port, path: u.pathname + u.search, method: opts.method ?? 'POST', headers: opts.headers },
      (res) => {
        let body = ''
        res.on('data', (d) => (body += d))
        res.on('end', () => resolve({ status: res.statusCode!, body, headers: res.headers }))
      },
    )
    req.on('error', reject)
    for (const c of opts.chunks ?? []) req.write(c)
    req.end()
  })
}

t.test('service endpoints need no credentials', async (t) => {
  const h = await call('GET', '/health')
  t.equal(h.status, 200)
  t.same(h.json, { status: 'ok' })
  t.match(h.headers.get('x-request-id'), /^[0-9a-f-]{36}$/)
  t.equal(h.headers.get('keep-alive'), 'timeout=5', 'clients learn to drop idle sockets before the server does (10 s)')
  const v = await call('GET', '/version')
  t.equal(v.status, 200)
  t.match(v.json, { version: /^\d+\.\d+\.\d+/, node: process.version, duckdb: /^v1\./ })
  const si = await call('GET', '/server_info')
  t.match(si.json, { min_required_weave_python_version: String, trace_server_version: v.json.version })
  const withAuth = await call('GET', '/health', { headers: s.basic() })
  t.equal(withAuth.status, 200, 'the weave SDK sends Basic auth to /health')
})

t.test('request ids: echoed when sane, replaced when not', async (t) => {
  const a = await call('GET', '/health', { headers: { 'x-request-id': 'client-abc.123' } })
  t.equal(a.headers.get('x-request-id'), 'client-abc.123')
  const b = await call('GET', '/health', { headers: { 'x-request-id': 'bad id with spaces<script>' } })
  t.not(b.headers.get('x-request-id'), 'bad id with spaces<script>')
  t.match(b.headers.get('x-request-id'), /^[0-9a-f-]{36}$/)
})

t.test('routing: every spec route exists, with and without trailing slash', async (t) => {
  const specRoutes: [string, string][] = [
    ['POST', '/v1/chat/completions/'],
    ['POST', '/v1/chat/completions'],
    ['POST', '/calls/stats'],
    ['POST', '/objs/query'],
    ['POST', '/calls/query_stats'],
    ['POST', '/calls/usage'],
    ['POST', '/v2/acme/proj/datasets'],
    ['GET', '/v2/acme/proj/predictions/p-1'],
    ['GET', '/v2/acme/proj/ops/my-op/versions/abc123'],
    ['GET', '/v2/acme/proj/evaluations'],
    ['GET', '/v2/acme/proj/scorers'],
    ['DELETE', '/v2/acme/proj/evaluations/ev1'],
    ['DELETE', '/v2/acme/proj/predictions?prediction_ids=a'],
    ['GET', '/inference/v1/models'],
    ['POST', '/v1/completions'],
    ['GET', '/v1/models/weft-tiny'],
    ['POST', '/inference/v1/tokenize'],
    ['GET', '/geolocate?ip=1.1.1.1'],
  ]
  for (const [method, path] of specRoutes) {
    const r = await call(method, path, {
      headers: { ...s.basic(), 'content-type': 'application/json' },
      body: method === 'POST' ? '{}' : undefined,
    })
    // A route answers 404 for an unknown id too; only the router's own 404 means "no such route".
    t.notMatch(r.text, /No route for/, `${method} ${path} is routed (${r.status} ${r.text.slice(0, 120)})`)
    t.not(r.status, 405, `${method} ${path} method allowed`)
  }
  const slash = await call('GET', '/health/')
  t.equal(slash.status, 200)
})

t.test('unknown routes and methods', async (t) => {
  const a = await call('GET', '/no/such/thing', { headers: s.basic() })
  t.equal(a.status, 404)
  t.match(a.json, { reason: /No route for GET \/no\/such\/thing/ })
  const b = await call('GET', '/v1/no-such', { headers: s.bearer() })
  t.equal(b.status, 404)
  t.match(b.json, { error: { message: String, type: 'NotFoundError', param: null, code: 404 } })
  const c = await call('DELETE', '/health')
  t.equal(c.status, 405)
  t.equal(c.headers.get('allow'), 'GET')
  t.match(c.json, { reason: /not allowed/ })
  const d = await call('GET', '/inference/v1/no/such/endpoint', { headers: s.bearer() })
  t.equal(d.status, 404)
  t.match(d.json, { error: { code: 404, message: /No inference endpoint/ } })
  const e = await call('GET', '/v2/acme/proj/predictions/%E0%A4%A', { headers: s.basic() })
  t.equal(e.status, 400, 'broken percent-encoding in a path segment')
  t.match(e.json, { reason: /percent-encoding/ })
})

t.test('401: missing or wrong credentials, in each family shape', async (t) => {
  const a = await call('POST', '/calls/stats', { body: '{}' })
  t.equal(a.status, 401)
  t.equal(a.headers.get('www-authenticate'), 'Basic realm="weft"')
  t.match(a.json, { reason: /Missing credentials/ })
  const b = await call('POST', '/calls/stats', { headers: s.basic('wrong-key'), body: '{}' })
  t.equal(b.status, 401)
  t.same(b.json, { reason: 'Invalid API key' })
  const c = await call('POST', '/v1/chat/completions', { headers: { authorization: 'Bearer nope' }, body: '{}' })
  t.equal(c.status, 401)
  t.equal(c.headers.get('www-authenticate'), 'Bearer realm="weft"')
  t.same(c.json, { error: { message: 'Invalid API key', type: 'AuthenticationError', param: null, code: 401 } })
  const d = await call('POST', '/calls/stats', { headers: { authorization: 'Digest abc' }, body: '{}' })
  t.equal(d.status, 401, 'unknown scheme')
  const e = await call('POST', '/calls/stats', { headers: { authorization: 'Basic !!!notbase64' }, body: '{}' })
  t.equal(e.status, 401)
  t.notOk(s.output().includes(s.key), 'the key never appears in the logs')
})

t.test('the same key works as Bearer, Basic user or password, and wandb-api-key', async (t) => {
  const body = JSON.stringify({ project_id: 'acme/proj', start: '2026-01-01T00:00:00Z', end: '2026-01-02T00:00:00Z' })
  for (const headers of [
    s.basic(),
    s.bearer(),
    { authorization: 'Basic ' + Buffer.from(s.key + ':').toString('base64') },
    { 'wandb-api-key': s.key },
  ]) {
    const r = await call('POST', '/calls/stats', { headers, body })
    t.equal(r.status, 200, JSON.stringify(Object.keys(headers)))
  }
})

t.test('403: a key limited to other entities', async (t) => {
  const made = await call('POST', '/admin/keys', {
    headers: s.basic(),
    body: JSON.stringify({ user_id: 'alice', entities: ['team-a'], name: 'alice key' }),
  })
  t.equal(made.status, 200)
  const alice = made.json.key as string
  t.match(alice, /^weft_[A-Za-z0-9_-]{32}$/)
  t.match(made.json.info, { user_id: 'alice', entities: ['team-a'], is_admin: false, revoked_at: null })
  const body = (p: string) => JSON.stringify({ project_id: p, start: '2026-01-01T00:00:00Z', end: '2026-01-02T00:00:00Z' })
  const own = await call('POST', '/calls/stats', { headers: s.basic(alice), body: body('team-a/proj') })
  t.equal(own.status, 200, 'own entity passes auth')
  const other = await call('POST', '/calls/stats', { headers: s.basic(alice), body: body('team-b/proj') })
  t.equal(other.status, 403)
  t.match(other.json, { reason: /may not access entity "team-b"/ })
  const path = await call('GET', '/v2/team-b/proj/scorers', { headers: s.basic(alice) })
  t.equal(path.status, 403, 'entity from the path')
  const pathOk = await call('GET', '/v2/team-a/proj/scorers', { headers: s.basic(alice) })
  t.equal(pathOk.status, 200, 'own entity from the path')
  t.equal(pathOk.text, '', 'no scorers yet: an empty JSON-lines listing')
  const admin = await call('GET', '/admin/keys', { headers: s.basic(alice) })
  t.equal(admin.status, 403, 'admin endpoints need an admin key')
  t.match(admin.json, { reason: /admin/ })

  const list = await call('GET', '/admin/keys', { headers: s.basic() })
  t.equal(list.status, 200)
  t.notOk(list.text.includes(alice), 'listing never shows keys')
  const id = made.json.info.key_id
  const revoked = await call('DELETE', `/admin/keys/${id}`, { headers: s.basic() })
  t.equal(revoked.status, 200)
  t.match(revoked.json, { key_id: id, revoked_at: String })
  const after = await call('POST', '/calls/stats', { headers: s.basic(alice), body: body('team-a/proj') })
  t.equal(after.status, 401, 'a revoked key stops working at once')
  const unknown = await call('DELETE', '/admin/keys/key_nope', { headers: s.basic() })
  t.equal(unknown.status, 404)
  const bad = await call('POST', '/admin/keys', { headers: s.basic(), body: JSON.stringify({ user_id: 'bob', entities: ['bad entity!'] }) })
  t.equal(bad.status, 422)
  t.match(bad.json.detail[0], { loc: ['body', 'entities'], type: String })
})

t.test('422: malformed JSON, wrong types, unknown fields, with loc', async (t) => {
  const h = { ...s.basic(), 'content-type': 'application/json' }
  const a = await call('POST', '/calls/stats', { headers: h, body: '{"project_id": "acme/p",' })
  t.equal(a.status, 422)
  t.match(a.json.detail[0], { loc: ['body', Number], type: 'json_invalid', msg: /JSON decode error/ })
  const b = await call('POST', '/calls/stats', {
    headers: h,
    body: JSON.stringify({ project_id: 'acme/p', start: '2026-01-01T00:00:00Z', granularity: 'hourly' }),
  })
  t.equal(b.status, 422)
  t.match(b.json.detail, [{ loc: ['body', 'granularity'], type: 'int_type' }])
  const c = await call('POST', '/calls/stats', {
    headers: h,
    body: JSON.stringify({ project_id: 'acme/p', start: '2026-01-01T00:00:00Z', bogus: 1 }),
  })
  t.equal(c.status, 422)
  t.match(c.json.detail, [{ loc: ['body', 'bogus'], type: 'extra_forbidden' }])
  const d = await call('POST', '/calls/stats', {
    headers: h,
    body: JSON.stringify({ project_id: 'acme/p', start: '2026-01-01T00:00:00Z', filter: { op_names: ['a', 7] } }),
  })
  t.equal(d.status, 422)
  t.match(d.json.detail, [{ loc: ['body', 'filter', 'op_names', 1], type: 'string_type' }])
  const e = await call('POST', '/calls/stats', { headers: h, body: '' })
  t.equal(e.status, 422)
  t.match(e.json.detail, [{ loc: ['body'], type: 'missing' }])
  const f = await call('POST', '/calls/stats', { headers: h, body: '[1,2,3]' })
  t.equal(f.status, 422)
  t.match(f.json.detail, [{ loc: ['body'], type: 'dict_type' }])
  const g = await call('POST', '/calls/stats', {
    headers: h,
    body: JSON.stringify({ project_id: "acme/p'; DROP TABLE api_keys; --", start: '2026-01-01T00:00:00Z' }),
  })
  t.equal(g.status, 422, 'hostile project id is rejected by the schema')
  const again = await call('GET', '/admin/keys', { headers: s.basic() })
  t.equal(again.status, 200, 'and changed nothing')
  const q = await call('DELETE', '/v2/acme/proj/predictions', { headers: s.basic() })
  t.equal(q.status, 422, 'required query parameter')
  t.match(q.json.detail, [{ loc: ['query', 'prediction_ids'], type: 'missing' }])
})

t.test('chat family: validation errors are 400 in the OpenAI envelope', async (t) => {
  const h = { ...s.bearer(), 'content-type': 'application/json' }
  const a = await call('POST', '/v1/chat/completions', { headers: h, body: '{not json' })
  t.equal(a.status, 400)
  t.match(a.json, { error: { type: 'BadRequestError', code: 400, message: /JSON decode error/ } })
  const b = await call('POST', '/v1/chat/completions', {
    headers: h,
    body: JSON.stringify({ model: 'm', messages: [{ role: 'user', content: 'hi' }], top_k: -2 }),
  })
  t.equal(b.status, 400)
  t.match(b.json, { error: { param: 'top_k', code: 400 } })
  const c = await call('POST', '/v1/chat/completions', {
    headers: h,
    body: JSON.stringify({
      model: 'weft-tiny',
      messages: [{ role: 'user', content: 'hi', extra_key: 1 }],
      max_tokens: 2,
      some_unknown_field: true,
    }),
  })
  t.equal(c.status, 200, 'unknown extra fields are ignored, as vLLM does')
  t.match(c.json, { object: 'chat.completion', model: 'weft-tiny' })
  const d = await call('POST', '/inference/v1/chat/completions', {
    headers: h,
    body: JSON.stringify({ model: 'm', messages: [{ role: 'user', content: 'hi' }] }),
  })
  t.equal(d.status, 404, '/inference/v1/chat/completions is /v1/chat/completions')
  t.match(d.json, { error: { type: 'NotFoundError', code: 404, param: 'model', message: 'The model `m` does not exist.' } })
})

t.test('413: body limits, declared and chunked', async (t) => {
  const big = Buffer.alloc(5000, 'a')
  const a = await raw('/calls/stats', {
    headers: { ...s.basic(), 'content-type': 'application/json', 'content-length': String(big.length) },
    chunks: [big],
  })
  t.equal(a.status, 413)
  t.match(JSON.parse(a.body), { reason: /larger than the limit of 4096 bytes/ })
  const b = await raw('/calls/stats', {
    headers: { ...s.basic(), 'content-type': 'application/json', 'transfer-encoding': 'chunked' },
    chunks: [Buffer.alloc(3000, 'b'), Buffer.alloc(3000, 'c')],
  })
  t.equal(b.status, 413)
  const c = await raw('/v1/chat/completions', { headers: { ...s.bearer(), 'content-length': String(big.length) }, chunks: [big] })
  t.equal(c.status, 413)
  t.match(JSON.parse(c.body), { error: { code: 413 } })
  const ok = await call('GET', '/health')
  t.equal(ok.status, 200, 'the server is fine afterwards')
})

t.test('CORS', async (t) => {
  const pre = await call('OPTIONS', '/calls/stats', {
    headers: {
      origin: 'https://app.example',
      'access-control-request-method': 'POST',
      'access-control-request-headers': 'authorization, content-type',
    },
  })
  t.equal(pre.status, 204)
  t.equal(pre.headers.get('access-control-allow-origin'), 'https://app.example')
  t.match(pre.headers.get('access-control-allow-methods'), /POST/)
  t.equal(pre.headers.get('access-control-allow-headers'), 'authorization, content-type')
  const get = await call('GET', '/health', { headers: { origin: 'https://app.example' } })
  t.equal(get.headers.get('access-control-allow-origin'), 'https://app.example')
  const other = await call('GET', '/health', { headers: { origin: 'https://evil.example' } })
  t.equal(other.headers.get('access-control-allow-origin'), null)
  const none = await call('OPTIONS', '/no/such', { headers: { origin: 'https://app.example', 'access-control-request-method': 'GET' } })
  t.equal(none.status, 404)
})

t.test('openapi.json lists every route with its schemas', async (t) => {
  const r = await call('GET', '/openapi.json')
  t.equal(r.status, 200)
  const doc = r.json
  t.equal(doc.openapi, '3.1.0')
  const expect: [string, string][] = [
    ['/v1/chat/completions', 'post'],
    ['/calls/stats', 'post'],
    ['/objs/query', 'post'],
    ['/calls/query_stats', 'post'],
    ['/calls/usage', 'post'],
    ['/v2/{entity}/{project}/datasets', 'post'],
    ['/v2/{entity}/{project}/predictions/{prediction_id}', 'get'],
    ['/v2/{entity}/{project}/ops/{object_id}/versions/{digest}', 'get'],
    ['/v2/{entity}/{project}/evaluations', 'get'],
    ['/v2/{entity}/{project}/scorers', 'get'],
    ['/v2/{entity}/{project}/evaluations/{object_id}', 'delete'],
    ['/v2/{entity}/{project}/predictions', 'delete'],
    ['/inference/v1{path}', 'get'],
    ['/v1/completions', 'post'],
    ['/v1/models/{id}', 'get'],
    ['/inference/v1/tokenize', 'post'],
    ['/inference/v1/detokenize', 'post'],
    ['/geolocate', 'get'],
    ['/health', 'get'],
    ['/ready', 'get'],
    ['/version', 'get'],
    ['/server_info', 'get'],
  ]
  for (const [p, m] of expect) t.ok(doc.paths[p]?.[m], `${m.toUpperCase()} ${p} documented`)
  const stats = doc.paths['/calls/stats'].post
  t.ok(stats.requestBody.content['application/json'].schema.properties.usage_metrics, 'request schema inlined')
  t.same(stats.security, [{ basicAuth: [] }])
  t.same(doc.paths['/v1/chat/completions'].post.security, [{ bearerAuth: [] }])
  // The completion routes read their bodies themselves (exact integer checks) and still document them.
  t.ok(doc.paths['/v1/chat/completions'].post.requestBody.content['application/json'].schema.properties.messages, 'chat body documented')
  t.ok(doc.paths['/v1/completions'].post.requestBody.content['application/json'].schema.properties.prompt, 'completions body documented')
  t.ok(doc.paths['/v2/{entity}/{project}/predictions'].delete.parameters.some((p: any) => p.name === 'prediction_ids' && p.in === 'query'))
  t.ok(doc.paths['/geolocate'].get.parameters.some((p: any) => p.name === 'ip'))
})

t.test('hostile paths and query strings', async (t) => {
  const long = await call('GET', '/v2/acme/proj/predictions/' + 'x'.repeat(20000), { headers: s.basic() })
  t.equal(long.status, 404, 'a long id reaches the route and is not a crash')
  const trav = await call('GET', '/v2/acme/proj/ops/..%2F..%2Fcatalog.duckdb/versions/x', { headers: s.basic() })
  t.ok([403, 404].includes(trav.status), `a traversal id is only an id (${trav.status})`)
  const files = (await call('GET', '/health')).status
  t.equal(files, 200, 'and the server is fine')
  const q = await call('GET', '/v2/acme/proj/scorers?limit=-5', { headers: s.basic() })
  t.equal(q.status, 422)
  const q2 = await call('GET', '/v2/acme/proj/scorers?limit=abc&limit=2', { headers: s.basic() })
  t.equal(q2.status, 422)
  const nul = await call('GET', '/geolocate?ip=%00%00', {})
  t.equal(nul.status, 422)
  const health = await call('GET', '/health')
  t.equal(health.status, 200)
})
