/**
 * The two weft servers of the both-backends bench: one embedded, one `--storage chdb`, started from dist
 * on free ports. Memory is the RSS of the server's whole process tree, because chdb runs in a child
 * process of the server (src/clickhouse/chdb-child.ts): the server's own `process.memoryUsage()` misses it.
 */
import { readFileSync, readdirSync, statSync } from 'node:fs'
import path from 'node:path'
import { startWeft } from './util.js'

export type BackendKind = 'embedded' | 'chdb'

export interface BackendServer {
  kind: BackendKind
  url: string
  /** Where the server keeps what it stores: the data directory (and, for chdb, its own directory inside it). */
  dataDir: string
  /** RSS of the server and its descendants (chdb's process), in bytes. */
  rss(): number
  stop(): Promise<void>
}

/** A process's children, from /proc (every thread's list). */
function children(pid: number): number[] {
  try {
    return readdirSync(`/proc/${pid}/task`).flatMap((t) => {
      const s = readFileSync(`/proc/${pid}/task/${t}/children`, 'utf8').trim()
      return s ? s.split(' ').map(Number) : []
    })
  } catch {
    return []
  }
}

function rssOf(pid: number): number {
  try {
    const m = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))
    return m ? Number(m[1]) * 1024 : 0
  } catch {
    return 0
  }
}

/** RSS of a process tree. */
export function treeRss(pid: number): number {
  return rssOf(pid) + children(pid).reduce((a, c) => a + treeRss(c), 0)
}

/** Bytes of the files under a directory (what `du --apparent-size` counts). */
export function diskBytes(dir: string): number {
  let total = 0
  // ClickHouse's merges create and remove temporary directories while this walks: one gone by now counts 0.
  const gone = (e: unknown) => (e as NodeJS.ErrnoException).code === 'ENOENT'
  let entries
  try {
    entries = readdirSync(dir, { withFileTypes: true })
  } catch (e) {
    if (gone(e)) return 0
    throw e
  }
  for (const e of entries) {
    const p = path.join(dir, e.name)
    try {
      if (e.isDirectory()) total += diskBytes(p)
      else if (e.isFile()) total += statSync(p).size
    } catch (err) {
      if (!gone(err)) throw err
    }
  }
  return total
}

/** Starts `weft serve` on one backend and waits until it answers. */
export async function startBackend(root: string, kind: BackendKind, dataDir: string, key: string): Promise<BackendServer> {
  const server = await startWeft({
    root,
    dataDir,
    key,
    args: kind === 'chdb' ? ['--storage', 'chdb', '--chdb-path', path.join(dataDir, 'chdb')] : [],
    env: {
      WEFT_STORAGE: kind,
      WEFT_ACCESS_LOG: 'false',
      WEFT_MODEL: 'none',
      // A deep page on a loaded machine can take seconds: no 504s in the bench.
      WEFT_QUERY_TIMEOUT_MS: '600000',
    },
  })
  return { kind, url: server.url, dataDir, rss: () => treeRss(server.pid), stop: () => server.stop() }
}
