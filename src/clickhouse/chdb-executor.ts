import { fork, type ChildProcess } from 'node:child_process'
import { createRequire } from 'node:module'
import path from 'node:path'
import { fileURLToPath } from 'node:url'
import type { Reply, Request } from './chdb-child.js'
import { BASE_SETTINGS, type Executor, type Row, type Settings } from './executor.js'

export interface ChdbOptions {
  /** The directory chdb keeps its databases in. */
  path: string
  /** package.json paths to resolve `chdb` from, in order (default: the working directory's). */
  resolveFrom?: string[]
  /** Settings for every statement, on top of BASE_SETTINGS. */
  settings?: Settings
}

/** Rows per batch a stream yields. */
const BATCH = 2048

/** Whether chdb can be found from these places (without loading its ~550 MB library). */
export function chdbResolvable(resolveFrom: string[]): boolean {
  return resolveFrom.some((f) => {
    try {
      createRequire(f).resolve('chdb')
      return true
    } catch {
      return false
    }
  })
}

/** JSONEachRow text → rows. */
function parseRows(text: string): Row[] {
  const out: Row[] = []
  for (const line of text.split('\n')) if (line) out.push(JSON.parse(line) as Row)
  return out
}

/**
 * ClickHouse in-process — in a child process of its own (chdb-child.ts says why), which owns a chdb
 * `Session` on a directory. Statements go over IPC one at a time; parameters are bound by chdb
 * (`queryBind`), never spliced into SQL. A result comes back whole from the child; `stream` yields
 * it in batches, so a streamed query's memory is bounded by its result, not by a chunk (unlike HTTP).
 */
export class ChdbExecutor implements Executor {
  readonly kind = 'chdb' as const
  private next = 1
  private readonly pending = new Map<number, { resolve: (r: Reply) => void; reject: (e: Error) => void }>()
  private exitError: Error | null = null

  private constructor(
    private readonly child: ChildProcess,
    private readonly settings: Settings,
  ) {
    child.on('message', (r: Reply) => {
      const p = this.pending.get(r.id)
      if (!p) return
      this.pending.delete(r.id)
      if (r.error !== undefined) p.reject(new Error(`ClickHouse (chdb): ${r.error}`))
      else p.resolve(r)
    })
    child.on('exit', (code, signal) => {
      this.exitError = new Error(`chdb process exited (${signal ?? code})`)
      for (const p of this.pending.values()) p.reject(this.exitError)
      this.pending.clear()
    })
  }

  /** Starts the chdb process on `opts.path`; rejects if chdb cannot be loaded there. */
  static async open(opts: ChdbOptions): Promise<ChdbExecutor> {
    const here = fileURLToPath(import.meta.url)
    // The child is this folder's chdb-child (.ts under a TypeScript loader, whose flags fork passes on; .js built).
    const script = path.join(path.dirname(here), 'chdb-child' + path.extname(here))
    const from = opts.resolveFrom ?? [path.join(process.cwd(), 'package.json')]
    const child = fork(script, [opts.path, JSON.stringify(from), JSON.stringify(BASE_SETTINGS)], {
      serialization: 'advanced',
      stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
    })
    const ready = await new Promise<Reply>((resolve, reject) => {
      child.once('message', resolve)
      child.once('exit', (code) => reject(new Error(`chdb process exited (${code}) before it was ready`)))
    })
    if (ready.error !== undefined) throw new Error(`chdb could not be started: ${ready.error}`)
    return new ChdbExecutor(child, opts.settings ?? {})
  }

  private call(m: Omit<Request, 'id'>): Promise<Reply> {
    if (this.exitError) return Promise.reject(this.exitError)
    const id = this.next++
    return new Promise((resolve, reject) => {
      this.pending.set(id, { resolve, reject })
      this.child.send({ ...m, id })
    })
  }

  /** Only the settings given here: a DDL statement with its own SETTINGS clause cannot take a second. */
  async command(sql: string, params: Row = {}, settings: Settings = {}): Promise<void> {
    await this.call({ op: 'query', sql, params, settings })
  }

  async query(sql: string, params: Row = {}, settings: Settings = {}): Promise<Row[]> {
    const r = await this.call({ op: 'query', sql, params, settings: { ...this.settings, ...settings } })
    return parseRows(r.text ?? '')
  }

  async *stream(sql: string, params: Row = {}, settings: Settings = {}): AsyncGenerator<Row[]> {
    const rows = await this.query(sql, params, settings)
    for (let i = 0; i < rows.length; i += BATCH) yield rows.slice(i, i + BATCH)
  }

  async insert(table: string, rows: Row[], settings: Settings = {}): Promise<void> {
    if (rows.length === 0) return
    const text = rows.map((r) => JSON.stringify(r)).join('\n') + '\n'
    await this.call({ op: 'insert', table, rows: text, settings: { ...this.settings, ...settings } })
  }

  async version(): Promise<string> {
    const [r] = await this.query('SELECT version() AS v')
    return String(r!.v)
  }

  async close(): Promise<void> {
    if (this.exitError) return
    const exited = new Promise<void>((resolve) => this.child.once('exit', () => resolve()))
    await this.call({ op: 'close' }).catch(() => {})
    await exited
  }
}
