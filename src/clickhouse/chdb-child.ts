/**
 * The process chdb runs in (see chdb-executor.ts). chdb's calls block their thread for as long as a
 * query runs, and ending a worker thread that loaded it crashes the process (chdb 3.4, SIGSEGV), so
 * it gets a process of its own: the server's event loop stays free and its exit stays clean.
 * argv: the data directory, then a JSON list of package.json paths to resolve `chdb` from.
 */
import { createRequire } from 'node:module'
import { settingsClause, type Row, type Settings } from './executor.js'

interface ChdbSession {
  queryBind(sql: string, args: object, format?: string): string
  insert(p: { table: string; values: Buffer; format: 'JSONEachRow'; settings?: Settings }): Promise<unknown>
  close(): void
}
type ChdbModule = { Session: new (dir: string, opts?: { connectionArgs?: string[] }) => ChdbSession }

export interface Request {
  id: number
  op: 'query' | 'insert' | 'close'
  sql?: string
  params?: Row
  settings?: Settings
  table?: string
  /** JSONEachRow text. */
  rows?: string
}
export interface Reply {
  id: number
  text?: string
  error?: string
}

function load(from: string[]): ChdbModule {
  let last: unknown
  for (const f of from) {
    try {
      return createRequire(f)('chdb') as ChdbModule
    } catch (e) {
      last = e
    }
  }
  throw last ?? new Error('chdb: nowhere to resolve it from')
}

function send(r: Reply): void {
  process.send!(r)
}

async function handle(session: ChdbSession, m: Request): Promise<void> {
  try {
    if (m.op === 'query')
      send({ id: m.id, text: session.queryBind(m.sql! + settingsClause(m.settings ?? {}), m.params ?? {}, 'JSONEachRow') })
    else if (m.op === 'insert') {
      await session.insert({ table: m.table!, values: Buffer.from(m.rows!), format: 'JSONEachRow', settings: m.settings })
      send({ id: m.id })
    } else {
      session.close()
      send({ id: m.id })
      process.disconnect()
    }
  } catch (e) {
    send({ id: m.id, error: e instanceof Error ? e.message : String(e) })
  }
}

function main(): void {
  const [dir, from, base] = process.argv.slice(2)
  let session: ChdbSession
  try {
    // Settings every statement needs (BASE_SETTINGS) are given at connect: chdb takes them as engine arguments.
    const args = Object.entries(JSON.parse(base!) as Settings).map(([k, v]) => `--${k}=${v}`)
    session = new (load(JSON.parse(from!) as string[]).Session)(dir!, { connectionArgs: args })
  } catch (e) {
    send({ id: 0, error: e instanceof Error ? e.message : String(e) })
    process.disconnect()
    return
  }
  send({ id: 0 })
  // One statement at a time, in arrival order: a chdb session is one connection.
  let chain = Promise.resolve()
  process.on('message', (m: Request) => {
    chain = chain.then(() => handle(session, m))
  })
}

main()
