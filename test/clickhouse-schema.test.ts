// The ClickHouse backend's DDL (src/clickhouse/schema*.ts, migrations.ts): single node and, since no
// cluster runs here, the text generated for a cluster — checked statement by statement, and parsed
// by ClickHouse itself (chdb's EXPLAIN AST) when chdb is installed.
import { rmSync } from 'node:fs'
import { createRequire } from 'node:module'
import path from 'node:path'
import t from 'tap'
import { chdbResolvable } from '../src/clickhouse/chdb-executor.js'
import { allStatements, MIGRATIONS } from '../src/clickhouse/migrations.js'
import { ROOT, tempDir, CHDB_FROM } from './helpers/server.js'

const TABLES = [
  'call_parts',
  'calls_merged',
  'call_usage',
  'object_versions',
  'tables',
  'table_rows',
  'files',
  'feedback',
  'llm_token_prices',
]

t.test('single node: plain engines, no cluster clauses', async (t) => {
  const ddl = allStatements({ database: 'weft' })
  t.notOk(ddl.some((s) => /ON CLUSTER|Replicated|Distributed/.test(s)))
  for (const name of TABLES)
    t.ok(
      ddl.some((s) => s.startsWith(`CREATE TABLE IF NOT EXISTS \`weft\`.\`${name}\` (`)),
      name,
    )
  t.ok(
    ddl.every((s) => /IF NOT EXISTS/.test(s)),
    'every statement is idempotent',
  )
  const merged = ddl.find((s) => s.includes('`calls_merged` ('))!
  t.match(merged, /ENGINE = AggregatingMergeTree\(\)/)
  t.match(merged, /op_name SimpleAggregateFunction\(max, Tuple\(UInt64, Nullable\(String\)\)\)/)
  t.match(merged, /input_refs SimpleAggregateFunction\(groupUniqArrayArray, Array\(String\)\)/)
  t.match(
    ddl.find((s) => s.includes('`call_usage` ('))!,
    /total_tokens Nullable\(Int64\)/,
    'typed usage columns',
  )
  t.same(
    MIGRATIONS.map((m) => m.version),
    MIGRATIONS.map((_, i) => i + 1),
    'versions run 1, 2, … with no gap',
  )
  t.throws(() => allStatements({ database: 'weft; DROP DATABASE x' }), { status: 400 }, 'a database name is an identifier, nothing else')
})

t.test('cluster: ON CLUSTER, Replicated local tables, Distributed tables sharded by call', async (t) => {
  const l = { database: 'weft', cluster: 'two_shards' }
  const ddl = allStatements(l)
  t.ok(
    ddl.every((s) => s.includes(' ON CLUSTER `two_shards`')),
    'every statement runs on the whole cluster',
  )
  for (const name of TABLES) {
    const local = ddl.find((s) => s.startsWith(`CREATE TABLE IF NOT EXISTS \`weft\`.\`${name}_local\``))
    t.match(
      local,
      /ENGINE = Replicated\w*MergeTree\('\/clickhouse\/tables\/\{shard\}\/\{database\}\/\{table\}', '\{replica\}'/,
      `${name}_local is replicated`,
    )
    const dist = ddl.find((s) => s.startsWith(`CREATE TABLE IF NOT EXISTS \`weft\`.\`${name}\` ON CLUSTER`))
    t.match(
      dist,
      new RegExp(`AS \`weft\`\\.\`${name}_local\`\\nENGINE = Distributed\\(\`two_shards\`, \`weft\`, \`${name}_local\`, cityHash64\\(`),
      `${name} is distributed`,
    )
  }
  t.match(
    ddl.find((s) => s.includes('`call_parts` ON CLUSTER'))!,
    /cityHash64\(project_id, id\)\)$/,
    "a call's parts all go to one shard",
  )
  t.match(
    ddl.find((s) => s.includes('`object_versions_local`'))!,
    /ReplicatedReplacingMergeTree\('[^']+', '\{replica\}', updated_at\)/,
  )
  const mv = ddl.find((s) => s.includes('`calls_merged_mv`'))!
  t.match(mv, /TO `weft`\.`calls_merged_local`/, 'views write shard-local…')
  t.match(mv, /FROM `weft`\.`call_parts_local`/, '…from the shard-local parts')
  t.match(
    ddl.find((s) => s.includes('`weft_migrations`'))!,
    /ReplicatedMergeTree\('\/clickhouse\/tables\/all\//,
    'one migrations log for every shard',
  )
  t.throws(() => allStatements({ database: 'weft', cluster: "c' x" }), { status: 400 })
})

t.test('ClickHouse parses every generated statement', { skip: !chdbResolvable(CHDB_FROM) && 'chdb not installed' }, async (t) => {
  const chdb = createRequire(CHDB_FROM.find((f) => chdbResolvable([f]))!)('chdb') as {
    Session: new (dir: string) => { query(sql: string, f?: string): string; close(): void }
  }
  const dir = tempDir('weft-chdb-ddl-')
  const s = new chdb.Session(dir)
  t.teardown(() => {
    s.close()
    rmSync(dir, { recursive: true, force: true })
  })
  for (const l of [{ database: 'weft' }, { database: 'weft', cluster: 'two_shards' }]) {
    let parsed = 0
    for (const stmt of allStatements(l)) {
      s.query('EXPLAIN AST ' + stmt, 'TSV')
      parsed++
    }
    t.equal(parsed, allStatements(l).length, `${parsed} statements parse (${l.cluster ?? 'single node'})`)
  }
  t.throws(() => s.query('EXPLAIN AST CREATE TABLE x (a) ENGINE =', 'TSV'), 'and a broken one would not')
})
