import t from 'tap'
import { spawnSync } from 'node:child_process'
import path from 'node:path'
import { pathToFileURL } from 'node:url'
import { ROOT, requestJson, runCli, startServer, type TestServer } from './helpers/server.js'

/**
 * API keys: a revoked key stops working on the very next request, and no key — good, bad or revoked, sent
 * where it belongs or where it does not — ever shows up in the server's logs, in an answer's error body or in
 * /openapi.json.
 */

let s: TestServer
t.before(async () => {
  // Debug level: everything the server can log is logged, so the grep below sees it all.
  s = await startServer({ env: { WEFT_LOG_LEVEL: 'debug', WEFT_ACCESS_LOG: 'true' } })
})
t.teardown(() => s?.stop())

const P = 'acme/keys'
const b64 = (x: string) => Buffer.from(x).toString('base64')

async function mint(body: Record<string, unknown> = { user_id: 'alice', entities: ['acme'] }) {
  const r = await requestJson(s, 'POST', '/admin/keys', body)
  if (r.status !== 200) throw new Error(r.text)
  return r.json as { key: string; info: { key_id: string; prefix: string } }
}

const stats = (headers: Record<string, string>, path = '/calls/query_stats') =>
  fetch(s.url + path, {
    method: 'POST',
    headers: { ...headers, 'content-type': 'application/json' },
    body: JSON.stringify({ project_id: P }),
  })

/**
 * Every way a key can be sent, right or wrong. Not X-Request-Id: that is a correlation id the client chooses
 * for the server to echo and log (docs/api-keys.md says so).
 */
function placements(key: string): [string, string, Record<string, string>][] {
  return [
    ['Basic api:key', '', { authorization: 'Basic ' + b64('api:' + key) }],
    ['Basic key:', '', { authorization: 'Basic ' + b64(key + ':') }],
    ['Bearer', '', { authorization: 'Bearer ' + key }],
    ['wandb-api-key', '', { 'wandb-api-key': key }],
    ['bare Authorization', '', { authorization: key }],
    ['Token scheme', '', { authorization: 'Token ' + key }],
    ['Basic, not base64', '', { authorization: 'Basic ' + key }],
    ['x-api-key', '', { 'x-api-key': key }],
    ['cookie', '', { cookie: 'key=' + key }],
    ['query ?api_key=', `?api_key=${encodeURIComponent(key)}`, {}],
    ['query ?key= with a wrong Bearer', `?key=${encodeURIComponent(key)}`, { authorization: 'Bearer nope' }],
    ['user-agent', '', { 'user-agent': key, authorization: 'Bearer nope' }],
  ]
}

t.test('revocation takes effect on the next request', async (t) => {
  const { key, info } = await mint()
  t.equal((await stats(s.basic(key))).status, 200, 'works before')
  t.equal((await stats(s.bearer(key), '/calls/query_stats')).status, 200, 'Bearer too')
  const rev = await requestJson(s, 'DELETE', `/admin/keys/${info.key_id}`)
  t.equal(rev.status, 200)
  t.ok(rev.json.revoked_at, 'revoked_at set')
  for (const [how, , headers] of placements(key).slice(0, 4)) t.equal((await stats(headers)).status, 401, `next request (${how}): 401`)
  const chat = await fetch(s.url + '/v1/models', { headers: s.bearer(key) })
  t.equal(chat.status, 401, 'the chat family too')
  t.equal((await requestJson(s, 'DELETE', `/admin/keys/${info.key_id}`)).status, 200, 'revoking twice is harmless')
  t.equal((await stats(s.basic(key))).status, 401, 'and stays revoked')
  // Through the CLI, which goes through the running server's admin API.
  const other = await mint()
  t.equal((await stats(s.basic(other.key))).status, 200)
  const cli = await runCli(['keys', 'revoke', other.info.key_id, '--data-dir', s.dataDir], { WEFT_API_KEY: s.key })
  t.equal(cli.code, 0, `weft keys revoke: ${cli.stdout}${cli.stderr}`)
  t.equal((await stats(s.basic(other.key))).status, 401, 'revoked by `weft keys revoke`: 401 at once')
})

t.test('no key in logs, error bodies or the OpenAPI document', async (t) => {
  const good = await mint()
  const revoked = await mint({ user_id: 'bob', entities: ['other'] })
  await requestJson(s, 'DELETE', `/admin/keys/${revoked.info.key_id}`)
  const bad = 'weft_' + 'Z'.repeat(32)
  const keys = { admin: s.key, good: good.key, revoked: revoked.key, bad }
  const bodies: string[] = []
  let requests = 0
  for (const key of Object.values(keys)) {
    for (const [, query, headers] of placements(key)) {
      for (const path of ['/calls/query_stats', '/v2/other/proj/ops', '/v1/chat/completions', '/no/such/route']) {
        const res = await fetch(s.url + path + query, {
          method: 'POST',
          headers: { ...headers, 'content-type': 'application/json' },
          body: JSON.stringify({ project_id: 'other/proj', model: 'weft-tiny', messages: [] }),
        })
        bodies.push(`${res.status} ${[...res.headers].join(' ')} ${await res.text()}`)
        requests++
      }
    }
  }
  // A malformed and an over-long credential, and the admin API's listing.
  bodies.push(await (await stats({ authorization: 'Basic ' + b64('api:' + good.key + 'x'.repeat(600)) })).text())
  bodies.push((await requestJson(s, 'GET', '/admin/keys')).text)
  const openapi = (await requestJson(s, 'GET', '/openapi.json')).text
  await new Promise((r) => setTimeout(r, 600)) // the logger flushes at least every 250 ms
  const logs = s.output()
  t.ok(logs.includes('"msg":"request"'), 'the access log is captured')
  t.ok(requests > 150, `${requests} requests made`)
  for (const [name, key] of Object.entries(keys)) {
    const lines = logs.split('\n').filter((l) => l.includes(key))
    t.notOk(lines.length, `the ${name} key is not in the logs`, { found: lines.slice(0, 3) })
    t.notOk(logs.includes(b64('api:' + key)), `nor its Basic form`)
    const leaks = bodies.filter((b) => b.includes(key))
    t.equal(leaks.length, 0, `the ${name} key is in no answer`, { found: leaks.slice(0, 3) })
    t.notOk(openapi.includes(key), `the ${name} key is not in /openapi.json`)
  }
  t.notOk(/weft_[A-Za-z0-9_-]{20,}/.test(openapi), 'no key-shaped example in /openapi.json')
  t.notOk(/authorization/i.test(logs.replace(/"msg":"[^"]*"/g, '')), 'no Authorization header in the logs')
})

t.test('the logger censors credential fields, should one ever be passed to it', async (t) => {
  const log = pathToFileURL(path.join(ROOT, 'dist', 'src', 'core', 'log.js')).href
  const script = `const { createLogger } = await import(${JSON.stringify(log)})
    createLogger('info').info({ authorization: 'Bearer S1', apiKey: 'S2', headers: { authorization: 'Basic S3', 'wandb-api-key': 'S4' }, path: '/x' }, 'm')
    setTimeout(() => {}, 400)`
  const r = spawnSync(process.execPath, ['--input-type=module', '-e', script], { encoding: 'utf8' })
  const line = JSON.parse(r.stdout.trim().split('\n').pop()!)
  t.same(line.headers, { authorization: '[redacted]', 'wandb-api-key': '[redacted]' })
  t.equal(line.authorization, '[redacted]')
  t.equal(line.apiKey, '[redacted]')
  t.equal(line.path, '/x', 'other fields are kept')
  t.notMatch(r.stdout, /S[1-4]/)
})
