// Errors that are the operator's or the load's, not bugs, get their own status: a full disk 507, DuckDB past its
// memory budget 503 with Retry-After; anything else stays a bare 500. The out-of-memory error is DuckDB's own,
// provoked on a real instance with a small memory_limit (its message is what the mapping reads).
import t from 'tap'
import { DuckDBInstance } from '@duckdb/node-api'
import { DomainError, toDomainError } from '../src/core/errors.js'

t.test('DuckDB out of memory → 503 with Retry-After', async (t) => {
  const db = await DuckDBInstance.create(':memory:', { memory_limit: '32MB', threads: '1' })
  const c = await db.connect()
  t.teardown(() => c.closeSync())
  const e = await c.run("SELECT list(i::VARCHAR || 'xxxxxxxxxxxxxxxxxxxxxx') FROM range(10000000) t(i)").then(
    () => null,
    (x: unknown) => x,
  )
  t.ok(e instanceof Error, 'the query fails under a 32 MB limit')
  const d = toDomainError(e)
  t.equal(d.status, 503)
  t.match(d.message, /out of query memory/)
  t.equal(d.retryAfterS, 5)
})

t.test('a full disk → 507; anything else → 500; a DomainError passes through', async (t) => {
  t.equal(toDomainError(Object.assign(new Error('write failed'), { code: 'ENOSPC' })).status, 507)
  t.equal(toDomainError(new Error('IO Error: No space left on device')).status, 507)
  t.equal(toDomainError(new Error('something else')).status, 500)
  const own = new DomainError(418, 'teapot')
  t.equal(toDomainError(own), own)
})
