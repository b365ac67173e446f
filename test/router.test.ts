import t from 'tap'
import { Router, normalizePath } from '../src/http/router.js'

t.test('static and trailing slash', async (t) => {
  const r = new Router<string>()
  r.add('POST', '/v1/chat/completions/', 'chat')
  r.add('GET', '/health', 'health')
  for (const p of ['/v1/chat/completions', '/v1/chat/completions/', '/v1/chat/completions//']) {
    t.match(r.match('POST', p), { kind: 'found', route: 'chat' }, p)
  }
  t.same(r.match('GET', '/v1/chat/completions'), { kind: 'method_not_allowed', allow: ['POST'] })
  t.same(r.match('GET', '/nope'), { kind: 'not_found' })
  t.equal(normalizePath('/'), '/')
})

t.test('path params, specificity and decoding', async (t) => {
  const r = new Router<string>()
  r.add('GET', '/v2/{entity}/{project}/ops/{object_id}/versions/{digest}', 'op')
  r.add('GET', '/v2/{entity}/{project}/predictions/{prediction_id}', 'pred')
  r.add('DELETE', '/v2/{entity}/{project}/predictions', 'preds')
  r.add('GET', '/v2/{entity}/{project}/{kind}/{id}', 'generic')
  t.same(r.match('GET', '/v2/acme/proj/ops/my%20op/versions/abc'), {
    kind: 'found',
    route: 'op',
    params: { entity: 'acme', project: 'proj', object_id: 'my op', digest: 'abc' },
  })
  t.match(r.match('GET', '/v2/acme/proj/predictions/p1'), { kind: 'found', route: 'pred', params: { prediction_id: 'p1' } })
  t.match(r.match('DELETE', '/v2/acme/proj/predictions/'), { kind: 'found', route: 'preds' })
  t.match(r.match('GET', '/v2/a/b/things/x'), { kind: 'found', route: 'generic' })
  t.same(r.match('GET', '/v2/acme//predictions/p1'), { kind: 'not_found' }, 'empty segment is no param')
  t.match(r.match('GET', '/v2/acme/proj/predictions/%ZZ'), { kind: 'bad_path' })
  t.match(
    r.match('GET', '/v2/acme/proj/predictions/..%2F..%2Fetc'),
    { kind: 'found', params: { prediction_id: '../../etc' } },
    'decoded, never a path on disk',
  )
})

t.test('catch-all', async (t) => {
  const r = new Router<string>()
  r.add('GET', '/inference/v1{path}', 'inf', { catchAll: true })
  t.same(r.match('GET', '/inference/v1/models'), { kind: 'found', route: 'inf', params: { path: '/models' } })
  t.same(r.match('GET', '/inference/v1/a/b%2Fc'), { kind: 'found', route: 'inf', params: { path: '/a/b/c' } })
  t.same(r.match('GET', '/inference/v1'), { kind: 'found', route: 'inf', params: { path: '/' } })
  t.same(r.match('GET', '/inference/v1x/models'), { kind: 'not_found' })
  t.same(r.match('POST', '/inference/v1/models'), { kind: 'method_not_allowed', allow: ['GET'] })
})

t.test('duplicate routes are a programming error', async (t) => {
  const r = new Router<string>()
  r.add('GET', '/a/{x}', '1')
  t.throws(() => r.add('GET', '/a/{x}/', '2'))
  t.throws(() => r.add('GET', '/a/{x', '3'))
})
