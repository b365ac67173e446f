import t from 'tap'
import { rm } from 'node:fs/promises'
import { DuckDBInstance } from '@duckdb/node-api'
import { encodeParts } from '../src/calls/ingest/encode.js'
import { RawJson, parseWithRawValues } from '../src/calls/ingest/raw-json.js'
import { Tail, tailMoves } from '../src/calls/storage/tail.js'

// These await each insert themselves, with no read to move it: batches move at the next turn rather than after
// the 100 ms a server's batches may wait for others (test/tail-moves covers that).
tailMoves.delayMs = 0
import type { CallPart } from '../src/calls/model.js'
import { tempDir } from './helpers/server.js'

// A raw value the scanner calls exact reaches the tail as a JSON string, copied (see RawJson.exact, encodeParts): the
// tail must then hold the same text DuckDB stores when it parses the value and writes it back, byte for byte.

/** Inputs as clients send them: [the value's JSON, whether its bytes are already DuckDB's text for it]. */
const VALUES: [string, boolean][] = [
  ['{"model":"gpt-4o","messages":[{"role":"user","content":"hi"}]}', true],
  ['{"t":"é 😀 \u2028 \x7f","q":"\\"a\\" \\\\ \\n\\t\\r\\b\\f","k":{"k":[]},"k":{}}', true],
  ['{"n":[0,-1,12345678901234567890,-98765432109876543210,0.5,1.0,100.0,-2.75,1e21,5e-324,1.5e300,true,false,null]}', true],
  ['{ "a" : 1 }', false],
  ['{"a":[1,\n2]}', false],
  ['{"t":"\\u00e9"}', false],
  ['{"t":"a\\/b"}', false],
  ['{"t":"\\u001f"}', false],
  ['{"\\u006b":1}', false],
  ['{"n":1.50}', false],
  ['{"n":2.5e3}', false],
  ['{"n":1E2}', false],
  ['{"n":1e+21}', false],
  ['{"n":-0}', false],
  ['{"n":-0.0}', false],
  ['{"n":3.14159265358979323846}', false],
  ['{"n":1e-7}', true],
]

t.test("an exact raw value is stored as DuckDB's text for it; others go in as values", async (t) => {
  const db = await DuckDBInstance.create(':memory:')
  const conn = await db.connect()
  const dir = tempDir('tail-exact-')
  const tail = await Tail.create(conn, `${dir}/files`)
  const parts: CallPart[] = VALUES.map(([json], i) => {
    const body = Buffer.from(`{"start":{"project_id":"acme/exact","id":"c${i}","inputs":${json}}}`)
    const { start } = parseWithRawValues(body, 'start') as { start: { inputs: RawJson } }
    return { kind: 'start', project_id: 'acme/exact', id: `c${i}`, inputs: start.inputs }
  })
  t.same(
    parts.map((p) => (p.inputs as RawJson).exact),
    VALUES.map(([, exact]) => exact),
    'the scanner tells exact values from the rest',
  )
  // As before exact values: every value as raw JSON, parsed and written back by DuckDB.
  const parsed = parts.map((p) => ({ ...p, id: `${p.id}-parsed`, inputs: new RawJson((p.inputs as RawJson).bytes, []) }))
  t.equal(await tail.insert(encodeParts(parts), 1n, 1, parts.length), parts.length)
  t.equal(await tail.insert(encodeParts(parsed), BigInt(parts.length + 1), 1, parts.length), parts.length)
  const rows = (await conn.runAndReadAll('SELECT id, inputs FROM call_parts ORDER BY seq')).getRowsJS()
  const stored = new Map(rows.map((r) => [r[0] as string, r[1] as string]))
  for (const [i, [json, exact]] of VALUES.entries()) {
    const duckdb = stored.get(`c${i}-parsed`)!
    t.equal(stored.get(`c${i}`), duckdb, `stored as DuckDB writes it: value ${i}`)
    if (exact) t.equal(duckdb, json, `exact: value ${i} stored as sent`)
  }
  conn.closeSync()
  db.closeSync()
  await rm(dir, { recursive: true, force: true })
})
