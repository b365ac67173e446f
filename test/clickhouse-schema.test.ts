// The ClickHouse backend's DDL (src/clickhouse/schema*.ts, migrations.ts): single node and, since no
// cluster runs here, the text generated for a cluster — checked statement by statement, and parsed
// by ClickHouse itself (chdb's EXPLAIN AST) when chdb is installed.
import { rmSync } from 'node:fs'
import { createRequire } from 'node:module'
import path from 'node:path'
import t, { type Test } from 'tap'
import { chdbResolvable } from '../src/clickhouse/chdb-executor.js'
import { allStatements, bootstrap, MIGRATIONS } from '../src/clickhouse/migrations.js'
import type { CallFilter } from '../src/calls/model.js'
import { ChParams } from '../src/clickhouse/query/params.js'
import { chRollupCountsSql, chRollupTotalSql, rollupDims, suspectsSql, type Suspects } from '../src/clickhouse/stats-rollup-sql.js'
import { chRollupDoneSql, chRollupUsageSql } from '../src/clickhouse/stats-done-sql.js'
import { slotParams } from '../src/clickhouse/stats-slots.js'
import { ALPHA } from '../src/stats/sketch.js'
import { ROOT, tempDir, CHDB_FROM } from './helpers/server.js'

interface ChdbSession {
  query(sql: string, f?: string): string
  queryBind(sql: string, args: object, f?: string): string
  close(): void
}

/** A chdb session on a fresh directory (closed and removed at the test's end) with the migrations before `version` applied. */
function sessionBefore(t: Test, prefix: string, version: number) {
  const chdb = createRequire(CHDB_FROM.find((f) => chdbResolvable([f]))!)('chdb') as { Session: new (dir: string) => ChdbSession }
  const dir = tempDir(prefix)
  const s = new chdb.Session(dir)
  t.teardown(() => {
    s.close()
    rmSync(dir, { recursive: true, force: true })
  })
  const l = { database: 'weft' }
  const run = (stmts: string[]) => stmts.forEach((x) => s.query(x, 'TSV'))
  run([...bootstrap(l), ...MIGRATIONS.filter((m) => m.version < version).flatMap((m) => m.statements(l))])
  return { s, l, run }
}

const TABLES = [
  'call_parts',
  'calls_merged',
  'call_usage',
  'call_traces',
  'object_versions',
  'tables',
  'table_rows',
  'files',
  'feedback',
  'llm_token_prices',
  'stats_calls_hourly',
  'stats_calls_hourly_backfill',
  'stats_call_marks',
  'stats_call_marks_backfill',
  'stats_call_done',
  'stats_done_hourly',
  'stats_usage_hourly',
  'stats_done_backfill',
  'stats_calls_user_hourly',
  'stats_calls_user_backfill',
  'stats_done_user_hourly',
  'stats_done_user_backfill',
  'stats_usage_user_hourly',
  'stats_usage_user_backfill',
  'stats_done_keys',
]

t.test('single node: plain engines, no cluster clauses', async (t) => {
  const ddl = allStatements({ database: 'weft' })
  t.notOk(ddl.some((s) => /ON CLUSTER|Replicated|Distributed/.test(s)))
  for (const name of TABLES)
    t.ok(
      ddl.some((s) => s.startsWith(`CREATE TABLE IF NOT EXISTS \`weft\`.\`${name}\` (`)),
      name,
    )
  const inserts = ddl.filter((s) => s.startsWith('INSERT INTO'))
  t.ok(
    ddl.every((s) => /IF NOT EXISTS/.test(s) || inserts.includes(s) || s === 'DROP VIEW IF EXISTS `weft`.`stats_call_done_mv`'),
    'every statement is idempotent: IF NOT EXISTS… (or the one view migration 6 replaces, dropped IF EXISTS)',
  )
  t.same(
    inserts.map((s) => /^INSERT INTO `weft`\.`(\w+)`/.exec(s)![1]),
    [
      'stats_rollup_meta',
      'stats_calls_hourly_backfill',
      'stats_call_marks_backfill',
      'stats_done_meta',
      'stats_done_backfill',
      'stats_user_meta',
      'stats_calls_user_backfill',
      'stats_done_keys',
      'stats_done_user_backfill',
      'stats_usage_user_backfill',
      'call_traces',
    ],
    '…or an insert guarded by the table being empty, or into a table that replaces its rows',
  )
  t.match(inserts[0], /WHERE \(SELECT count\(\) FROM `weft`\.`stats_rollup_meta`\) = 0$/)
  for (const name of [
    'stats_calls_hourly_backfill',
    'stats_call_marks_backfill',
    'stats_done_backfill',
    'stats_calls_user_backfill',
    'stats_done_user_backfill',
    'stats_usage_user_backfill',
    'stats_done_keys',
    'call_traces',
  ])
    t.match(
      ddl.find((s) => s.includes(`\`${name}\` (`))!,
      /ENGINE = ReplacingMergeTree\(\)/,
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
  t.throws(
    () => allStatements({ database: 'weft; DROP DATABASE x' }),
    { status: 400, message: /./ },
    'a database name is an identifier, nothing else',
  )
})

t.test('cluster: ON CLUSTER, Replicated local tables, Distributed tables sharded by call', async (t) => {
  const l = { database: 'weft', cluster: 'two_shards' }
  const ddl = allStatements(l)
  t.ok(
    ddl.every((s) => s.includes(' ON CLUSTER `two_shards`') || s.startsWith('INSERT INTO')),
    'every DDL statement runs on the whole cluster (an insert reaches the shards through its Distributed or replicated table)',
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
  for (const [view, target] of [
    ['calls_merged_mv', 'calls_merged'],
    ['call_traces_mv', 'call_traces'],
    ['stats_calls_hourly_mv', 'stats_calls_hourly'],
    ['stats_call_marks_mv', 'stats_call_marks'],
    ['stats_done_marks_mv', 'stats_call_marks'],
    ['stats_call_done_mv', 'stats_call_done'],
    ['stats_call_done_keyed_mv', 'stats_call_done'],
    ['stats_calls_user_hourly_mv', 'stats_calls_user_hourly'],
  ]) {
    const mv = ddl.find((s) => s.includes(`\`${view}\``))!
    t.match(mv, new RegExp(`TO \`weft\`\\.\`${target}_local\``), `${view} writes shard-local…`)
    t.match(mv, /FROM `weft`\.`call_parts_local`/, '…from the shard-local parts')
  }
  t.match(
    ddl.find((s) => s.includes('`stats_rollup_meta` ON CLUSTER'))!,
    /ReplicatedMergeTree\('\/clickhouse\/tables\/all\//,
    'one rollup start time for every shard',
  )
  t.match(
    ddl.find((s) => s.includes('`weft_migrations`'))!,
    /ReplicatedMergeTree\('\/clickhouse\/tables\/all\//,
    'one migrations log for every shard',
  )
  t.throws(() => allStatements({ database: 'weft', cluster: "c' x" }), { status: 400, message: /./ })
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

t.test(
  'migration 4 backfills the rollups from parts written before it, once, however often it runs',
  { skip: !chdbResolvable(CHDB_FROM) && 'chdb not installed' },
  async (t) => {
    const { s, l, run } = sessionBefore(t, 'weft-chdb-rollup-', 4)
    const [m4] = MIGRATIONS.filter((m) => m.version === 4)
    const H1 = '2026-03-07 01:10:00'
    const H2 = '2026-03-07 02:20:00'
    const H3 = '2026-03-07 03:30:00'
    let seq = 0
    const part = (
      id: string,
      kind: string,
      started: string | null,
      op: string | null,
      parent: string | null,
      deleted: string | null = null,
    ) =>
      `('p', '${id}', ${++seq}, '${kind}', ${started ? `'${started}'` : 'NULL'}, ${op ? `'${op}'` : 'NULL'}, ${parent ? `'${parent}'` : 'NULL'}, ${deleted ? `'${deleted}'` : 'NULL'})`
    const insert = (rows: string[]) =>
      s.query(
        `INSERT INTO weft.call_parts (project_id, id, seq, kind, started_at, op_name, parent_id, deleted_at) VALUES ${rows.join(', ')}`,
      )
    // Before the migration: a and b in hour 1, c and d in hour 2; c started again in hour 3, d deleted.
    insert([
      part('a', 'start', H1, 'x', null),
      part('b', 'start', H1, 'y', 'a'),
      part('c', 'start', H2, 'x', null),
      part('d', 'start', H2, 'x', null),
    ])
    insert([part('c', 'start', H3, 'y', null), part('d', 'delete', null, null, null, H3)])
    // The views exist before `since` is recorded (its insert and the two backfills are the last three
    // statements): a part written in between is the backfill's, not the view's too.
    run(m4!.statements(l).slice(0, -3))
    insert([part('g', 'start', H2, 'x', null)])
    run(m4!.statements(l))
    // After: e in hour 1 and deleted, f in hour 3, b started again in hour 3 (its first start was before).
    insert([part('e', 'start', H1, 'x', null), part('f', 'start', H3, 'x', null), part('b', 'start', H3, 'y', 'a')])
    insert([part('e', 'delete', null, null, null, H3)])
    // A start that died before recording the migration runs it again; the rollups must not change.
    run(m4!.statements(l))
    run(m4!.statements(l))
    const rows = (sql: string) =>
      s
        .query(sql, 'TSV')
        .trim()
        .split('\n')
        .filter(Boolean)
        .map((r) => r.split('\t'))
    const perHour = `SELECT formatDateTime(fromUnixTimestamp64Milli(hour, 'UTC'), '%H'), op_name, is_root, sum(n) FROM (
        SELECT hour, op_name, is_root, toInt64(n) AS n FROM weft.stats_calls_hourly
        UNION ALL SELECT hour, op_name, is_root, toInt64(n) FROM weft.stats_calls_hourly_backfill FINAL)
      GROUP BY ALL ORDER BY ALL`
    t.same(
      rows(perHour),
      [
        ['01', 'x', 'true', '2'],
        ['01', 'y', 'false', '1'],
        ['02', 'x', 'true', '3'],
        ['03', 'x', 'true', '1'],
        ['03', 'y', 'false', '1'],
        ['03', 'y', 'true', '1'],
      ],
      'every start part counted once, by the view or the backfill',
    )
    const suspects = `SELECT id FROM (SELECT id, starts, deletes FROM weft.stats_call_marks
        UNION ALL SELECT id, starts, deletes FROM weft.stats_call_marks_backfill FINAL)
      GROUP BY id HAVING sum(starts) > 1 OR sum(deletes) > 0 ORDER BY id`
    t.same(rows(suspects).flat(), ['b', 'c', 'd', 'e'], 'the calls to correct: started twice (b across the migration, c) or deleted (d, e)')
    t.equal(rows(`SELECT count() FROM weft.stats_rollup_meta`)[0]![0], '1', 'one start time, however often the migration ran')

    // The reads correct for those calls: live and started are a (hour 1, x, root), b (hour 3, y, child),
    // c (hour 3, y, root), f (hour 3, x, root) and g (hour 2, x, root); d and e are deleted.
    const read = (sql: string, params: ChParams) =>
      s
        .queryBind(sql, params.values, 'JSONEachRow')
        .trim()
        .split('\n')
        .filter(Boolean)
        .map((r) => JSON.parse(r) as Record<string, string>)
    const total = (filter: CallFilter | null) => {
      const params = new ChParams()
      return Number(read(chRollupTotalSql(l, 'p', rollupDims(filter, params)!, params), params)[0]!.n)
    }
    t.same(
      [total(null), total({ op_names: ['x'] }), total({ trace_roots_only: true }), total({ op_names: ['y'], trace_roots_only: true })],
      [5, 3, 4, 1],
      'counts over all time, by op and root',
    )
    t.equal(rollupDims({ trace_ids: ['t'] }, new ChParams()), null, 'a filter on other fields is not the rollup’s')
    const hour = (x: string) => Date.parse(x.replace(' ', 'T') + 'Z') - (Date.parse(x.replace(' ', 'T') + 'Z') % 3_600_000)
    const params = new ChParams()
    const slots: [number, number][] = [H1, H2, H3].map((x) => [hour(x), hour(H1)])
    slots[2] = [hour(H3), hour(H3)]
    const buckets = read(chRollupCountsSql(l, 'p', slots, [], params), params).map((r) => [Number(r.bucket), Number(r.n)])
    t.same(
      buckets.sort((a, b) => a[0]! - b[0]!),
      [
        [hour(H1), 2],
        [hour(H3), 3],
      ],
      'per bucket: hours 1 and 2 in one bucket, hour 3 in another',
    )

    // Migration 5: latency, errors and usage from the emitted-call rollups, on the same database.
    const [m5] = MIGRATIONS.filter((m) => m.version === 5)
    const put = (rows: Record<string, unknown>[]) =>
      s.query(`INSERT INTO weft.call_parts FORMAT JSONEachRow ${rows.map((r) => JSON.stringify({ project_id: 'p', ...r })).join('\n')}`)
    const at = (x: string, ms: number) => new Date(Date.parse(x.replace(' ', 'T') + 'Z') + ms).toISOString().replace('T', ' ').slice(0, -1)
    // Before it: a's end (5 s), never counted by a view.
    put([{ id: 'a', seq: 1001, kind: 'end', ended_at: at(H1, 5000) }])
    run(m5!.statements(l))
    // After: f ends (7 s; its start came earlier); h's end has a lower seq than its start (a clock behind:
    // neither half sees the other as earlier, so nobody emits it); i is one part with an error and usage;
    // j one part, then deleted; k's end (4 s, usage) comes before its start.
    put([{ id: 'f', seq: 1002, kind: 'end', ended_at: at(H3, 7000) }])
    put([{ id: 'h', seq: 1020, kind: 'start', started_at: H2, op_name: 'x' }])
    put([{ id: 'h', seq: 1010, kind: 'end', ended_at: at(H2, 3000) }])
    const m = (u: Record<string, number>) => [{ model: 'm', ...u }]
    put([
      {
        id: 'i',
        seq: 1030,
        kind: 'start',
        started_at: H2,
        ended_at: at(H2, 2000),
        op_name: 'y',
        parent_id: 'a',
        exception: 'E',
        usage: m({ prompt_tokens: 4, completion_tokens: 6 }),
      },
      { id: 'j', seq: 1031, kind: 'start', started_at: H2, ended_at: at(H2, 1000), op_name: 'x' },
    ])
    put([{ id: 'j', seq: 1032, kind: 'delete', deleted_at: H3 }])
    put([{ id: 'k', seq: 1040, kind: 'end', ended_at: at(H3, 4000), usage: m({ input_tokens: 10, total_tokens: 12 }) }])
    put([{ id: 'k', seq: 1041, kind: 'start', started_at: H3, op_name: 'x' }])
    run(m5!.statements(l))
    t.same(
      rows(`SELECT id FROM weft.stats_call_done ORDER BY id`).flat(),
      ['f', 'i', 'j', 'k'],
      'emitted once each by the later half (or the one part holding both); h by neither; a before the views',
    )
    const sus = new ChParams()
    const corrected = read(`SELECT DISTINCT id FROM (${suspectsSql(l, sus.add('p', 'String'), true)}) ORDER BY id`, sus).map((r) => r.id)
    t.same(
      corrected,
      ['a', 'b', 'c', 'd', 'e', 'h', 'j'],
      'corrected: a (ended before the views), h (not emitted), j (deleted), and the counts’ own',
    )
    const done = new ChParams()
    const netted = new Map<number, { n: number; sum: number; err: number; bins: Map<number, number> }>()
    for (const r of read(chRollupDoneSql(l, slotParams('p', slots, [], done), done), done)) {
      const sign = Number(r.sub) === 1 ? -1 : 1
      const b = netted.get(Number(r.bucket)) ?? { n: 0, sum: 0, err: 0, bins: new Map<number, number>() }
      netted.set(Number(r.bucket), b)
      b.n += sign * Number(r.lat_n)
      b.sum += sign * Number(r.lat_sum)
      b.err += sign * Number(r.err)
      const [ks, ns] = r.bins as unknown as [number[], number[]]
      ks.forEach((k, i) => b.bins.set(Number(k), (b.bins.get(Number(k)) ?? 0) + sign * Number(ns[i])))
    }
    // The sketch's bins (stats/sketch.ts): 1 + ceil(ln latency / ln γ).
    const gamma = Math.log((1 + ALPHA) / (1 - ALPHA))
    const bins = (lats: number[]) => lats.map((x) => 1 + Math.ceil(Math.log(x) / gamma)).sort((x, y) => x - y)
    const flat = (m: Map<number, number>) => [...m].flatMap(([k, n]) => Array<number>(Math.max(0, n)).fill(k)).sort((x, y) => x - y)
    t.same(
      [...netted].map(([b, x]) => [b, x.n, x.sum, x.err, flat(x.bins)]).sort((x, y) => Number(x[0]) - Number(y[0])),
      [
        [hour(H1), 3, 10_000, 1, bins([5000, 3000, 2000])],
        [hour(H3), 2, 11_000, 0, bins([7000, 4000])],
      ],
      'latency and errors per bucket: a, h, i (error) in hours 1-2, f and k in hour 3; j taken back out',
    )
    const use = new ChParams()
    const tokens = read(chRollupUsageSql(l, slotParams('p', slots, [], use), use), use).map((r) => [
      Number(r.bucket),
      r.model,
      Number(r.n),
      Number(r.input_tokens_sum),
      Number(r.output_tokens_sum),
      Number(r.total_tokens_sum),
    ])
    t.same(
      tokens.sort((x, y) => Number(x[0]) - Number(y[0])),
      [
        [hour(H1), 'm', 1, 4, 6, 0],
        [hour(H3), 'm', 1, 10, 0, 12],
      ],
      'usage per bucket and model: i’s from its own part, k’s read from call_usage by its start',
    )
    // A request reads the calls to correct once and binds them as a list (stats-reads.ts readSuspects): the same rows
    // as each statement's own subquery, the counts' included (correcting a call whose rows are right changes nothing).
    const sorted = (rs: Record<string, unknown>[]) => rs.map((r) => JSON.stringify(r)).sort()
    const both = (make: (params: ChParams, suspects?: Suspects) => string) => {
      const [a, b] = [new ChParams(), new ChParams()]
      return [sorted(read(make(a), a)), sorted(read(make(b, { ids: corrected }), b))]
    }
    for (const [name, make] of [
      ['counts', (p: ChParams, x?: Suspects) => chRollupCountsSql(l, 'p', slots, [], p, x)],
      ['latency and errors', (p: ChParams, x?: Suspects) => chRollupDoneSql(l, slotParams('p', slots, [], p), p, x)],
      ['usage', (p: ChParams, x?: Suspects) => chRollupUsageSql(l, slotParams('p', slots, [], p), p, x)],
    ] as const) {
      const [query, list] = both(make)
      t.same(list, query, `${name}: the calls to correct as a bound list, as the subquery`)
    }

    // Migration 6: the user tier. Before it: u1 (ann, run r1) start then end, emitted by the old view;
    // u2 (bob) one part with usage; u3 (ann) started only.
    const [m6] = MIGRATIONS.filter((m) => m.version === 6)
    const who = (user: string, run: string | null = null) => ({ user_id: user, run_id: run })
    put([{ id: 'u1', seq: 2001, kind: 'start', started_at: H1, op_name: 'x', ...who('ann', 'r1') }])
    put([{ id: 'u1', seq: 2002, kind: 'end', ended_at: at(H1, 3000) }])
    // A call in one part (start and end), with input tokens.
    const whole = (id: string, seq: number, started: string, ms: number, op: string, user: string, tokens: number) => ({
      ...{ id, seq, kind: 'start', started_at: started, ended_at: at(started, ms), op_name: op },
      ...who(user),
      usage: m({ input_tokens: tokens }),
    })
    put([whole('u2', 2003, H2, 4000, 'y', 'bob', 5), { id: 'u3', seq: 2004, kind: 'start', started_at: H1, op_name: 'x', ...who('ann') }])
    // The views exist (and the keyed emitting view) before `since` is recorded: u5, written in between, is
    // counted by the backfill and emitted (keyed) by the new view.
    run(m6!.statements(l).slice(0, -5))
    put([whole('u5', 2005, H2, 6000, 'x', 'ann', 7)])
    run(m6!.statements(l))
    // After: u3 ends (2 s); u4 (bob, r1) in hour 3; u1 started again by bob under run r2 (the same hour, 1 s in).
    put([{ id: 'u3', seq: 2010, kind: 'end', ended_at: at(H1, 2000) }])
    put([{ id: 'u4', seq: 2011, kind: 'start', started_at: H3, ended_at: at(H3, 1000), op_name: 'x', ...who('bob', 'r1') }])
    put([{ id: 'u1', seq: 2012, kind: 'start', started_at: at(H1, 1000), op_name: 'y', ...who('bob', 'r2') }])
    run(m6!.statements(l))
    run(m6!.statements(l))
    t.equal(rows(`SELECT count() FROM weft.stats_user_meta`)[0]![0], '1', 'migration 6: one start time, however often it ran')
    t.same(
      rows(`SELECT id, user_id, ifNull(run_id, '-') FROM weft.stats_done_keys FINAL WHERE id LIKE 'u%' ORDER BY id`),
      [
        ['u1', 'ann', 'r1'],
        ['u2', 'bob', '-'],
      ],
      'the emissions before it keyed by their first start',
    )
    const dims = (filter: CallFilter, params: ChParams) => rollupDims(filter, params)!
    const userTotal = (filter: CallFilter) => {
      const params = new ChParams()
      return Number(read(chRollupTotalSql(l, 'p', dims(filter, params), params, undefined, 'user'), params)[0]!.n)
    }
    t.same(
      [
        userTotal({ svc_user_ids: ['ann'] }),
        userTotal({ wb_user_ids: ['bob'] }),
        userTotal({ svc_run_ids: ['r1'] }),
        userTotal({ svc_user_ids: ['bob'], wb_run_ids: ['r2'] }),
        userTotal({ svc_user_ids: ['ann', 'bob'], op_names: ['x'] }),
        userTotal({ svc_run_ids: [''] }),
      ],
      [2, 3, 1, 1, 3, 0],
      'counts by user and run: u1 moved to bob and r2 by its second start; a NULL run matches no listed value',
    )
    t.same(rollupDims({ svc_user_ids: [], wb_run_ids: [] }, new ChParams()), [], 'empty user and run lists filter nothing (as in the scan)')
    const perUser = (user: string) => {
      const params = new ChParams()
      const out: [number, number, number][] = []
      const sl = slotParams('p', slots, dims({ svc_user_ids: [user] }, params), params, 'user')
      const net = new Map<number, [number, number]>()
      for (const r of read(chRollupDoneSql(l, sl, params), params)) {
        const sign = Number(r.sub) === 1 ? -1 : 1
        const [n, sum] = net.get(Number(r.bucket)) ?? [0, 0]
        net.set(Number(r.bucket), [n + sign * Number(r.lat_n), sum + sign * Number(r.lat_sum)])
      }
      for (const [b, [n, sum]] of net) if (n !== 0 || sum !== 0) out.push([b, n, sum])
      return out.sort((x, y) => x[0] - y[0])
    }
    t.same(
      perUser('ann'),
      [[hour(H1), 2, 8000]],
      'ann: u3 (2 s, ended after) and u5 (6 s); u1 taken out under the key it was backfilled with',
    )
    t.same(
      perUser('bob'),
      [
        [hour(H1), 2, 6000],
        [hour(H3), 1, 1000],
      ],
      'bob: u1 (2 s from its second start), u2 (4 s) in hours 1-2, u4 in hour 3',
    )
    const tokensOf = (user: string) => {
      const params = new ChParams()
      const sl = slotParams('p', slots, dims({ svc_user_ids: [user] }, params), params, 'user')
      return read(chRollupUsageSql(l, sl, params), params).reduce(
        (a, r) => a + (Number(r.sub) === 1 ? -1 : 1) * Number(r.input_tokens_sum),
        0,
      )
    }
    t.same([tokensOf('ann'), tokensOf('bob')], [7, 5], 'usage by user: u5’s by the new view, u2’s by the backfill')
    const now = new ChParams()
    const correctNow = read(`SELECT DISTINCT id FROM (${suspectsSql(l, now.add('p', 'String'), true)}) ORDER BY id`, now).map((r) => r.id!)
    t.ok(correctNow.includes('u1'), 'u1 (started twice, emitted twice) is corrected')
    corrected.splice(0, corrected.length, ...correctNow)
    const userSlots = (p: ChParams) => slotParams('p', slots, dims({ svc_user_ids: ['ann', 'bob'] }, p), p, 'user')
    for (const [name, make] of [
      [
        'user counts',
        (p: ChParams, x?: Suspects) => chRollupCountsSql(l, 'p', slots, dims({ svc_user_ids: ['ann', 'bob'] }, p), p, x, 'user'),
      ],
      ['user latency and errors', (p: ChParams, x?: Suspects) => chRollupDoneSql(l, userSlots(p), p, x)],
      ['user usage', (p: ChParams, x?: Suspects) => chRollupUsageSql(l, userSlots(p), p, x)],
    ] as const) {
      const [query, list] = both(make)
      t.same(list, query, `${name}: the calls to correct as a bound list, as the subquery`)
    }
  },
)

t.test(
  'migration 7 indexes the traces of calls written before it, once, however often it runs; the view those after',
  { skip: !chdbResolvable(CHDB_FROM) && 'chdb not installed' },
  async (t) => {
    const { s, l, run } = sessionBefore(t, 'weft-chdb-traces-', 7)
    const [m7] = MIGRATIONS.filter((m) => m.version === 7)
    let seq = 0
    const part = (id: string, kind: string, trace: string | null) => `('p', '${id}', ${++seq}, '${kind}', ${trace ? `'${trace}'` : 'NULL'})`
    const insert = (rows: string[]) =>
      s.query(`INSERT INTO weft.call_parts (project_id, id, seq, kind, trace_id) VALUES ${rows.join(', ')}`)
    // Before: a and b in trace t1, c in t2 (its end part carries no trace), d with none.
    insert([part('a', 'start', 't1'), part('b', 'start', 't1'), part('c', 'start', 't2'), part('c', 'end', null), part('d', 'start', null)])
    run(m7!.statements(l))
    run(m7!.statements(l))
    // After: e in t1, through the view only.
    insert([part('e', 'start', 't1'), part('e', 'end', null)])
    const rows = s
      .query("SELECT trace_id, id FROM weft.call_traces FINAL WHERE project_id = 'p' ORDER BY trace_id, id", 'TSV')
      .trim()
      .split('\n')
    t.same(rows, ['t1\ta', 't1\tb', 't1\te', 't2\tc'], 'every call with a trace, once')
  },
)
