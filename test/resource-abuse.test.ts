import t from 'tap'
import http from 'node:http'
import { postJson, requestJson, startServer, type TestServer } from './helpers/server.js'
import { hex } from './helpers/ids.js'

/**
 * Requests built to cost the server a lot answer within a bound: huge n / top_logprobs / max_tokens are
 * refused at once, a table of a million rows is refused by the body limit or the row limit, filter strings are
 * matched as text (no regex operator), and structured-output patterns and schemas built to blow up a grammar
 * compile answer within a bound while other requests keep being served.
 */

let s: TestServer
t.before(async () => {
  s = await startServer()
})
t.teardown(() => s?.stop())

const P = 'acme/abuse'

async function timed<T>(f: () => Promise<T>): Promise<[T, number]> {
  const t0 = performance.now()
  const r = await f()
  return [r, performance.now() - t0]
}

const chat = (body: Record<string, unknown>) =>
  postJson(s, '/v1/chat/completions', { model: 'weft-tiny', messages: [{ role: 'user', content: 'hi' }], ...body }, s.bearer())

t.test('huge n / top_logprobs / max_tokens: 400, fast', async (t) => {
  const combos: Record<string, unknown>[] = [
    { n: 1_000_000 },
    { n: 2 ** 31 },
    { logprobs: true, top_logprobs: 1_000_000 },
    { max_tokens: 2 ** 40 },
    { max_completion_tokens: 1e15 },
    { n: 10_000, max_tokens: 4096 },
    { n: 1000, logprobs: true, top_logprobs: 20, max_tokens: 4000 },
    { n: 64, best_of: 1_000_000 },
    { prompt_logprobs: 1_000_000 },
    { stream: true, n: 1_000_000 },
  ]
  // One refused request first, untimed: the first chat request pays the chat path's one-time start (520 ms on a
  // quiet machine, 2.7 s at load 20); the bound is about what a huge request costs, not that.
  t.equal((await chat(combos[0]!)).status, 400, 'a first refused request (untimed)')
  for (const c of combos) {
    const [r, ms] = await timed(() => chat(c))
    t.equal(r.status, 400, `${JSON.stringify(c)}: 400 (${r.status} ${r.text.slice(0, 160)})`)
    t.ok(ms < 2000, `answered in ${Math.round(ms)} ms`)
    t.ok(r.json?.error?.message, 'in the OpenAI error shape')
  }
  const [ok, ms] = await timed(() => chat({ max_tokens: 2 }))
  t.equal(ok.status, 200, `a normal completion is still served (${Math.round(ms)} ms)`)
})

/**
 * Posts a table of `rows` copies of `row`, streamed, with its true Content-Length; `headOnly` sends only the
 * start of the body and waits: a server that refuses on the declared length answers without reading the rest.
 */
function postRows(
  path: string,
  rows: number,
  row: string,
  opts: { headOnly?: boolean } = {},
): Promise<{ status: number; ms: number; body: string }> {
  const head = `{"table":{"project_id":"${P}","rows":[`
  const tail = ']}}'
  const length = head.length + rows * row.length + (rows - 1) + tail.length
  const t0 = performance.now()
  return new Promise((resolve, reject) => {
    const req = http.request(s.url + path, {
      method: 'POST',
      headers: { ...s.basic(), 'content-type': 'application/json', 'content-length': String(length) },
    })
    req.on('response', (res) => {
      let body = ''
      res.on('data', (d) => (body += d))
      res.on('end', () => resolve({ status: res.statusCode!, ms: performance.now() - t0, body }))
    })
    // The server may answer and close before the body is sent (that is the point): a failed write is not
    // the answer; no answer in 20 s is.
    req.on('error', () => {})
    setTimeout(() => reject(new Error('no answer in 20 s')), 20_000).unref()
    if (opts.headOnly) return void req.write(head)
    const chunk = Array.from({ length: 10_000 }, () => row).join(',')
    req.write(head)
    let sent = 0
    const pump = () => {
      while (sent < rows) {
        const n = Math.min(10_000, rows - sent)
        const piece = (sent > 0 ? ',' : '') + (n === 10_000 ? chunk : Array.from({ length: n }, () => row).join(','))
        sent += n
        if (!req.write(piece)) return void req.once('drain', pump)
      }
      req.end(tail)
    }
    pump()
  })
}

t.test('a million-row table/create is refused, fast', async (t) => {
  // 1M rows of ~40 bytes: past the 32 MiB body limit, refused on its Content-Length.
  const big = await postRows('/table/create', 1_000_000, `{"q":"${'x'.repeat(32)}"}`, { headOnly: true })
  t.equal(big.status, 413, `1M × 40 B rows: 413 (${big.body.slice(0, 120)})`)
  t.ok(big.ms < 3000, `in ${Math.round(big.ms)} ms`)
  // 1M rows of 7 bytes fit the body limit: the row limit refuses them.
  const small = await postRows('/table/create', 1_000_000, '{"i":1}')
  t.ok(small.status === 400 || small.status === 413, `1M × 7 B rows: ${small.status} (${small.body.slice(0, 160)})`)
  t.match(small.body, /at most 100000/, 'the row limit says so')
  t.ok(small.ms < 15_000, `in ${Math.round(small.ms)} ms`)
  const q = await postJson(s, '/table/query_stats_batch', { project_id: P })
  t.same(q.json, { tables: [] }, 'nothing was stored')
})

t.test('filter strings are text, not patterns', async (t) => {
  const id = hex(16)
  const start = {
    project_id: P,
    id,
    trace_id: hex(32),
    op_name: 'op',
    started_at: new Date().toISOString(),
    attributes: {},
    inputs: { s: 'a'.repeat(5000) },
  }
  t.equal((await postJson(s, '/call/start', { start })).status, 200)
  // Patterns that backtrack catastrophically as regexes; $contains is a substring test.
  for (const substr of ['(a+)+$', '(a|aa)*b', 'a'.repeat(4000) + '!', '%_%_%_%_%_%_%_%_%_%_%_%_%_%_%_%_%_%_%']) {
    const [r, ms] = await timed(() =>
      postJson(s, '/calls/query', {
        project_id: P,
        query: { $expr: { $contains: { input: { $getField: 'inputs.s' }, substr: { $literal: substr } } } },
      }),
    )
    t.equal(r.status, 200, `$contains ${JSON.stringify(substr.slice(0, 20))}: 200`)
    t.same(r.json.calls, [], 'matches nothing (no pattern semantics)')
    t.ok(ms < 3000, `in ${Math.round(ms)} ms`)
  }
  const ops = JSON.stringify((await requestJson(s, 'GET', '/openapi.json')).json)
  t.notOk(/\$regex|\$like|\$match\b/.test(ops), 'no regex or LIKE operator in the query language')
})

t.test('structured outputs built to blow up a grammar compile answer in bounded time', async (t) => {
  const cases: [string, Record<string, unknown>][] = [
    ['nested counted repetition', { structured_outputs: { regex: '((a{1,100}){1,100}){1,100}' } }],
    ['exponential alternation', { structured_outputs: { regex: '(a|aa|aaa|aaaa)*(b|bb)*'.repeat(50) } }],
    ['huge character-class repetition', { structured_outputs: { regex: '[\\s\\S]{1,100000}' } }],
    ['deep JSON schema', { structured_outputs: { json: nested(200) } }],
    ['wide JSON schema', { structured_outputs: { json: wide(5000) } }],
    ['large choice list', { structured_outputs: { choice: Array.from({ length: 20_000 }, (_, i) => `choice-${i}`) } }],
  ]
  for (const [name, so] of cases) {
    const health = setInterval(() => void fetch(s.url + '/health').catch(() => {}), 200)
    const probe = timed(() => fetch(s.url + '/health').then((r) => r.status))
    const [r, ms] = await timed(() => chat({ ...so, max_tokens: 4 }))
    clearInterval(health)
    const [hs, hms] = await probe
    t.ok(
      r.status === 200 || r.status === 400 || r.status === 413,
      `${name}: answered ${r.status} in ${Math.round(ms)} ms ${r.text.slice(0, 120)}`,
    )
    t.ok(ms < 60_000, `${name}: within 60 s`)
    t.equal(hs, 200, `/health meanwhile answered in ${Math.round(hms)} ms`)
  }
})

function nested(depth: number): Record<string, unknown> {
  let schema: Record<string, unknown> = { type: 'string' }
  for (let i = 0; i < depth; i++)
    schema = { type: 'object', properties: { a: schema, b: { type: 'array', items: { type: 'integer' } } }, required: ['a'] }
  return schema
}

function wide(n: number): Record<string, unknown> {
  const properties: Record<string, unknown> = {}
  for (let i = 0; i < n; i++) properties[`p${i}`] = { type: 'string', pattern: '[a-z]{1,20}' }
  return { type: 'object', properties, required: Object.keys(properties) }
}
