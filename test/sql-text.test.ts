import t from 'tap'
import path from 'node:path'
import { ROOT } from './helpers/server.js'
import { codeOf, rootOf, scanFile, sourceFiles, type Interpolation } from './helpers/sql-scan.js'

/**
 * No SQL text from user strings. Every interpolation into SQL-looking text in src/ is either known constant
 * (placeholders from `params.add`, `$${n}`, numbers, UPPER_CASE constants, local literal consts, lines marked
 * `// sql: <reason>`), or one of the reviewed SQL-fragment names below: a name whose every value was read and
 * found to be SQL the code composes from constants, identifiers it chose and bind placeholders. A new
 * interpolation with another name fails this test: bind the value as a parameter, or review it and add it here
 * (or mark the line `// sql: <why it is constant>`).
 */

interface Reviewed {
  names: string[]
  why: string
}

const FRAGMENTS = 'SQL fragments composed by the same file’s helpers from constants and `params.add` placeholders'

const REVIEWED: Record<string, Reviewed> = {
  'src/calls/model.ts': { names: ['c'], why: 'column names of the fixed CALL_COLUMNS list' },
  'src/calls/read/expand.ts': { names: ['rel', 'values'], why: `${FRAGMENTS}; JSON paths are bound (params.add(jsonPath(...)))` },
  'src/calls/read/filter.ts': {
    names: ['column', 'l', 'rangeOf'],
    why: 'column: a literal passed by each caller; l: a placeholder; rangeOf: placeholders',
  },
  'src/calls/read/facts.ts': {
    names: [
      'conds',
      'merged',
      'ids',
      'i',
      'p',
      'ts',
      'touchedWhere',
      'where',
      'columns',
      'cols',
      'parts',
      'several',
      'now',
      'fold',
      'cond',
      'bound',
    ],
    why: `${FRAGMENTS}; conds: conditions on placeholders, and seq bounds (an integer or the caller's own scalar subquery of its mark); ts: a timestamp from a number; touchedWhere: conditions of the former kinds; bound: a seq bound (an integer, or the caller's scalar subquery of its mark); columns, cols: CallColumn names (a closed union) and latest() over them; ids, parts, several, now: CTE names from the caller's constant prefix; fold: mergedSince's own aggregate over those, cond its condition (a seq bound or true)`,
  },
  'src/calls/read/merged.ts': {
    names: [
      'c',
      'columns',
      'fresh',
      'lists',
      'merged',
      'n',
      'only',
      'p',
      'parts',
      'settled',
      'settledSplit',
      'settledWhere',
      'mergedWhere',
      'where',
    ],
    why: `${FRAGMENTS}; column names from the fixed column lists; only: a constant clause on a placeholder; parts / settledWhere / mergedWhere: conditions composed of the former`,
  },
  'src/calls/read/windows.ts': {
    names: ['missing'],
    why: 'segment file paths the store makes from the manifest (checked names), each quoted by sqlPath (storage/parquet.ts)',
  },
  'src/calls/read/order.ts': {
    names: ['keys', 'l', 'matching', 'order', 'p', 'select', 'match', 'nthNewestSql'],
    why: `${FRAGMENTS}; sort fields resolve to known columns or bound JSON paths; match: an IN list of placeholders or list_contains of one, and their range; nthNewestSql: page-index.ts's, over the view names tail_parts / all_parts and placeholders`,
  },
  'src/calls/read/page-index.ts': {
    names: [
      'p',
      'cols',
      'window',
      'INDEX_FOLDED',
      'where',
      'BLOCK_COLUMNS',
      'out',
      'page',
      'compacted',
      'newerOnly',
      'merged',
      'c',
      'skip',
      'newerStartSql',
      'nthNewestSql',
      'rows',
      'from',
    ],
    why: `${FRAGMENTS}; cols / INDEX_FOLDED / BLOCK_COLUMNS / out: the fixed index column lists; window: a bound timestamp; skip: a bound list of file names; page: a constant ORDER BY and a placeholder; compacted / newerOnly: constants; merged / c: composed of the former; newerStartSql / nthNewestSql: a constant subquery over placeholders (p, rows) and a view name its callers pass as a literal (from: newer_parts, tail_parts, all_parts)`,
  },
  'src/calls/page-rows.ts': { names: ['segmentSql'], why: 'a segment file path the store generates, quoted by sqlPath (page-blocks.ts)' },
  'src/calls/readers/statement.ts': {
    names: ['select', 'keyCols', 'matching', 'order'],
    why: `${FRAGMENTS}; sort keys as in read/order.ts (known columns or bound JSON paths)`,
  },
  'src/calls/readers/order-keys.ts': {
    names: ['keys'],
    why: 'sort keys resolve to known columns or bound JSON paths; direction from asc|desc',
  },
  'src/calls/readers/worker-read.ts': {
    names: ['partsOver', 'kept', 'over'],
    why: 'partsOver: storage/parquet.ts over segment file paths the store generates (checkName), quoted by sqlPath; kept: a constant condition; over: composed of those',
  },
  'src/calls/storage/page-blocks.ts': {
    names: ['rows'],
    why: 'blockRowsSql of a segment file path the store generates, quoted by sqlPath; the rest constants',
  },
  'src/calls/storage/open.ts': { names: ['f'], why: 'a segment file path the store generates, quoted by sqlPath (segmentFiles)' },
  'src/calls/storage/page-index.ts': {
    names: ['INDEX_COLUMNS', 'sqlPath', 'pageIndexLayout.rowGroup', 'index', 'groups', 'flushed', 'files', 'indexedFiles'],
    why: 'index and segment file paths the store generates, quoted by sqlPath; the fixed index column list; a numeric row-group size',
  },
  'src/calls/read/statements.ts': { names: ['l', 'limit', 'matching', 'merged', 'p', 'roots'], why: FRAGMENTS },
  'src/calls/storage/compact.ts': {
    names: ['FOLDED', 'files', 'range', 'sqlPath', 'foldStatement', 'c', 'SINGLE_OUT', 'FOLD_OUT'],
    why: 'segment file paths: names the store generates (checkName), under the data dir; range: placeholders; c, SINGLE_OUT, FOLD_OUT: the fixed column lists; foldStatement: composed of those',
  },
  'src/calls/storage/flush.ts': {
    names: ['gens', 'sqlPath'],
    why: 'WAL generation numbers and a generated segment path (quoted by sqlPath)',
  },
  'src/calls/storage/parquet.ts': {
    names: ['sqlPath', 'files', 'over', 'rest'],
    why: 'segment file paths the store generates (checkName), quoted by sqlPath; over/rest: those files and constant text',
  },
  'src/catalog/feedback.ts': {
    names: ['cols', 'select', 'types', 'where', 'order'],
    why: 'feedback columns from a fixed set (payload / runnable_ref / trigger_ref); payload paths and types are bound',
  },
  'src/catalog/objects.ts': {
    names: ['keys', 'marks', 'page', 'select', 'value', 'where'],
    why: 'fixed column expressions and `$n` placeholder lists; sort keys from an allowlist of columns; page: the query built of those; value: one of two constants',
  },
  'src/catalog/table-chunks.ts': {
    names: ['splitList', 'strList', 'unique'],
    why: 'strList/splitList: from_json($n) placeholders; unique: an IN list of $n placeholders',
  },
  'src/catalog/table-read-cache.ts': {
    names: ['strList'],
    why: "strList: table-chunks.ts's from_json($n) placeholder",
  },
  'src/catalog/table-row-index.ts': {
    names: ['KEY_SQL', 'unique'],
    why: "KEY_SQL: the file's hash expression over a column name it names itself ('x', 'digest'); unique: an IN list of $n placeholders",
  },
  'src/catalog/table-order.ts': {
    names: ['orderBy', 'keys', 'cols', 'fields', 'from'],
    why: 'row paths are bound as JSON paths ($n); direction from asc|desc; cols / from: constant fragments of the callers in tables.ts and table-order.ts',
  },
  'src/catalog/tables.ts': {
    names: ['orderBy', 'strList', 'from'],
    why: 'as table-order.ts and table-chunks.ts; from: the ENTRIES constant joined on placeholders',
  },
  'src/clickhouse/calls-sql.ts': {
    names: [
      'by',
      'chMatching',
      'chOrderBy',
      'cond',
      'inner',
      'fields',
      'keys',
      'limit',
      'matching',
      'mergedSql',
      'p',
      'rowCond',
      't',
      'table',
      'where',
      'values',
      'v',
    ],
    why: `${FRAGMENTS} (ClickHouse query parameters); v: a params.add placeholder`,
  },
  'src/clickhouse/costs.ts': {
    names: ['localTable', 'onCluster', 'table'],
    why: 'the configured database, table and cluster names, each checked as a plain identifier and quoted (executor.ts ident)',
  },
  'src/clickhouse/stats-sql.ts': {
    names: [
      'bin',
      'bucketed',
      'calls',
      'callsInRange',
      'chLatestUsageSql',
      'cols',
      'costCols',
      'fields',
      'inIds',
      'p',
      'price',
      'rows',
      'spans',
      'starts',
      'table',
      'tokens',
      'tuple',
      'zip',
      'conds',
      'inRange.sql',
    ],
    why: `${FRAGMENTS}; column names from USAGE_FIELDS and the fixed token/cost metric lists; tables through ident()`,
  },
  'src/clickhouse/stats-storage.ts': {
    names: ['bytes', 'chMatching', 'limit', 'roots'],
    why: `${FRAGMENTS} (calls-sql.ts chMatching); fixed column names`,
  },
  'src/clickhouse/usage.ts': {
    names: ['USAGE_FIELDS', 'chMatching', 'k', 'usage'],
    why: `${FRAGMENTS} (calls-sql.ts chMatching, stats-sql.ts chLatestUsageSql); USAGE_FIELDS: the fixed usage column list`,
  },
  'src/clickhouse/stats-rollup-sql.ts': {
    names: [
      'k',
      'keys',
      'table',
      'p',
      'suspects',
      'inHours',
      'merged',
      'buckets',
      'hours',
      'contributionsSql',
      'counted',
      'dims',
      'where',
      'backfill',
      'marks',
      'old',
      'suspect',
      'cols',
      'zeros',
      's.inHours',
      's.bucketOf',
    ],
    why: 'table(): checked identifiers; p, hours, buckets, suspects (a bound id list, or suspectsSql): p.add placeholders; dims: rollupDims over bound arrays; k, keys: the tier’s fixed key column names (stats-tiers.ts); the rest composed of those',
  },
  'src/clickhouse/stats-schema.ts': {
    names: ['keys', 'from', 'since', 'meta', 'onCluster', 'metaLocal', 'table', 'localTable', 'hourlySelect', 'marksSelect'],
    why: 'DDL of checked identifiers (table(), localTable(), the layout’s cluster name) and constant column lists; no request value',
  },
  'src/clickhouse/stats-done-schema.ts': {
    names: [
      'from',
      'keys',
      'where',
      'localTable',
      'table',
      'onCluster',
      'parts',
      'usage',
      'other',
      'used',
      'since',
      'st',
      'HOUR_OF',
      'binOf',
      'aggs',
      'meta',
      'metaLocal',
      'select',
    ],
    why: 'DDL and view SELECTs of checked identifiers (table(), localTable(), the layout’s cluster name), fixed column lists (USAGE_FIELDS, the token metrics) and ln γ as a number; no request value',
  },
  'src/clickhouse/stats-user-schema.ts': {
    names: [
      'g',
      'localTable',
      'meta',
      'metaLocal',
      'onCluster',
      'select',
      'since',
      'table',
      'hourlySelect',
      'doneHourlySelect',
      'usageHourlySelect',
      'oldEmissions',
      'doneSelect',
    ],
    why: 'DDL, view SELECTs and backfills of checked identifiers (table(), localTable(), the layout’s cluster name), GLOBAL or nothing, and the shared select builders of stats-schema.ts / stats-done-schema.ts with constant key lists; no request value',
  },
  'src/clickhouse/stats-done-sql.ts': {
    names: [
      'done',
      'emissions',
      'keyList',
      'keys',
      'tierKeys',
      'binOf',
      'table',
      's.p',
      'ids',
      'cols',
      'rows',
      'where',
      'groupBy',
      'inHours',
      'mergedSuspects',
      'metricCols',
      'fromRow',
      'merged',
      'chLatestUsageSql',
      's.inHours',
      's.bucketOf',
    ],
    why: `${FRAGMENTS}; s.p, s.hours, s.buckets: p.add placeholders; ids: stats-rollup-sql.ts suspectsIn (a bound list or suspectsSql); dims: rollupDims over bound arrays; keys, tierKeys, keyList: the tier’s fixed key column names (stats-tiers.ts); done: table(); emissions: composed of those; metric columns from the fixed token metric list`,
  },
  'src/clickhouse/stats-cost-sql.ts': {
    names: ['cols', 'rows', 'spansSql'],
    why: `${FRAGMENTS}; cols: fixed cost and token column names; spansSql: the price spans as bound arrays (stats-sql.ts)`,
  },
  'src/clickhouse/stats-reads.ts': {
    names: ['suspectsSql'],
    why: 'stats-rollup-sql.ts suspectsSql over a p.add placeholder and checked table names',
  },
  'src/clickhouse/objects-sql.ts': {
    names: ['table', 'where', 'inner', 'keys'],
    why: `${FRAGMENTS}; table(): checked identifiers; sort keys from the fixed SORT_COLUMNS`,
  },
  'src/clickhouse/objects.ts': { names: ['versionsSql', 'table', 't', 'at'], why: 'table(): checked identifiers; at: a p.add placeholder' },
  'src/clickhouse/tables-sql.ts': {
    names: ['what', 'table', 'rowListSql', 'keys', 'list', 'filter', 'orderBy'],
    why: `${FRAGMENTS}; what: column expressions the callers write; JSON path segments bound`,
  },
  'src/clickhouse/tables.ts': { names: ['table'], why: 'table(): checked identifiers' },
  'src/clickhouse/files.ts': { names: ['table'], why: 'table(): checked identifiers' },
  'src/clickhouse/feedback-sql.ts': {
    names: ['table', 'cond', 'select', 'from', 'order'],
    why: `${FRAGMENTS}; fields from CH_FEEDBACK_COLUMNS or bound payload paths; $expr through ChCompiler (bound values)`,
  },
  'src/clickhouse/feedback.ts': {
    names: ['liveFeedbackSql', 'cols', 'where'],
    why: `${FRAGMENTS}; cols: the fixed feedback columns or chJsonField over bound path segments`,
  },
  'src/clickhouse/migrations.ts': {
    names: ['engine', 'ident', 'onCluster', 'table'],
    why: 'DDL: names from configuration, quoted by ident()',
  },
  'src/clickhouse/schema.ts': {
    names: [
      'engine',
      'fields',
      'ident',
      'localTable',
      'onCluster',
      't.columns',
      't.orderBy',
      't.settings',
      't.shardBy',
      'table',
      'usage',
      'from',
      'rows',
    ],
    why: "DDL from the fixed table definitions; configured names quoted by ident(); from / rows: call_traces' SELECT over such a table name",
  },
  'src/query/expand-fields.ts': { names: ['list', 'refSql', 'ref'], why: 'from_json over placeholders' },
  'src/query/feedback-fields.ts': { names: ['list'], why: 'from_json over placeholders' },
  'src/stats/dims.ts': { names: ['col'], why: "'user_id' | 'run_id'" },
  'src/stats/rollups-clean.ts': {
    names: ['a.name', 'a.table', 'aggs', 'c', 'hourOf', 'inHours', 'k', 'keys', 'negative', 'sets', 't'],
    why: 'rollup table and column names from the fixed tier definitions; no request value reaches these statements',
  },
  'src/stats/rollups-shape.ts': {
    names: ['cols', 'cond', 'dims', 'rows', 'where'],
    why: `${FRAGMENTS}; dims: the call tier's fixed dimension columns; rows: SQL the stats statements built; tokens: token metric names from TOKEN_METRICS; cols / cond / where: this file's own select list and condition`,
  },
  'src/stats/rollup-tables.ts': {
    names: ['TOKEN_NAMES', 'USAGE_FIELDS', 'binSql', 'cols', 'dims', 'extreme', 'group', 'live', 'mc', 'next', 's', 'sign', 'tableName'],
    why: `${FRAGMENTS}; the rollup tables' DDL and rows from the fixed tier definitions; mc: a merged-calls relation the store built`,
  },
  'src/stats/fresh-span.ts': {
    names: ['table', 'f.withs'],
    why: "table: the two temporary table names of the loop (constants), and the store's CallRelations naming its CTEs; f.withs: the store's mergedSince items over placeholders",
  },
  'src/stats/rollups.ts': {
    names: [
      'TABLES',
      'TOKEN_NAMES',
      'cond',
      'contribution',
      'dims',
      'file',
      'group',

      'this.store.merged',
      'next',
      'rows',
      'select',
      'since',
      'sums',
      't',
      'time',
      'tableName',
      'to',
      'touched',
      'usageRows',
      'x',
    ],
    why: `${FRAGMENTS}; project is a placeholder ($n) passed by stats/sql.ts; x/to are sequence numbers; since: a time bound made from a number of ms; the rollup file path is quoted`,
  },
  'src/stats/sql.ts': {
    names: [
      'TOKEN_NAMES',
      'USAGE_METRICS',
      'aggs',
      'b',
      'binSql',
      'branches',
      'callsAggSql',
      'col',
      'cols',
      'conds',
      'ctes',
      'fresh',
      'from',
      'latencyAggSql',
      'p',
      'parts',
      'pcts',
      'rel',
      'rows',
      'sb',
      'shaped',
      'src',
      't',
      'tableName',
      'time',
      'where',
      'y',
      'withs',
      'rollups.freshOf',
      'agg.select',
      'head',
      'at',
    ],
    why: `${FRAGMENTS}; metric and aggregation names come from schema enums; withs: the store's mergedSince items (rollups.freshInputs) over placeholders; rollups.freshOf: the rollups' own fragment over two CTE names`,
  },
  'src/stats/usage.ts': {
    names: ['calls', 'fields', 'id', 'rangeOf', 'rel', 'this.rollups.usageCalls', 'wanted'],
    why: `${FRAGMENTS}; token field names from a fixed list`,
  },
}

/** Names that, whatever a file's review says, are request values and never SQL. */
const NEVER = /\b(ctx|req|body|request|headers|query)\.|\.(project_id|digest|object_id|op_name|display_name|weave_ref|payload)\b/

t.test('SQL text is built only from constants, placeholders and reviewed fragments', async (t) => {
  const all: Interpolation[] = sourceFiles(path.join(ROOT, 'src')).flatMap((f) => scanFile(f, ROOT))
  t.ok(all.length > 50, `${all.length} interpolations into SQL text found (the scanner sees them)`)
  const unreviewed = all.filter((h) => !REVIEWED[h.file]?.names.includes(rootOf(h.expr)))
  t.same(
    unreviewed.map((h) => `${h.file}:${h.line} \${${h.expr.slice(0, 100)}}`),
    [],
    'every interpolation is reviewed (bind it, or add it to REVIEWED with a reason, or mark it `// sql: <reason>`)',
  )
  const values = all.filter((h) => NEVER.test(codeOf(h.expr)))
  t.same(
    values.map((h) => `${h.file}:${h.line} \${${h.expr.slice(0, 100)}}`),
    [],
    'no request value is interpolated',
  )
  const used = new Set(all.map((h) => `${h.file} ${rootOf(h.expr)}`))
  const stale = Object.entries(REVIEWED).flatMap(([f, r]) => r.names.filter((n) => !used.has(`${f} ${n}`)).map((n) => `${f} ${n}`))
  if (stale.length) t.comment(`reviewed names no longer interpolated (may be removed): ${stale.join(', ')}`)
})

t.test('the scanner catches a value interpolated into SQL', async (t) => {
  const fs = await import('node:fs/promises')
  const os = await import('node:os')
  const dir = await fs.mkdtemp(path.join(os.tmpdir(), 'weft-sqlscan-'))
  const file = path.join(dir, 'bad.ts')
  await fs.writeFile(
    file,
    [
      "const LIMIT = 'LIMIT 10'",
      'export async function q(db: any, params: any, project: string, n: number) {',
      '  await db.all(`SELECT * FROM t WHERE project_id = ${params.add(project)} ${LIMIT}`)',
      '  await db.all(`SELECT * FROM t WHERE x = $${n}`)',
      "  await db.all(`SELECT * FROM t WHERE project_id = '${project}'`)",
      "  await db.all('SELECT * FROM t WHERE p = ' + project)",
      '  // sql: n is a number',
      '  await db.all(`SELECT * FROM t LIMIT ${n}`)',
      '}',
    ].join('\n'),
  )
  const found = scanFile(file, dir)
  await fs.rm(dir, { recursive: true, force: true })
  t.same(
    found.map((h) => [h.line, h.expr]),
    [
      [5, 'project'],
      [6, 'project'],
    ],
    'the two values are found; placeholders, constants and marked lines are not',
  )
})
