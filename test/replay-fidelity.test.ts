import t from 'tap'
import { randomBytes } from 'node:crypto'
import { rm } from 'node:fs/promises'
import { startServer, tempDir } from './helpers/server.js'

// Calls read live (their batches parsed into the tail as they arrived, raw values kept as bytes by the fast path)
// must be the same calls, field by field, after a SIGKILL and a replay of the log: odd text, raw JSON sent with
// whitespace and escapes, a 20-digit number, usage, refs, exceptions.

process.env.WEFT_MODEL ??= 'none'
const hex = (n: number) => randomBytes(n / 2).toString('hex')
const P = 'acme/tail-rows'

function batch(n: number): string {
  const items: string[] = []
  for (let i = 0; i < n; i++) {
    const id = hex(16)
    const trace = hex(32)
    // Written by hand: whitespace and escapes inside inputs/output, as a client may send them (the fast path keeps them as bytes).
    items.push(`{"mode":"start","req":{"start":{"project_id":"${P}","id":"${id}","trace_id":"${trace}","op_name":"weave:///${P}/op/f:v${i}",
      "started_at":"2026-01-0${1 + (i % 9)}T00:00:0${i % 10}Z","attributes":{ "k" : [1, 2.5e3, null] },
      "inputs": { "text" : "é \\u00e9 \\"q\\" \\n ${'x'.repeat(i * 7)}", "ref" : "weave:///${P}/object/o:abc", "n": 12345678901234567890 }}}}`)
    items.push(`{"mode":"end","req":{"end":{"project_id":"${P}","id":"${id}","ended_at":"2026-01-0${1 + (i % 9)}T00:00:1${i % 10}Z",
      "output": [ "a\\tb", { "deep" : { "x" : "😀" } } ], "summary":{"usage":{"m${i % 3}":{"input_tokens":${i},"output_tokens":${2 * i},"total_tokens":${3 * i},"requests":1}}},
      "exception": ${i % 4 === 0 ? '"boom"' : 'null'}}}}`)
  }
  return `{"batch":[${items.join(',')}]}`
}

t.test('calls read live equal the same calls after a SIGKILL and a replay of the log', async (t) => {
  const dataDir = tempDir()
  t.teardown(() => rm(dataDir, { recursive: true, force: true }))
  // Nothing is flushed: after the kill, every part comes back from the log.
  const env = { WEFT_CALLS_FLUSH_ROWS: '100000000', WEFT_CALLS_FLUSH_INTERVAL_MS: '3600000' }
  let s = await startServer({ dataDir, env })
  const headers = { ...s.basic(), 'content-type': 'application/json' }
  const sent = await Promise.all(
    [40, 1, 25].map(async (n) => {
      const r = await fetch(s.url + '/call/upsert_batch', { method: 'POST', headers, body: batch(n) })
      const body = (await r.json()) as { res: Record<string, unknown>[] }
      return [r.status, body.res.filter((x) => 'error' in x).length]
    }),
  )
  t.same(
    sent,
    [
      [200, 0],
      [200, 0],
      [200, 0],
    ],
    'three batches acknowledged, no item refused',
  )
  const read = async () => {
    const r = await fetch(s.url + '/calls/stream_query', {
      method: 'POST',
      headers,
      body: JSON.stringify({ project_id: P, sort_by: [{ field: 'id', direction: 'asc' }] }),
    })
    t.equal(r.status, 200)
    return (await r.text())
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as Record<string, unknown>)
  }
  const live = await read()
  t.equal(live.length, 66, 'every call, live')
  const one = live.find((c) => (c.op_name as string).endsWith(':v3'))!
  t.same(one.inputs, { text: `é é "q" \n ${'x'.repeat(21)}`, ref: `weave:///${P}/object/o:abc`, n: 12345678901234567890 }, 'inputs as sent')
  t.same(one.output, ['a\tb', { deep: { x: '😀' } }], 'output as sent')
  s.proc.kill('SIGKILL')
  await s.exited()
  s = await startServer({ dataDir, env, key: s.key })
  t.teardown(() => s.stop())
  const replayed = await read()
  t.same(replayed, live, 'the same calls, field by field, after the replay')
})
