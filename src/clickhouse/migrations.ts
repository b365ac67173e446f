import type { Executor } from './executor.js'
import { ident } from './executor.js'
import { onCluster, table, type Layout } from './layout.js'
import { CALL_PARTS, CALL_USAGE, CALLS_MERGED, callTracesStatements, callViews, createTable } from './schema.js'
import {
  addColumn,
  FEEDBACK,
  FILES,
  LLM_TOKEN_PRICES,
  OBJECT_FIRST_CREATED,
  OBJECT_VERSIONS,
  TABLE_ROWS,
  TABLES,
} from './schema-catalog.js'
import { statsDoneStatements } from './stats-done-schema.js'
import { statsRollupStatements } from './stats-schema.js'
import { statsUserStatements } from './stats-user-schema.js'

/**
 * Versioned schema changes, applied in order at start and recorded in `weft_migrations`. Every
 * statement is idempotent (IF NOT EXISTS …), so a start that died half way through a migration, or
 * two servers starting at once, simply run it again. A new change is a new entry at the end; an
 * applied entry is never edited.
 */
export interface Migration {
  version: number
  name: string
  statements: (l: Layout) => string[]
}

export const MIGRATIONS: Migration[] = [
  {
    version: 1,
    name: 'calls',
    statements: (l) => [...[CALL_PARTS, CALLS_MERGED, CALL_USAGE].flatMap((t) => createTable(l, t)), ...callViews(l)],
  },
  {
    version: 2,
    name: 'catalog',
    statements: (l) => [OBJECT_VERSIONS, TABLES, TABLE_ROWS, FILES, FEEDBACK, LLM_TOKEN_PRICES].flatMap((t) => createTable(l, t)),
  },
  {
    version: 3,
    name: 'object_first_created',
    statements: (l) => addColumn(l, OBJECT_VERSIONS, `${OBJECT_FIRST_CREATED} DEFAULT created_at`),
  },
  {
    version: 4,
    name: 'stats_rollups',
    statements: statsRollupStatements,
  },
  {
    version: 5,
    name: 'stats_done_rollups',
    statements: statsDoneStatements,
  },
  {
    version: 6,
    name: 'stats_user_rollups',
    statements: statsUserStatements,
  },
  {
    version: 7,
    name: 'call_traces',
    statements: callTracesStatements,
  },
]

/**
 * The bookkeeping statements: the database and the migrations table. On a cluster the migrations
 * table is replicated to every node and not sharded (one path for all shards), so whichever node a
 * server talks to knows what has been applied.
 */
export function bootstrap(l: Layout): string[] {
  const engine = l.cluster ? `ReplicatedMergeTree('/clickhouse/tables/all/{database}/{table}', '{replica}')` : 'MergeTree'
  return [
    `CREATE DATABASE IF NOT EXISTS ${ident(l.database)}${onCluster(l)}`,
    `CREATE TABLE IF NOT EXISTS ${table(l, 'weft_migrations')}${onCluster(l)} (
  version UInt32,
  name String,
  applied_at DateTime64(3, 'UTC') DEFAULT now64(3)
)
ENGINE = ${engine}
ORDER BY version`,
  ]
}

/** Every statement the schema takes, in order, for a layout (what `migrate` would run on an empty database). */
export function allStatements(l: Layout): string[] {
  return [...bootstrap(l), ...MIGRATIONS.flatMap((m) => m.statements(l))]
}

/** Applies the migrations not yet recorded; returns the versions applied now. */
export async function migrate(exec: Executor, l: Layout, migrations: Migration[] = MIGRATIONS): Promise<number[]> {
  for (const s of bootstrap(l)) await exec.command(s)
  const done = new Set((await exec.query(`SELECT DISTINCT version FROM ${table(l, 'weft_migrations')}`)).map((r) => Number(r.version)))
  const applied: number[] = []
  for (const m of [...migrations].sort((a, b) => a.version - b.version)) {
    if (done.has(m.version)) continue
    for (const s of m.statements(l)) await exec.command(s)
    await exec.command(`INSERT INTO ${table(l, 'weft_migrations')} (version, name) VALUES ({v:UInt32}, {n:String})`, {
      v: m.version,
      n: m.name,
    })
    applied.push(m.version)
  }
  return applied
}
