import t from 'tap'
import { DuckDBInstance } from '@duckdb/node-api'
import { tableFromIPC, type Vector } from 'apache-arrow'
import { arrowPlan, chunkToBatch } from '../src/calls/arrow/convert.js'
import { ipcStream } from '../src/calls/arrow/ipc.js'

/**
 * Arrow batches read from DuckDB's vectors in bulk (src/calls/arrow/raw-columns.ts) against the values DuckDB itself
 * hands out for the same rows (`getRows`, decoded by @duckdb/node-api value by value): strings inline (≤ 12 bytes) and
 * stored apart, empty and non-ASCII, nulls at every position of a byte, whole-null and null-free columns, chunks whose
 * row count is not a multiple of 8 or 64, and 64-bit numbers and timestamps at their extremes.
 */

const SQL = `SELECT
    CASE WHEN i % 7 = 3 THEN NULL WHEN i % 5 = 0 THEN '' ELSE repeat(chr((97 + i % 26)::INTEGER), (i % 40)::INTEGER) || CASE WHEN i % 3 = 0 THEN 'é€😀' ELSE '' END END AS s,
    CASE WHEN i % 11 = 4 THEN NULL ELSE (i::HUGEINT * 9007199254740993 % 9223372036854775807) * (CASE WHEN i % 2 = 0 THEN -1 ELSE 1 END) END::BIGINT AS n,
    CASE WHEN i % 13 = 1 THEN NULL ELSE i / 3.0 END::DOUBLE AS d,
    CASE WHEN i % 9 = 2 THEN NULL ELSE make_timestamp(1700000000000000 + i * 1234567) END AS ts,
    NULL::VARCHAR AS all_null,
    'x' || i AS no_null,
    i::INTEGER AS small
  FROM range($rows) r(i)`

async function rowsAndBatches(rows: number) {
  const db = await DuckDBInstance.create(':memory:')
  const c = await db.connect()
  const sql = SQL.replace('$rows', String(rows))
  const expected = (await c.runAndReadAll(sql)).getRows()
  const result = await c.stream(sql)
  const plan = arrowPlan(result.columnNames(), result.columnTypes())
  const batches = []
  for (let chunk = await result.fetchChunk(); chunk && chunk.rowCount > 0; chunk = await result.fetchChunk())
    batches.push(chunkToBatch(plan, chunk))
  c.closeSync()
  return { expected, plan, batches }
}

const valuesOf = (v: Vector) => Array.from({ length: v.length }, (_, i) => v.get(i) as unknown)

for (const rows of [1, 7, 8, 63, 64, 65, 2047, 2048, 5000]) {
  t.test(`${rows} rows`, async (t) => {
    const { expected, plan, batches } = await rowsAndBatches(rows)
    // Through IPC and back, as an answer reaches a client.
    const parts: Buffer[] = []
    for await (const b of ipcStream(
      plan.schema,
      (async function* () {
        yield* batches
      })(),
    ))
      parts.push(b)
    const table = tableFromIPC(Buffer.concat(parts))
    t.equal(table.numRows, rows)
    const got = table.schema.fields.map((f) => valuesOf(table.getChild(f.name)!))
    let bad = 0
    for (let r = 0; r < rows; r++) {
      const [s, n, d, ts, allNull, noNull, small] = expected[r]!
      const want = [
        s,
        n,
        d,
        ts === null ? null : (ts as { micros: bigint }).micros / 1000n,
        allNull,
        noNull,
        small === null ? null : BigInt(small as number),
      ]
      for (let col = 0; col < want.length; col++) {
        let g = got[col]![r]
        // apache-arrow gives a timestamp as milliseconds (a number): compare whole milliseconds.
        if (col === 3 && g !== null) g = BigInt(Math.floor(g as number))
        if (g !== want[col] && !(typeof g === 'number' && typeof want[col] === 'number' && Object.is(g, want[col]))) {
          if (bad++ < 5) t.fail(`row ${r} column ${table.schema.fields[col]!.name}: ${String(g)} vs ${String(want[col])}`)
        }
      }
    }
    t.equal(bad, 0, 'every value equal')
    // A null row's 8 bytes are zero, not whatever DuckDB's vector held there (no memory of other rows leaks out).
    for (const name of ['n', 'd', 'ts']) {
      let dirty = 0
      for (const data of table.getChild(name)!.data)
        for (let i = 0; i < data.length; i++) if (!data.getValid(i) && Number(data.values[i]) !== 0) dirty++
      t.equal(dirty, 0, `${name}: null slots zero`)
    }
    for (const [name, nulls] of [
      ['s', expected.filter((r) => r[0] === null).length],
      ['all_null', rows],
      ['no_null', 0],
    ] as const)
      t.equal(table.getChild(name)!.nullCount, nulls, `${name}: null count`)
  })
}
