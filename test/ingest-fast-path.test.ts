import t from 'tap'
import { RawJson, parseWithRawValues } from '../src/calls/ingest/raw-json.js'
import { refsIn } from '../src/calls/ingest/parts.js'
import { rm } from 'node:fs/promises'
import { isDeepStrictEqual } from 'node:util'
import { startServer, tempDir } from './helpers/server.js'
import { rng } from './helpers/rng.js'

// No chat in this file: its servers start without the built-in model (about 1 s of CPU less per start).
process.env.WEFT_MODEL ??= 'none'

const PIECES = [
  'a',
  'é',
  '日本',
  '😀',
  '"',
  '\\',
  '/',
  '\n',
  '\t',
  '\u0001',
  '\u001f',
  'weave:///e/p/object/o:v1',
  ' ',
  '}',
  '[',
  ',',
  ':',
  '\u2028',
]

function text(r: () => number): string {
  let s = ''
  for (let i = Math.floor(r() * 6); i > 0; i--) s += PIECES[Math.floor(r() * PIECES.length)]!
  return r() < 0.2 ? 'weave:///e/p/op/x:' + s : s
}

function value(r: () => number, depth: number): unknown {
  const k = r()
  if (depth > 4 || k < 0.3) return text(r)
  if (k < 0.4) return [0, -0, 1.5e300, -12e-5, 123456789012, 0.1, true, false, null][Math.floor(r() * 9)]
  if (k < 0.7) return Array.from({ length: Math.floor(r() * 4) }, () => value(r, depth + 1))
  const o: Record<string, unknown> = {}
  for (let i = Math.floor(r() * 4); i > 0; i--) o[text(r)] = value(r, depth + 1)
  return o
}

/** JSON text with random (legal) whitespace between tokens, as clients may send. */
function spaced(v: unknown, r: () => number): string {
  const ws = () => ['', ' ', '\n', '\t ', '\r\n'][Math.floor(r() * 5)]!
  if (Array.isArray(v)) return `[${ws()}${v.map((x) => spaced(x, r)).join(`${ws()},${ws()}`)}${ws()}]`
  if (v && typeof v === 'object')
    return `{${ws()}${Object.entries(v)
      .map(([k, x]) => `${JSON.stringify(k)}${ws()}:${ws()}${spaced(x, r)}`)
      .join(`,${ws()}`)}${ws()}}`
  return JSON.stringify(v)
}

function body(r: () => number, n: number): string {
  const batch = []
  for (let i = 0; i < n; i++) {
    const id = i.toString(16).padStart(16, '0')
    const inputs = value(r, 0)
    batch.push({
      mode: 'start',
      req: {
        start: {
          project_id: 'e/p',
          id,
          op_name: 'op',
          started_at: '2026-01-01T00:00:00Z',
          attributes: value(r, 0),
          inputs: inputs && typeof inputs === 'object' && !Array.isArray(inputs) ? inputs : { inputs },
        },
      },
    })
    batch.push({ mode: 'end', req: { end: { project_id: 'e/p', id, ended_at: '2026-01-01T00:00:01Z', output: value(r, 0), summary: {} } } })
  }
  return spaced({ batch }, r)
}

/** The fast path's value with each RawJson parsed: must equal JSON.parse of the whole body. */
function unraw(v: unknown, raws: [string, RawJson][], key = ''): unknown {
  if (v instanceof RawJson) {
    raws.push([key, v])
    return JSON.parse(Buffer.from(v.bytes).toString('utf8'))
  }
  if (Array.isArray(v)) return v.map((x) => unraw(x, raws))
  if (v && typeof v === 'object') return Object.fromEntries(Object.entries(v).map(([k, x]) => [k, unraw(x, raws, k)]))
  return v
}

t.test('the fast path reads what JSON.parse reads, keeps large values as their bytes, and finds the same refs', async (t) => {
  let fast = 0
  let withRefs = 0
  const differ: number[] = []
  for (let seed = 1; seed <= 300; seed++) {
    const r = rng(seed)
    const src = body(r, 1 + Math.floor(r() * 4))
    const got = parseWithRawValues(Buffer.from(src), 'batch')
    if (got === null) continue // a surrogate escape or the like: the ordinary path takes it
    fast++
    const raws: [string, RawJson][] = []
    if (!isDeepStrictEqual(unraw(got, raws), JSON.parse(src))) differ.push(seed)
    for (const [key, raw] of raws) {
      // Refs are looked for where the filters look: inputs and output.
      if (key === 'attributes') continue
      const want = [...new Set(refsIn(JSON.parse(Buffer.from(raw.bytes).toString('utf8'))))].sort()
      if (want.length) withRefs++
      if (JSON.stringify([...raw.refs].sort()) !== JSON.stringify(want)) differ.push(seed)
    }
  }
  t.same(differ, [], 'no seed differs from JSON.parse in value or refs')
  t.ok(fast > 250, `most bodies take the fast path (${fast}/300)`)
  t.ok(withRefs > 50, `refs were exercised (${withRefs} raw values hold some)`)
})

t.test('the fast path declines what it cannot vouch for; it never accepts invalid JSON', async (t) => {
  const ok =
    '{"batch":[{"mode":"start","req":{"start":{"project_id":"e/p","op_name":"o","started_at":"2026-01-01T00:00:00Z","attributes":{},"inputs":{"a":1}}}}]}'
  t.type(parseWithRawValues(Buffer.from(ok), 'batch'), 'object')
  const bad = [
    ok.slice(0, -1),
    ok + 'x',
    ok.replace('{"a":1}', '{"a":01}'),
    ok.replace('{"a":1}', '{"a":1.}'),
    ok.replace('{"a":1}', '{"a":tru}'),
    ok.replace('{"a":1}', '{"a":"x\u0001"}'),
    ok.replace('{"a":1}', '{"a":"\\x"}'),
    ok.replace('{"a":1}', '{"a":"\\u12"}'),
    ok.replace('{"a":1}', '{"a":[1,]}'),
    ok.replace('{"a":1}', '{"a":1,}'),
    ok.replace('{"a":1}', "{'a':1}"),
    ok.replace('{"a":1}', '{"a":"\\ud800"}'),
    ok.replace('{"a":1}', '{"a":"\\ud83d\\ude00"}'),
    ok.replace('{"a":1}', '['.repeat(300) + ']'.repeat(300)),
    '',
    ' ',
  ]
  bad.forEach((b, i) => t.equal(parseWithRawValues(Buffer.from(b), 'batch'), null, `invalid or unvouched body ${i} declined`))
  t.equal(parseWithRawValues(Buffer.from([0x7b, 0xff, 0x7d]), 'batch'), null, 'not UTF-8: declined')
  // An escaped key on the way is valid JSON, just not one the walk follows: the value stays parsed.
  const escapedKey = parseWithRawValues(Buffer.from(ok.replace('"inputs"', '"\\u0069nputs"')), 'batch') as {
    batch: { req: { start: { inputs: unknown } } }[]
  }
  t.same(escapedKey.batch[0]!.req.start.inputs, { a: 1 })
})

t.test('a control character anywhere in a long string is refused, at any alignment of the body; nothing else is', async (t) => {
  // Strings past 48 bytes are checked four bytes at a time (Scanner.controlFree): every position of the character,
  // every alignment of the body in its buffer, and bytes around the bound (0x1f refused; 0x20, 0x7f, UTF-8 accepted).
  const wrap = (s: string) =>
    `{"batch":[{"mode":"start","req":{"start":{"project_id":"e/p","op_name":"o","started_at":"2026-01-01T00:00:00Z","attributes":{},"inputs":{"a":"${s}"}}}}]}`
  const base = 'q'.repeat(40) + 'é€ ~\u007f' + 'w'.repeat(41)
  let refused = 0
  let accepted = 0
  for (const ch of ['\u0000', '\u0001', '\n', '\u001f', ' ', '\u007f', 'é']) {
    for (let at = 0; at <= base.length; at += 1) {
      const text = base.slice(0, at) + ch + base.slice(at)
      const body = Buffer.from(wrap(text))
      // The oracle: JSON.parse refuses a raw control character inside a string.
      let valid = true
      try {
        JSON.parse(body.toString())
      } catch {
        valid = false
      }
      for (let shift = 0; shift < 4; shift++) {
        const room = Buffer.alloc(body.length + 8)
        body.copy(room, shift)
        const got = parseWithRawValues(room.subarray(shift, shift + body.length), 'batch')
        if ((got !== null) !== valid)
          t.fail(`char ${JSON.stringify(ch)} at ${at}, shift ${shift}: ${got === null ? 'refused' : 'accepted'}`)
        if (got === null) refused++
        else accepted++
      }
    }
  }
  t.ok(refused > 0 && accepted > 0, `${refused} bodies refused, ${accepted} accepted, each as JSON.parse decides`)
})

t.test('calls ingested through the fast path read back exactly; hostile strings never poison the log', async (t) => {
  const dir = tempDir()
  t.teardown(() => rm(dir, { recursive: true, force: true }))
  const srv = await startServer({ dataDir: dir })
  t.teardown(() => srv.stop())
  const post = async (p: string, b: unknown) => {
    const res = await fetch(srv.url + p, {
      method: 'POST',
      headers: { ...srv.basic(), 'content-type': 'application/json' },
      body: typeof b === 'string' ? b : JSON.stringify(b),
    })
    return { status: res.status, json: (await res.json()) as any }
  }
  const r = rng(7)
  const sent: { id: string; inputs: unknown; output: unknown; attributes: unknown }[] = []
  const items: string[] = []
  for (let i = 0; i < 40; i++) {
    const id = (0xabc000 + i).toString(16).padStart(16, '0')
    const v = value(r, 0)
    const inputs = { v, ref: i % 5 === 0 ? `weave:///e/p/object/thing:v${i}` : 'x' }
    const output = i % 3 === 0 ? [value(r, 0), 'weave:///e/p/object/out:v1'] : { o: value(r, 0), n: 1e-7 }
    const attributes = { a: text(r) }
    sent.push({ id, inputs, output, attributes })
    items.push(
      `{"mode":"start","req":{"start":{"project_id":"e/p","id":"${id}","op_name":"op","started_at":"2026-01-01T00:00:00Z","attributes":${spaced(attributes, r)},"inputs":${spaced(inputs, r)}}}}`,
    )
    items.push(
      `{"mode":"end","req":{"end":{"project_id":"e/p","id":"${id}","ended_at":"2026-01-01T00:00:01Z","output":${spaced(output, r)},"summary":{}}}}`,
    )
  }
  const res = await post('/call/upsert_batch', `{"batch":[${items.join(',')}]}`)
  t.equal(res.status, 200)
  t.equal(res.json.res.length, 80)
  const back = await Promise.all(sent.map(async (s) => (await post('/call/read', { project_id: 'e/p', id: s.id })).json.call))
  t.same(
    back.map((c) => [c.inputs, c.output, c.attributes]),
    sent.map((s) => [s.inputs, s.output, s.attributes]),
    'every call reads back as sent',
  )
  const byRef = await post('/calls/query', { project_id: 'e/p', filter: { input_refs: ['weave:///e/p/object/thing:v10'] } })
  t.same(
    byRef.json.calls.map((c: { id: string }) => c.id),
    [sent[10]!.id],
    'a ref inside raw inputs is filterable',
  )
  const byOutRef = await post('/calls/query', { project_id: 'e/p', filter: { output_refs: ['weave:///e/p/object/out:v1'] } })
  t.equal(byOutRef.json.calls.length, 14, 'refs inside raw outputs (arrays) are filterable')

  // Lone surrogates, which DuckDB's JSON reader refuses, in every kind of string field.
  const lone = '\\ud800'
  const hostile = `{"start":{"project_id":"e/p","id":"00000000000000ff","op_name":"op${lone}","display_name":"d${lone}","thread_id":"t${lone}","started_at":"2026-01-01T00:00:00Z","attributes":{"k${lone}":"${lone}"},"inputs":{"x":"${lone}","r":"weave:///e/p/object/a${lone}:v1"}}}`
  t.equal((await post('/call/start', hostile)).status, 200)
  const end = `{"end":{"project_id":"e/p","id":"00000000000000ff","ended_at":"2026-01-01T00:00:01Z","exception":"e${lone}","output":"${lone}","summary":{"usage":{"m${lone}":{"prompt_tokens":1}}}}}`
  t.equal((await post('/call/end', end)).status, 200)
  const h = (await post('/call/read', { project_id: 'e/p', id: '00000000000000ff' })).json.call
  t.equal(h.op_name, 'op\ufffd', 'a lone surrogate in a plain field is stored as U+FFFD')
  t.same(h.inputs.x, '\ud800', 'inside a JSON value it is kept')
  t.equal(h.exception, 'e\ufffd')
  // The log replays after a restart: nothing in it is refused.
  const code = await srv.stop('SIGKILL')
  t.not(code, 0)
  const again = await startServer({ dataDir: dir, key: srv.key })
  t.teardown(() => again.stop())
  const res2 = await fetch(again.url + '/calls/query_stats', {
    method: 'POST',
    headers: { ...again.basic(), 'content-type': 'application/json' },
    body: JSON.stringify({ project_id: 'e/p' }),
  })
  t.same(await res2.json(), { count: 41, has_more: false }, 'every call is back after a restart')
})
