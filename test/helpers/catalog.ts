import path from 'node:path'
import { DuckDBInstance, type DuckDBConnection } from '@duckdb/node-api'
import { MIGRATIONS } from '../../src/catalog/migrations.js'

/**
 * Opens `<dataDir>/catalog.duckdb` as an older weft left it: the migrations up to `version` applied and
 * recorded, none after, so a test can write old-layout rows and see a server migrate them.
 */
export async function catalogAt(dataDir: string, version: number): Promise<{ db: DuckDBInstance; conn: DuckDBConnection }> {
  const db = await DuckDBInstance.create(path.join(dataDir, 'catalog.duckdb'))
  const conn = await db.connect()
  await conn.run('CREATE TABLE schema_migrations (version INTEGER PRIMARY KEY, name VARCHAR NOT NULL, applied_at TIMESTAMP NOT NULL)')
  for (const m of MIGRATIONS.filter((m) => m.version <= version)) {
    for (const stmt of m.statements) await conn.run(stmt)
    await conn.run('INSERT INTO schema_migrations VALUES ($1, $2, now())', [m.version, m.name])
  }
  return { db, conn }
}
