// The query language's one compiler in its two dialects (query/expr.ts with query/duckdb-dialect.ts and
// clickhouse/query/dialect.ts), and `--query-timeout-ms` on ClickHouse (clickhouse/settings.ts) through chdb.
import { rm } from 'node:fs/promises'
import path from 'node:path'
import t from 'tap'
import { ClickHouseError } from '@clickhouse/client'
import { startPart } from '../src/calls/ingest/parts.js'
import type { CallPart } from '../src/calls/model.js'
import { DomainError } from '../src/core/errors.js'
import { ClickHouseCalls } from '../src/clickhouse/calls.js'
import { ChdbExecutor, chdbResolvable } from '../src/clickhouse/chdb-executor.js'
import { chCompileQuery } from '../src/clickhouse/query/expr.js'
import { ChParams } from '../src/clickhouse/query/params.js'
import { isTimeout, mapTimeout, timeoutSettings } from '../src/clickhouse/settings.js'
import { compileQuery, Params } from '../src/query/expr.js'
import { mulberry32 } from './helpers/rng.js'
import { ROOT, tempDir, CHDB_FROM } from './helpers/server.js'

const FROM = CHDB_FROM
const available = chdbResolvable(FROM)

const rand = mulberry32(7)
const pick = <T>(xs: readonly T[]): T => xs[Math.floor(rand() * xs.length)]!

const HOSTILE = "x'); DROP TABLE calls; --"
const FIELDS = [
  'id',
  'op_name',
  'parent_id',
  'started_at',
  'wb_run_step',
  'summary.weave.status',
  'inputs.a',
  'inputs.a.0',
  'output',
  'bogus',
  'inputs..a',
]
const LITERALS = ['abc', '', '1.5', 42, -3.25, true, false, null, HOSTILE, [1], { a: 1 }]
const OPS = ['$and', '$or', '$not', '$eq', '$gt', '$lte', '$in', '$contains', '$size', '$convert', '$nope']

/** A random operand: well-formed or not, of every operator, nested a few levels. */
function operand(depth: number): unknown {
  if (depth > 3 || rand() < 0.3) return rand() < 0.5 ? { $getField: pick(FIELDS) } : { $literal: pick(LITERALS) }
  const op = pick(OPS)
  const sub = () => operand(depth + 1)
  const some = () => Array.from({ length: Math.floor(rand() * 3) }, sub)
  if (op === '$and' || op === '$or') return { [op]: some() }
  if (op === '$not') return { $not: rand() < 0.9 ? [sub()] : some() }
  if (op === '$in') return { $in: [sub(), some()] }
  if (op === '$contains') return { $contains: { input: sub(), substr: sub(), case_insensitive: rand() < 0.5 } }
  if (op === '$size') return { $size: sub() }
  if (op === '$convert') return { $convert: { input: sub(), to: pick(['double', 'int', 'string', 'bool', 'exists', 'float']) } }
  if (op === '$nope') return { $nope: [] }
  return { [op]: rand() < 0.9 ? [sub(), sub()] : [sub()] }
}

/** What a compiler made of a query: its refusal (status and message), or that it compiled. */
function outcome(compile: () => string): string {
  try {
    compile()
    return 'compiled'
  } catch (e) {
    if (!(e instanceof DomainError)) throw e
    return `${e.status} ${e.message}`
  }
}

t.test('one compiler: both dialects accept and refuse the same queries, with the same errors', async (t) => {
  let refused = 0
  const differ: string[] = []
  for (let i = 0; i < 2000; i++) {
    const query = { $expr: operand(0) }
    const duck = outcome(() => compileQuery(query, new Params()))
    const ch = outcome(() => chCompileQuery(query, new ChParams()))
    if (duck !== ch) differ.push(`${JSON.stringify(query)}: DuckDB ${duck}; ClickHouse ${ch}`)
    if (duck !== 'compiled') refused++
  }
  t.same(differ.slice(0, 5), [], 'the same outcome for every query')
  t.ok(refused > 200 && refused < 1800, `the corpus has both kinds (${refused} of 2000 refused)`)
  const deep = (n: number): unknown => (n === 0 ? { $literal: true } : { $not: [deep(n - 1)] })
  const nodes = { $and: Array.from({ length: 2001 }, () => ({ $literal: true })) }
  for (const [name, q] of [
    ['depth', deep(70)],
    ['nodes', nodes],
  ] as const) {
    const duck = outcome(() => compileQuery({ $expr: q }, new Params()))
    t.match(duck, /^400 Query (is nested deeper|has more than)/, `the ${name} bound is enforced`)
    t.equal(
      outcome(() => chCompileQuery({ $expr: q }, new ChParams())),
      duck,
      `…with the same error on ClickHouse (${name})`,
    )
  }
})

t.test('ClickHouse SQL carries values as typed parameters, never as text', async (t) => {
  const params = new ChParams()
  const sql = chCompileQuery(
    {
      $expr: {
        $and: [
          { $eq: [{ $getField: `inputs.${HOSTILE}` }, { $literal: HOSTILE }] },
          { $in: [{ $getField: 'op_name' }, [{ $literal: HOSTILE }, { $literal: 'b' }]] },
          { $gt: [{ $convert: { input: { $getField: 'inputs.n' }, to: 'double' } }, { $literal: 2.5 }] },
          { $contains: { input: { $getField: 'output' }, substr: { $literal: HOSTILE }, case_insensitive: true } },
        ],
      },
    },
    params,
  )
  t.notOk(sql.includes('DROP'), 'no user string in the SQL text')
  t.same(Object.values(params.values).filter((v) => v === HOSTILE).length, 4, 'each is a parameter (the JSON key too)')
  t.match(sql, /\{p\d+:String\}/, 'strings bound as String')
  t.match(sql, /\{p\d+:Float64\}/, 'numbers bound as Float64')
})

t.test('ClickHouse timeout errors map to the embedded store’s 504; others pass unchanged', async (t) => {
  t.same(timeoutSettings(undefined), {}, 'no limit without a configured timeout')
  t.same(timeoutSettings(2500), { max_execution_time: 2.5, timeout_overflow_mode: 'throw' }, 'seconds, fractions kept')
  const fromClient = new ClickHouseError({
    message: 'Timeout exceeded: elapsed 2.1 seconds, maximum: 2',
    code: '159',
    type: 'TIMEOUT_EXCEEDED',
  })
  t.ok(isTimeout(fromClient), '@clickhouse/client: code 159')
  const mapped = mapTimeout(fromClient, 2000) as DomainError
  t.equal(mapped.status, 504)
  t.equal(mapped.message, 'Query took longer than 2000 ms and was stopped; narrow the filter or page with limit', 'the embedded wording')
  const syntax = new ClickHouseError({ message: 'Syntax error', code: '62', type: 'SYNTAX_ERROR' })
  t.equal(mapTimeout(syntax, 2000), syntax, 'another error is left as it is')
  t.equal(mapTimeout(fromClient, undefined), fromClient, 'without a configured timeout nothing is mapped')
})

let shared: Promise<ChdbExecutor> | undefined
const chdbDir = tempDir('weft-ch-query-')
t.teardown(async () => {
  if (shared) await (await shared).close()
  await rm(chdbDir, { recursive: true, force: true })
})

t.test(
  '--query-timeout-ms on chdb: a query that cannot finish in time is stopped with 504',
  { skip: !available && 'chdb not installed' },
  async (t) => {
    const exec = await (shared = ChdbExecutor.open({ path: chdbDir, resolveFrom: FROM }))
    const slow = 'SELECT count() AS n FROM numbers(1000000000000)'
    const started = Date.now()
    const err = await exec.query(slow, {}, timeoutSettings(200)).catch((e: unknown) => e)
    t.ok(isTimeout(err), `chdb's message is recognised: ${String((err as Error).message).slice(0, 120)}`)
    t.ok(Date.now() - started < 20_000, 'stopped by ClickHouse, not run to the end')

    const P = 'acme/timeout'
    const parts: CallPart[] = Array.from({ length: 3000 }, (_, i) =>
      startPart(
        {
          project_id: P,
          id: i.toString(16).padStart(16, '0'),
          trace_id: (i % 50).toString(16).padStart(32, '0'),
          op_name: 'op',
          started_at: new Date(Date.UTC(2026, 0, 1) + i * 1000).toISOString(),
          attributes: {},
          inputs: { i, text: 'lorem ipsum '.repeat(50) + i },
        },
        'user',
      ),
    )
    const patient = await ClickHouseCalls.open(exec, { database: 'weft_timeout', queryTimeoutMs: 60_000 })
    await patient.ingest(parts)
    const heavy = {
      $expr: {
        $or: Array.from({ length: 30 }, (_, k) => ({
          $contains: { input: { $getField: 'inputs.text' }, substr: { $literal: `ipsum ${k}x` }, case_insensitive: true },
        })),
      },
    }
    t.equal(await patient.count(P, {}), 3000, 'with time enough, the calls are there')
    t.equal((await patient.query(P, { query: heavy })).length, 0, 'and the heavy query answers (nothing matches)')

    const hasty = await ClickHouseCalls.open(exec, { database: 'weft_timeout', queryTimeoutMs: 1 })
    const expect504 = async (what: string, run: () => Promise<unknown>) => {
      const e = await run().then(
        () => null,
        (x: unknown) => x,
      )
      t.ok(e instanceof DomainError && e.status === 504, `${what}: 504`)
      t.match((e as Error | null)?.message, /longer than 1 ms/, `${what}: the embedded store's message`)
    }
    await expect504('query', () => hasty.query(P, { query: heavy }))
    await expect504('count', () => hasty.count(P, { query: heavy }))
    await expect504('stream', async () => {
      for await (const rows of hasty.stream(P, { query: heavy })) void rows
    })
    t.equal(await patient.count(P, {}), 3000, 'ClickHouse goes on serving')
  },
)
