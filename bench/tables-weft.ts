/** weft's side of the tables bench: the HTTP requests a Weave client sends, and the server process's costs. */
import { readdirSync, readFileSync, statSync } from 'node:fs'
import http from 'node:http'
import path from 'node:path'
import { Catalog } from '../src/catalog/db.js'
import { valueDigest } from '../src/catalog/digest.js'
import { classify, MARK_ALL_LATEST } from '../src/catalog/objects.js'
import { chunkJson, PROJECT, type Chunk, type Dataset, type PageRow, type Row } from './tables-data.js'

/** Connection errors of a reused socket the server had closed. */
const RETRY_CODES = new Set(['ECONNRESET', 'EPIPE', 'ECONNREFUSED'])

/** Stands for an append's base digest (a SHA-256 in hex) in a body built before the previous answer names it. */
const BASE_PLACEHOLDER = '0'.repeat(64)

const createBody = (c: Chunk) => `{"table":{"project_id":${JSON.stringify(PROJECT)},"rows":${chunkJson(c)}}}`

/** `/table/update` appending a chunk's rows (the Python SDK's `_append_to_table` shape), joined from prebuilt row JSON. */
function appendBody(base: string, parts: string[]): string {
  const updates = '[' + parts.map((j) => '{"append":{"row":' + j + '}}').join(',') + ']'
  return `{"project_id":${JSON.stringify(PROJECT)},"base_digest":"${base}","updates":${updates}}`
}

export class WeftClient {
  private readonly headers: Record<string, string>
  /** Request bodies built before the clock starts (prepare), by chunk; `base`: where an append's base digest goes. */
  private readonly bodies = new WeakMap<Chunk, { body: Buffer; base: number }>()

  constructor(
    readonly url: string,
    key: string,
  ) {
    this.headers = { authorization: 'Basic ' + Buffer.from('api:' + key).toString('base64'), 'content-type': 'application/json' }
  }

  /**
   * Requests go through node:http, not fetch: with a 1M-row dataset in this process's heap, fetch cost the client 27
   * s of CPU per upload (1,356 collections, 21.7 s of them; fetch copies each 10 MB body into a new buffer) against
   * 1.5 s, and on two cores that CPU came out of the server's share: 38.8 MB/s against 79.8 for the same server.
   */
  private readonly agent = new http.Agent({ keepAlive: true })

  async post<T>(p: string, body: string | Buffer): Promise<T> {
    for (let attempt = 0; ; attempt++) {
      try {
        const r = await this.send(p, body)
        if (r.status !== 200) throw new Error(`${p} answered ${r.status}: ${r.text.slice(0, 300)}`)
        return JSON.parse(r.text) as T
      } catch (e) {
        // A kept-alive socket the server closed while idle (the peer's slow cases, or the next run's dataset being
        // generated, run in between): again, on a new one, up to twice (1 and 3 s apart). Every request here is
        // content-addressed, so a repeat stores nothing twice. (A 100k-row run on 2026-11-24 lost weft's side to a
        // bare "fetch failed" here, and a 1M-row run on 2026-12-05 to one whose retry failed too.)
        const code = (e as { code?: string }).code
        const why = `${p}: ${(e as Error).message} (attempt ${attempt + 1}: ${code ?? ''})`
        if (!code || !RETRY_CODES.has(code) || attempt >= 2) throw new Error(why)
        process.stderr.write(`  retrying ${why}\n`)
        await new Promise((res) => setTimeout(res, attempt === 0 ? 1000 : 3000))
      }
    }
  }

  private send(p: string, body: string | Buffer): Promise<{ status: number; text: string }> {
    const url = new URL(this.url + p)
    const bytes = typeof body === 'string' ? Buffer.from(body) : body
    return new Promise((resolve, reject) => {
      const req = http.request(
        {
          host: url.hostname,
          port: url.port,
          path: url.pathname,
          method: 'POST',
          agent: this.agent,
          headers: { ...this.headers, 'content-length': bytes.length },
        },
        (res) => {
          const parts: Buffer[] = []
          res.on('data', (c: Buffer) => parts.push(c))
          res.on('end', () => resolve({ status: res.statusCode ?? 0, text: Buffer.concat(parts).toString('utf8') }))
          res.on('error', reject)
        },
      )
      req.on('error', reject)
      req.end(bytes)
    })
  }

  /** Ends the kept-alive sockets. */
  close(): void {
    this.agent.destroy()
  }

  /**
   * Builds every request body of `d` as bytes, before the clock starts, as bench/ingest.ts does for calls: joining
   * and encoding a 10 MB chunk's body took the client ~85 ms (join 30, UTF-8 encoding 55), while the server sat
   * idle. Each body is used once (fresh rows per run); an append's base digest is written in when it is known.
   */
  prepare(d: Dataset, mode: 'update' | 'digests'): void {
    d.chunks.forEach((c, i) => {
      const body = Buffer.from(mode === 'update' && i > 0 ? appendBody(BASE_PLACEHOLDER, c.parts) : createBody(c))
      this.bodies.set(c, { body, base: mode === 'update' && i > 0 ? body.indexOf(BASE_PLACEHOLDER) : -1 })
    })
  }

  /** One `/table/create` of a chunk (its prebuilt body, else one put together from the chunk's row JSON). */
  create(c: Chunk): Promise<{ digest: string; row_digests: string[] }> {
    return this.post('/table/create', this.bodies.get(c)?.body ?? createBody(c))
  }

  /** One `/table/update` appending a chunk's rows to `base`. */
  append(base: string, c: Chunk): Promise<{ digest: string }> {
    const built = this.bodies.get(c)
    if (!built || built.base < 0) return this.post('/table/update', appendBody(base, c.parts))
    built.body.write(base, built.base, 'latin1')
    return this.post('/table/update', built.body)
  }

  fromDigests(rowDigests: string[]): Promise<{ digest: string }> {
    return this.post('/table/create_from_digests', JSON.stringify({ project_id: PROJECT, row_digests: rowDigests }))
  }

  async page(table: string, offset: number, limit: number): Promise<PageRow[]> {
    const r = await this.post<{ rows: PageRow[] }>('/table/query', JSON.stringify({ project_id: PROJECT, digest: table, offset, limit }))
    return r.rows
  }

  async sortedPage(table: string, limit: number): Promise<PageRow[]> {
    const body = { project_id: PROJECT, digest: table, sort_by: [{ field: 'score', direction: 'desc' }], limit }
    return (await this.post<{ rows: PageRow[] }>('/table/query', JSON.stringify(body))).rows
  }

  async createObject(objectId: string, val: unknown): Promise<string> {
    const r = await this.post<{ digest: string }>('/obj/create', JSON.stringify({ obj: { project_id: PROJECT, object_id: objectId, val } }))
    return r.digest
  }

  async latestObjects(limit: number): Promise<Record<string, unknown>[]> {
    const body = {
      project_id: PROJECT,
      filter: { latest_only: true, base_object_classes: ['Prompt'] },
      sort_by: [{ field: 'object_id', direction: 'asc' }],
      limit,
    }
    return (await this.post<{ objs: Record<string, unknown>[] }>('/objs/query', JSON.stringify(body))).objs
  }

  async readRefs(refs: string[]): Promise<unknown[]> {
    return (await this.post<{ vals: unknown[] }>('/refs/read_batch', JSON.stringify({ refs }))).vals
  }
}

/** The server's pid, found by its data directory on the command line (startWeft does not expose it). */
export function serverPid(dataDir: string): number | null {
  for (const d of readdirSync('/proc')) {
    if (!/^\d+$/.test(d)) continue
    try {
      const cmd = readFileSync(`/proc/${d}/cmdline`, 'utf8').split('\0')
      if (cmd.includes('serve') && cmd.includes(dataDir) && !cmd[0]!.endsWith('taskset')) return Number(d)
    } catch {
      // gone meanwhile
    }
  }
  return null
}

/** Peak and current resident set of a process, in MB (VmHWM, VmRSS). */
export function rssMb(pid: number | null): { peak: number; now: number } | null {
  if (!pid) return null
  try {
    const st = readFileSync(`/proc/${pid}/status`, 'utf8')
    const kb = (k: string) => Number(new RegExp(`${k}:\\s+(\\d+)`).exec(st)?.[1] ?? 0)
    return { peak: Math.round(kb('VmHWM') / 1024), now: Math.round(kb('VmRSS') / 1024) }
  } catch {
    return null
  }
}

/** Bytes under a path (files only). */
export function diskBytes(p: string): number {
  let total = 0
  let st
  try {
    st = statSync(p)
  } catch {
    return 0
  }
  if (st.isFile()) return st.size
  if (st.isDirectory()) for (const e of readdirSync(p)) total += diskBytes(path.join(p, e))
  return total
}

const OBJ_JSON_TYPE = JSON.stringify({
  object_id: 'VARCHAR',
  digest: 'VARCHAR',
  version_index: 'INTEGER',
  kind: 'VARCHAR',
  base: 'VARCHAR',
  leaf: 'VARCHAR',
  val_dump: 'VARCHAR',
  created_us: 'BIGINT',
})

/**
 * Writes object versions into a catalog before the server opens it, as `/obj/create` leaves them
 * (digest, kind and classes from weft's own functions, version_index = the version's rank, increasing
 * creation times), one statement per round: 100k creates over HTTP take ~40 min on this machine
 * (each is a serialised transaction of ~25 ms), which the bench times on a sample instead.
 */
export async function preloadObjects(dataDir: string, rounds: { object_id: string; val: Row }[][]): Promise<string[][]> {
  const cat = await Catalog.open(dataDir)
  const t0 = (Date.now() - 3_600_000) * 1000
  const digests: string[][] = []
  try {
    for (const [v, objs] of rounds.entries()) {
      const rows = objs.map((o, k) => {
        const c = classify(o.val)
        const digest = valueDigest(o.val)
        const val_dump = JSON.stringify(o.val)
        return {
          object_id: o.object_id,
          digest,
          version_index: v,
          kind: c.kind,
          base: c.base,
          leaf: c.leaf,
          val_dump,
          created_us: t0 + v * objs.length + k,
        }
      })
      digests.push(rows.map((r) => r.digest))
      await cat.run(
        `INSERT INTO objects SELECT $1, o.object_id, o.digest, o.version_index, o.kind, o.base, o.leaf, o.val_dump, NULL, make_timestamp(o.created_us), NULL, false
         FROM (SELECT unnest(from_json($2::JSON, '[${OBJ_JSON_TYPE}]')) AS o)`,
        [PROJECT, JSON.stringify(rows)],
      )
    }
    await cat.run(MARK_ALL_LATEST, [PROJECT])
  } finally {
    await cat.close()
  }
  return digests
}
