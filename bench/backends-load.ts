/**
 * Loads the same calls into every server over HTTP, as a client would: scripts/gen-calls (the generator
 * the other benches use) writes its parts to Parquet, then they are read back in arrival order (`seq`)
 * and sent as `/call/upsert_batch` items (a start, then its end), the batches built once and sent to
 * each server in turn, a few requests in flight per server. Only the requests are timed.
 */
import { mkdtempSync, rmSync } from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { DuckDBInstance } from '@duckdb/node-api'
import { genCalls } from '../scripts/gen-calls.js'

/** Calls per `/call/upsert_batch` request (two items each). */
const BATCH_CALLS = 500
/** Requests in flight per server. */
const IN_FLIGHT = 4
/** Calls read from the Parquet files at a time (bounds the bench's own memory at 10M). */
const CHUNK_CALLS = 20_000

export interface Generated {
  files: string[]
  /** Each file's seq range (a call's start is seq 2i+1, its end 2i+2). */
  segments: { file: string; min_seq: number; max_seq: number }[]
  dir: string
  gen_s: number
}

/**
 * Generates n calls of a project, started over the `days` days before `end`, into Parquet files in a
 * temporary directory (a calls store as flushes leave it: scripts/gen-calls.ts), every call by `user`.
 */
export async function generate(n: number, project: string, end: number, days: number, user: string): Promise<Generated> {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'weft-backends-gen-'))
  const t = performance.now()
  const segs = await genCalls({ dataDir: dir, calls: n, project, days, ops: 20, models: 5, traceSize: 10, end: new Date(end), user })
  return {
    dir,
    files: segs.map((s) => path.join(dir, 'calls', s.file)),
    segments: segs.map((s) => ({ file: path.join(dir, 'calls', s.file), min_seq: s.min_seq, max_seq: s.max_seq })),
    gen_s: Math.round(performance.now() - t) / 1000,
  }
}

export function removeGenerated(g: Generated): void {
  rmSync(g.dir, { recursive: true, force: true })
}

const ISO = `'%Y-%m-%dT%H:%M:%S.%fZ'`
/** One item per part, its JSON text built here (the JSON columns are JSON text already). */
const PARTS_SQL = (files: string[]) => `
  SELECT kind, to_json(project_id) AS project_id, to_json(id) AS id, to_json(trace_id) AS trace_id, to_json(parent_id) AS parent_id,
    to_json(op_name) AS op_name, strftime(started_at, ${ISO}) AS started_at, strftime(ended_at, ${ISO}) AS ended_at,
    attributes, inputs, output, summary, to_json(exception) AS exception
  FROM read_parquet([${files.map((f) => `'${f}'`).join(', ')}])
  WHERE seq > $1 AND seq <= $2 ORDER BY seq`

function item(r: Record<string, unknown>): string {
  if (r.kind === 'start')
    return `{"mode":"start","req":{"start":{"project_id":${r.project_id},"id":${r.id},"trace_id":${r.trace_id},"parent_id":${r.parent_id ?? 'null'},"op_name":${r.op_name},"started_at":"${r.started_at}","attributes":${r.attributes},"inputs":${r.inputs}}}}`
  return `{"mode":"end","req":{"end":{"project_id":${r.project_id},"id":${r.id},"ended_at":"${r.ended_at}","output":${r.output},"summary":${r.summary},"exception":${r.exception ?? 'null'}}}}`
}

/** Sends bodies to one server, `IN_FLIGHT` at a time; every item must be acknowledged without an error. */
async function send(url: string, auth: string, bodies: string[]): Promise<void> {
  let next = 0
  const worker = async () => {
    while (next < bodies.length) {
      const body = bodies[next++]!
      const r = await fetch(url + '/call/upsert_batch', {
        method: 'POST',
        headers: { authorization: auth, 'content-type': 'application/json' },
        body,
      })
      const text = await r.text()
      if (r.status !== 200) throw new Error(`${url} /call/upsert_batch answered ${r.status}: ${text.slice(0, 300)}`)
      const bad = (JSON.parse(text) as { res: { error?: string }[] }).res.find((x) => x.error)
      if (bad) throw new Error(`${url} /call/upsert_batch: an item failed: ${bad.error}`)
    }
  }
  await Promise.all(Array.from({ length: IN_FLIGHT }, worker))
}

/** Loads the generated calls into each server (by name → url); returns each server's time spent in requests, in seconds. */
export async function loadAll(g: Generated, n: number, servers: Record<string, string>, auth: string): Promise<Record<string, number>> {
  const db = await DuckDBInstance.create(':memory:')
  const conn = await db.connect()
  const ms: Record<string, number> = Object.fromEntries(Object.keys(servers).map((k) => [k, 0]))
  for (let lo = 0; lo < n; lo += CHUNK_CALLS) {
    const hi = Math.min(n, lo + CHUNK_CALLS)
    const rows = (await conn.runAndReadAll(PARTS_SQL(g.files), [2 * lo, 2 * hi])).getRowObjectsJS() as Record<string, unknown>[]
    if (rows.length !== 2 * (hi - lo)) throw new Error(`read ${rows.length} parts for calls ${lo}..${hi}`)
    const bodies: string[] = []
    for (let i = 0; i < rows.length; i += 2 * BATCH_CALLS)
      bodies.push(
        `{"batch":[${rows
          .slice(i, i + 2 * BATCH_CALLS)
          .map(item)
          .join(',')}]}`,
      )
    // Alternate which server goes first, so neither always meets the other's background work (flushes, merges).
    const order = Object.entries(servers)
    if ((lo / CHUNK_CALLS) % 2) order.reverse()
    for (const [name, url] of order) {
      const t = performance.now()
      await send(url, auth, bodies)
      ms[name]! += performance.now() - t
    }
    if (lo % 200_000 === 0 && lo > 0) process.stdout.write(`  loaded ${lo} calls\n`)
  }
  conn.closeSync()
  db.closeSync()
  return Object.fromEntries(Object.entries(ms).map(([k, v]) => [k, Math.round(v) / 1000]))
}
