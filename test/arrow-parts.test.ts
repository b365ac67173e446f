import t from 'tap'
import fc from 'fast-check'
import { randomBytes } from 'node:crypto'
import { readFile, readdir, rm } from 'node:fs/promises'
import path from 'node:path'
import { DuckDBInstance, type DuckDBResult } from '@duckdb/node-api'
import { tableFromArrays, tableToIPC } from 'apache-arrow'
import { encodeParts } from '../src/calls/ingest/encode.js'
import { RawJson, parseWithRawValues } from '../src/calls/ingest/raw-json.js'
import { prepareIngest } from '../src/calls/ingest/prepare.js'
import { ARROW_MAX_PARTS, ARROW_MIN_PARTS, partsBatch } from '../src/calls/ingest/parts-batch.js'
import { ARROW_SCAN_SQL, ArrowGroupScan } from '../src/calls/arrow/parts-scan.js'
import { Tail, tailMoves } from '../src/calls/storage/tail.js'

// These await each insert themselves, with no read to move it: batches move at the next turn rather than after
// the 100 ms a server's batches may wait for others (test/tail-moves covers that).
tailMoves.delayMs = 0
import { isArrowBatch } from '../src/calls/storage/wal.js'
import { USAGE_FIELDS, type CallPart, type UsageRow } from '../src/calls/model.js'
import { startServer, tempDir } from './helpers/server.js'

// A batch of parts logged as Arrow (partsBatch) must reach the tail as exactly the rows the same batch logged as JSON
// (encodeParts) gets from DuckDB's JSON reader: the JSON path is the reference, and both go through the tail's own
// inserts. Where partsBatch cannot promise that it must say so (null), and the worker then logs JSON.

process.env.WEFT_MODEL ??= 'none'

/** Text as clients send it, hostile included: quotes, escapes, NUL and other controls, astral and lone surrogates. */
const text = fc.oneof(
  fc.string({ maxLength: 12 }),
  fc.string({ unit: 'binary', maxLength: 12 }),
  fc.constantFrom('', 'é 😀', '"q" \\ /', '\u0000', 'a\u0000b', '\ud800', 'x\udfffy', '\u2028\n\t', 'weave:///a/b/object/o:abc'),
)
/**
 * A JSON value as an SDK sends it without whitespace, read by the ingest scanner (exact or not: see RawJson). Objects
 * of text and integers are mostly exact; any JSON value (fractions, exponents, escapes) often is not.
 */
const simple = fc.dictionary(fc.string({ maxLength: 6 }), fc.oneof(text, fc.integer(), fc.boolean(), fc.constant(null)), { maxKeys: 4 })
const raw = fc.oneof({ arbitrary: simple, weight: 4 }, { arbitrary: fc.jsonValue({ maxDepth: 3 }), weight: 1 }).map((v) => {
  const body = Buffer.from(`{"start":{"project_id":"p","id":"i","inputs":${JSON.stringify({ v })}}}`)
  // A body the scanner does not take (lone surrogates, say) is parsed whole: the value arrives as JSON text.
  const parsed = parseWithRawValues(body, 'start') as { start: { inputs: RawJson } } | null
  return parsed ? parsed.start.inputs : JSON.stringify({ v })
})
const maybe = <T>(a: fc.Arbitrary<T>) => fc.option(a, { nil: undefined, freq: 3 })
const micros = fc.oneof(fc.maxSafeInteger(), fc.integer({ min: 0, max: 2 ** 30 }).map(String))
const usageRow: fc.Arbitrary<UsageRow> = fc.record({
  model: text,
  ...Object.fromEntries(USAGE_FIELDS.map((f) => [f, fc.option(fc.oneof(fc.integer(), fc.maxSafeInteger()), { nil: undefined })])),
}) as fc.Arbitrary<UsageRow>
const part: fc.Arbitrary<CallPart> = fc.record(
  {
    kind: fc.constantFrom('start', 'end', 'update', 'delete', 'merged'),
    project_id: text,
    id: text,
    trace_id: maybe(text),
    parent_id: maybe(fc.option(text)),
    thread_id: maybe(text),
    turn_id: maybe(text),
    op_name: maybe(text),
    display_name: maybe(text),
    started_us: maybe(micros),
    ended_us: maybe(micros),
    deleted_us: maybe(micros),
    attributes: maybe(fc.oneof(raw, text)),
    inputs: maybe(raw),
    output: maybe(fc.oneof(raw, text)),
    summary: maybe(text),
    exception: maybe(text),
    user_id: maybe(text),
    run_id: maybe(text),
    run_step: maybe(fc.integer()),
    run_step_end: maybe(fc.option(fc.integer())),
    input_refs: maybe(fc.array(text, { maxLength: 3 })),
    output_refs: maybe(fc.array(text, { maxLength: 3 })),
    usage: maybe(fc.array(usageRow, { maxLength: 3 })),
  },
  { requiredKeys: ['kind', 'project_id', 'id'] },
) as fc.Arbitrary<CallPart>
/** A value partsBatch must refuse: a raw value DuckDB's reader normalises, or a number past 2^53. */
const allExact = (ps: CallPart[]) => ps.every((p) => [p.attributes, p.inputs, p.output].every((v) => !(v instanceof RawJson) || v.exact))

t.test('an Arrow batch reaches the tail as the same rows as its JSON', async (t) => {
  const db = await DuckDBInstance.create(':memory:')
  const conn = await db.connect()
  const dir = tempDir('arrow-parts-')
  const tail = await Tail.create(conn, `${dir}/files`, await db.connect())
  const rows = async (gen: number) =>
    (await conn.runAndReadAll(`SELECT * EXCLUDE (wal_gen) FROM call_parts WHERE wal_gen = ${gen} ORDER BY seq`)).getRowsJS()
  let batches = 0
  let refused = 0
  await fc.assert(
    fc.asyncProperty(fc.array(part, { minLength: 1, maxLength: 8 }), async (parts) => {
      const arrow = partsBatch(parts)
      if (!allExact(parts)) {
        refused++
        t.equal(arrow, null, 'a value DuckDB would normalise: no Arrow batch')
        return
      }
      t.ok(arrow && isArrowBatch(arrow), 'an Arrow batch')
      await conn.run('DELETE FROM call_parts')
      t.equal(await tail.insert(encodeParts(parts), 7n, 1, parts.length), parts.length)
      t.equal(await tail.insert(Buffer.from(arrow!), 7n, 2, parts.length), parts.length)
      t.same(await rows(2), await rows(1), 'the same rows, numbered the same')
      batches++
    }),
    { numRuns: 300 },
  )
  t.ok(batches > 100 && refused > 10, `${batches} batches compared, ${refused} refused`)
  tail.close()
  conn.closeSync()
  db.closeSync()
  await rm(dir, { recursive: true, force: true })
})

t.test('Arrow batches staged together go in as one group, numbered on from its first seq as the JSON group is', async (t) => {
  const db = await DuckDBInstance.create(':memory:')
  const conn = await db.connect()
  const dir = tempDir('arrow-group-')
  const tail = await Tail.create(conn, `${dir}/files`, await db.connect())
  // Batches larger than a chunk of the scan (512 rows) and smaller; up to ARROW_GROUP_PARTS (8,192) in a group.
  const sizes = [3, 1000, 600, 1, 700, 2, 1024]
  const all = fc.sample(
    part.filter((p) => allExact([p])),
    { numRuns: sizes.reduce((a, b) => a + b), seed: 16 },
  )
  const batches = sizes.map((n, i) => all.slice(sizes.slice(0, i).reduce((a, b) => a + b, 0)).slice(0, n))
  const bases = sizes.map((_, i) => 100n + BigInt(sizes.slice(0, i).reduce((a, b) => a + b, 0)))
  const load = (gen: number, encode: (ps: CallPart[]) => Buffer) =>
    Promise.all(batches.map((ps, i) => tail.insert(encode(ps), bases[i]!, gen, ps.length)))
  const json = await load(1, encodeParts)
  const arrow = await load(2, (ps) => Buffer.from(partsBatch(ps)!))
  t.ok(
    arrow.some((n, i) => n > sizes[i]!),
    `batches went in together (parts a batch's group added: ${arrow.join(', ')})`,
  )
  t.same(json, arrow, 'grouped alike')
  const rows = async (gen: number) =>
    (await conn.runAndReadAll(`SELECT * EXCLUDE (wal_gen) FROM call_parts WHERE wal_gen = ${gen} ORDER BY seq`)).getRowsJS()
  const [a, b] = [await rows(1), await rows(2)]
  t.equal(b.length, all.length, 'every part')
  t.same(b, a, 'the same rows, numbered the same')
  // Compared in SQL as well as read back (the text went in as entries pointing into one copy of a chunk's bytes).
  const texts = ['project_id', 'id', 'op_name', 'attributes', 'inputs', 'output', 'summary', 'exception', 'input_refs']
  const same = await conn.runAndReadAll(
    `SELECT ${texts.map((c) => `count(*) FILTER (WHERE j.${c} IS NOT DISTINCT FROM a.${c})`).join(', ')}
     FROM call_parts j JOIN call_parts a ON j.seq = a.seq AND j.wal_gen = 1 AND a.wal_gen = 2`,
  )
  t.same(
    same.getRowsJS()[0]!.map(Number),
    texts.map(() => all.length),
    'equal in SQL too',
  )
  tail.close()
  conn.closeSync()
  db.closeSync()
  await rm(dir, { recursive: true, force: true })
})

t.test('an Arrow batch the insert cannot read fails its group alone and adds nothing', async (t) => {
  const db = await DuckDBInstance.create(':memory:')
  const conn = await db.connect()
  const dir = tempDir('arrow-bad-')
  const tail = await Tail.create(conn, `${dir}/files`, await db.connect())
  const good = fc.sample(
    part.filter((p) => allExact([p])),
    { numRuns: 600, seed: 7 },
  )
  // A well-formed Arrow stream with other columns than a parts batch: the table function's scan refuses it.
  const other = Buffer.from(tableToIPC(tableFromArrays({ id: ['a', 'b'], n: Int32Array.of(1, 2) }), 'stream'))
  t.ok(isArrowBatch(other), 'read as an Arrow record')
  await t.rejects(tail.insert(other, 1n, 3, 2), /other columns than the tail's/)
  t.equal(Number((await conn.runAndReadAll('SELECT count(*) FROM call_parts')).getRowsJS()[0]![0]), 0, 'nothing added')
  t.equal(await tail.insert(Buffer.from(partsBatch(good)!), 10n, 3, good.length), good.length, 'the next group goes in')
  const seqs = (await conn.runAndReadAll('SELECT min(seq), max(seq), count(*) FROM call_parts')).getRowsJS()[0]!.map(Number)
  t.same(seqs, [10, 10 + good.length - 1, good.length], 'numbered from its own first seq')
  tail.close()
  conn.closeSync()
  db.closeSync()
  await rm(dir, { recursive: true, force: true })
})

t.test('an Arrow group whose insert reports other than the parts scanned is rolled back', async (t) => {
  const db = await DuckDBInstance.create(':memory:')
  const conn = await db.connect()
  const dir = tempDir('arrow-count-')
  const tail = await Tail.create(conn, `${dir}/files`)
  const good = fc.sample(
    part.filter((p) => allExact([p])),
    { numRuns: 200, seed: 11 },
  )
  const own = await db.connect()
  const cols = await own.run('SELECT * FROM call_parts LIMIT 0')
  const scan = new ArrowGroupScan()
  own.registerTableFunction(scan.function({ names: cols.columnNames(), types: cols.columnTypes() }))
  const group = [{ batch: partsBatch(good)!, base: 1n, gen: 1 }]
  // The real insert, its count reported one high: as if DuckDB had added other rows than the scan gave it.
  const lying = async () => {
    const r = await own.run(ARROW_SCAN_SQL)
    return { rowsChanged: r.rowsChanged + 1 } as unknown as DuckDBResult
  }
  await t.rejects(scan.run(group, own, lying), /added 201 parts of 200/)
  const count = async () => Number((await conn.runAndReadAll('SELECT count(*) FROM call_parts')).getRowsJS()[0]![0])
  t.equal(await count(), 0, 'nothing added')
  t.equal(await scan.run(group, own, () => own.run(ARROW_SCAN_SQL)), good.length, 'the same group then goes in')
  t.equal(await count(), good.length)
  own.closeSync()
  tail.close()
  conn.closeSync()
  db.closeSync()
  await rm(dir, { recursive: true, force: true })
})

t.test('partsBatch refuses what it cannot hold as the JSON would reach the tail', async (t) => {
  const base: CallPart = { kind: 'start', project_id: 'p', id: 'i', started_us: 1 }
  t.ok(partsBatch([base]), 'a plain part')
  const spaced = (parseWithRawValues(Buffer.from('{"start":{"inputs":{ "a" : 1 }}}'), 'start') as { start: { inputs: RawJson } }).start
  t.equal(partsBatch([{ ...base, inputs: spaced.inputs }]), null, 'raw JSON with whitespace')
  t.equal(partsBatch([{ ...base, run_step: 1.5 }]), null, 'a fraction')
  t.equal(partsBatch([{ ...base, usage: [{ model: 'm', input_tokens: 2 ** 60 }] }]), null, 'a counter past 2^53')
  t.equal(partsBatch([{ ...base, started_us: '99999999999999999999' }]), null, 'microseconds past 2^53')
})

t.test('the worker logs Arrow when asked, from ARROW_MIN_PARTS to ARROW_MAX_PARTS parts, and JSON otherwise', async (t) => {
  const body = (n: number, inputs: string) =>
    Buffer.from(
      JSON.stringify({
        batch: Array.from({ length: n }, (_, i) => ({
          mode: 'start',
          req: {
            start: {
              project_id: 'a/b',
              id: i.toString(16).padStart(16, '0'),
              op_name: 'op',
              started_at: '2026-01-01T00:00:00Z',
              attributes: {},
              inputs: JSON.parse(inputs),
            },
          },
        })),
      }).replace(/"inputs":\{"x":1\}/g, `"inputs":${inputs}`),
    )
  const format = async (n: number, arrow: boolean, inputs = '{"x":1}') => {
    const r = await prepareIngest({ route: 'batch', body: body(n, inputs), userId: 'u', entities: null, arrow })
    if (!r.ok) throw new Error(r.message)
    t.equal(r.count, n, `${n} parts`)
    return isArrowBatch(r.record.subarray(8)) ? 'arrow' : 'json'
  }
  t.equal(await format(ARROW_MIN_PARTS, true), 'arrow')
  t.equal(await format(ARROW_MIN_PARTS, false), 'json', 'not asked (the ClickHouse backend reads JSON)')
  t.equal(await format(ARROW_MIN_PARTS - 1, true), 'json', 'a smaller batch (JSON batches share a statement)')
  t.equal(await format(ARROW_MAX_PARTS, true), 'arrow')
  t.equal(await format(ARROW_MAX_PARTS + 1, true), 'json', 'a larger batch (its tail insert runs off the event loop)')
  t.equal(await format(ARROW_MIN_PARTS, true, '{ "x" : 1 }'), 'json', 'inputs sent with whitespace')
})

t.test('a log of Arrow and JSON records: the calls read live are the calls after a SIGKILL and a replay', async (t) => {
  const dataDir = tempDir()
  t.teardown(() => rm(dataDir, { recursive: true, force: true }))
  const env = { WEFT_CALLS_FLUSH_ROWS: '100000000', WEFT_CALLS_FLUSH_INTERVAL_MS: '3600000' }
  let s = await startServer({ dataDir, env })
  const headers = { ...s.basic(), 'content-type': 'application/json' }
  const P = 'acme/arrow-log'
  const hex = (n: number) => randomBytes(n / 2).toString('hex')
  // Alternating: compact values (logged as Arrow) and values with whitespace (JSON); starts and ends in separate batches.
  const ids: string[] = []
  for (let b = 0; b < 6; b++) {
    const mine = Array.from({ length: ARROW_MIN_PARTS }, () => hex(16))
    ids.push(...mine)
    const inputs = b % 2 ? '{ "q" : "é 😀" }' : '{"q":"é 😀","n":[1,2.5]}'
    const starts = mine.map(
      (id, i) =>
        `{"mode":"start","req":{"start":{"project_id":"${P}","id":"${id}","trace_id":"${hex(32)}","op_name":"op${i % 7}","started_at":"2026-01-02T00:00:0${i % 10}Z","attributes":{},"inputs":${inputs}}}}`,
    )
    const ends = mine.map(
      (id, i) =>
        `{"mode":"end","req":{"end":{"project_id":"${P}","id":"${id}","ended_at":"2026-01-02T00:00:1${i % 10}Z","output":${b % 2 ? `{ "a" : ${i} }` : `{"a":${i}}`},"summary":{"usage":{"m":{"input_tokens":${i},"requests":1}}}}}}`,
    )
    for (const items of [starts, ends]) {
      const r = await fetch(s.url + '/call/upsert_batch', { method: 'POST', headers, body: `{"batch":[${items.join(',')}]}` })
      t.equal(r.status, 200)
    }
  }
  const read = async () => {
    const r = await fetch(s.url + '/calls/stream_query', {
      method: 'POST',
      headers,
      body: JSON.stringify({ project_id: P, sort_by: [{ field: 'id', direction: 'asc' }] }),
    })
    return (await r.text()).trim().split('\n')
  }
  const live = await read()
  t.equal(live.length, ids.length, 'every call read live')
  s.proc.kill('SIGKILL')
  await s.exited()
  // The log holds both kinds of record.
  const calls = path.join(dataDir, 'calls')
  const wal = (await readdir(calls)).filter((f) => f.startsWith('wal-')).sort()
  const data = await readFile(path.join(calls, wal[wal.length - 1]!))
  const kinds = { arrow: 0, json: 0 }
  for (let off = 0; off + 8 <= data.length; off += 8 + data.readUInt32LE(off))
    kinds[isArrowBatch(data.subarray(off + 8, off + 12)) ? 'arrow' : 'json']++
  t.same(kinds, { arrow: 6, json: 6 }, 'six records of each kind in the log')
  s = await startServer({ dataDir, env })
  t.teardown(() => s.stop())
  t.same(await read(), live, 'the same calls, field by field, after the replay')
})
