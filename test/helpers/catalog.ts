import path from 'node:path'
import { rm } from 'node:fs/promises'
import type { Test } from 'tap'
import { DuckDBInstance, type DuckDBConnection } from '@duckdb/node-api'
import { Catalog } from '../../src/catalog/db.js'
import { MIGRATIONS } from '../../src/catalog/migrations.js'
import { tempDir } from './server.js'

/** A fresh catalog in a directory of its own, closed and removed when the test ends (in-process tests). */
export async function openCatalog(t: Test): Promise<Catalog> {
  const dir = tempDir()
  const catalog = await Catalog.open(dir)
  t.teardown(async () => {
    await catalog.close()
    await rm(dir, { recursive: true, force: true })
  })
  return catalog
}

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
