import { randomBytes } from 'node:crypto'
import type { Test } from 'tap'
import { postJson, requestJson, startServer, streamQuery, type TestServer } from './server.js'

/**
 * The crash matrix's workload and checks. Every write is recorded as acknowledged (a 200 came back)
 * or in doubt (the request failed, for instance because the server died under it); after a restart
 * every acknowledged write must be there exactly once and every write in doubt at most once.
 */
export const PROJECT = 'crash/points'
const hex = (n: number) => randomBytes(n / 2).toString('hex')

export type Kind = 'calls' | 'object' | 'table' | 'file' | 'feedback' | 'key'

interface Write {
  kind: Kind
  /** What identifies it afterwards: call ids, a digest, a feedback note, a key's user id. */
  ids: string[]
  /** The value written (object value, table rows, file bytes). */
  value?: unknown
}

export class Ledger {
  acked: Write[] = []
  doubt: Write[] = []
  /** Prompt tokens per acknowledged call (the statistics are recomputed from the calls read back, not from this). */
  calls = 0
}

/** Small flushes so a few batches reach every step of flush, rollup advance and compaction (past 8 segments); no model (faster starts). */
export const FAST_FLUSH = { WEFT_CALLS_FLUSH_ROWS: '10', WEFT_CALLS_FLUSH_INTERVAL_MS: '0', WEFT_MODEL: 'none' }

function callBatch(ids: string[]) {
  const trace = hex(32)
  const now = Date.now()
  return ids.flatMap((id, i) => [
    {
      mode: 'start',
      req: {
        start: {
          project_id: PROJECT,
          id,
          trace_id: trace,
          op_name: 'crash-op',
          started_at: new Date(now - 1000 - i).toISOString(),
          attributes: {},
          inputs: { i },
        },
      },
    },
    {
      mode: 'end',
      req: {
        end: {
          project_id: PROJECT,
          id,
          ended_at: new Date(now).toISOString(),
          output: { ok: true },
          summary: { usage: { 'm-1': { prompt_tokens: i + 1, completion_tokens: 2, total_tokens: i + 3, requests: 1 } } },
        },
      },
    },
  ])
}

/** One write of the kind; resolves true when acknowledged. Throws nothing: a dead server is a write in doubt. */
export async function write(s: TestServer, kind: Kind, ledger: Ledger, ref?: string): Promise<number> {
  let w: Write
  let req: () => Promise<{ status: number; json: any }>
  if (kind === 'calls') {
    w = { kind, ids: Array.from({ length: 5 }, () => hex(16)) }
    req = () => postJson(s, '/call/upsert_batch', { batch: callBatch(w.ids) })
  } else if (kind === 'object') {
    const val = { note: hex(16), n: [1, 2, 3] }
    w = { kind, ids: [], value: val }
    req = () => postJson(s, '/obj/create', { obj: { project_id: PROJECT, object_id: 'crash_obj', val } })
  } else if (kind === 'table') {
    const rows = Array.from({ length: 3 }, (_, i) => ({ i, v: hex(8) }))
    w = { kind, ids: [], value: rows }
    req = () => postJson(s, '/table/create', { table: { project_id: PROJECT, rows } })
  } else if (kind === 'file') {
    const bytes = hex(64)
    w = { kind, ids: [], value: bytes }
    req = async () => {
      const form = new FormData()
      form.set('project_id', PROJECT)
      form.set('file', new Blob([bytes]), 'f.txt')
      const r = await fetch(s.url + '/file/create', { method: 'POST', headers: s.basic(), body: form })
      return { status: r.status, json: await r.json().catch(() => null) }
    }
  } else if (kind === 'feedback') {
    const note = hex(16)
    w = { kind, ids: [note] }
    req = () =>
      postJson(s, '/feedback/create', {
        project_id: PROJECT,
        weave_ref: ref ?? `weave:///${PROJECT}/call/${hex(16)}`,
        feedback_type: 'wandb.note.1',
        payload: { note },
      })
  } else {
    const user = 'crash-' + hex(8)
    w = { kind, ids: [user] }
    req = () => requestJson(s, 'POST', '/admin/keys', { user_id: user, entities: ['crash'] })
  }
  try {
    const r = await req()
    if (r.status === 200) {
      if (kind === 'object' || kind === 'table' || kind === 'file') w.ids = [r.json.digest]
      ledger.acked.push(w)
      return 200
    }
    ledger.doubt.push(w)
    return r.status
  } catch {
    ledger.doubt.push(w)
    return 0
  }
}

/** Writes (calls plus the kinds given, in turn) until the server dies; fails the test if it outlives `ms`. */
export async function writeUntilDeath(t: Test, s: TestServer, kinds: Kind[], ledger: Ledger, ms = 60_000): Promise<void> {
  const deadline = Date.now() + ms
  let i = 0
  while (s.proc.exitCode === null && s.proc.signalCode === null && Date.now() < deadline) {
    const status = await write(s, kinds[i++ % kinds.length]!, ledger)
    if (status === 0) break
  }
  await Promise.race([s.exited(), new Promise((r) => setTimeout(r, 10_000))])
  t.equal(s.proc.signalCode, 'SIGKILL', `the failpoint killed the server (after ${i} writes)`)
}

/** Every acknowledged write exactly once, every write in doubt at most once, statistics equal to a recount. */
export async function verify(t: Test, s: TestServer, ledger: Ledger): Promise<void> {
  const calls = await streamQuery(s, { project_id: PROJECT, columns: ['id', 'started_at', 'ended_at', 'summary'] })
  const seen = new Map<string, number>()
  for (const c of calls) seen.set(c.id, (seen.get(c.id) ?? 0) + 1)
  const ackedCalls = ledger.acked.filter((w) => w.kind === 'calls').flatMap((w) => w.ids)
  const doubtCalls = ledger.doubt.filter((w) => w.kind === 'calls').flatMap((w) => w.ids)
  const lost = ackedCalls.filter((id) => !seen.has(id)).length
  t.equal(lost, 0, `${ackedCalls.length} acknowledged calls, none lost`)
  t.equal(ackedCalls.filter((id) => (seen.get(id) ?? 0) > 1).length, 0, 'none twice')
  t.equal(doubtCalls.filter((id) => (seen.get(id) ?? 0) > 1).length, 0, `${doubtCalls.length} calls in doubt, none twice`)
  const known = new Set([...ackedCalls, ...doubtCalls])
  t.equal(calls.filter((c) => !known.has(c.id)).length, 0, 'no call nobody wrote')
  const unfinished = calls.filter((c) => ackedCalls.includes(c.id) && c.summary?.weave?.status !== 'success')
  t.equal(unfinished.length, 0, 'acknowledged calls have their start and their end')
  await checkStats(t, s, calls)
  for (const w of ledger.acked) await checkCatalog(t, s, w, 'acked')
  for (const w of ledger.doubt) await checkCatalog(t, s, w, 'doubt')
}

/** /calls/stats and /calls/query_stats against a recount of the calls read back. */
async function checkStats(t: Test, s: TestServer, calls: any[]): Promise<void> {
  const count = await postJson(s, '/calls/query_stats', { project_id: PROJECT })
  t.equal(count.json?.count, calls.length, `/calls/query_stats counts the ${calls.length} calls`)
  let tokens = 0
  for (const c of calls) for (const u of Object.values<any>(c.summary?.usage ?? {})) tokens += u.total_tokens ?? 0
  const stats = await postJson(s, '/calls/stats', {
    project_id: PROJECT,
    start: new Date(Date.now() - 24 * 3600_000).toISOString(),
    end: new Date(Date.now() + 3600_000).toISOString(),
    granularity: 86_400,
    call_metrics: [{ metric: 'call_count', aggregations: ['sum'] }],
    usage_metrics: [{ metric: 'total_tokens', aggregations: ['sum'] }],
  })
  t.equal(stats.status, 200, '/calls/stats answers')
  const sum = (rows: any[], key: string) => rows.reduce((a, r) => a + Number(r[key] ?? 0), 0)
  t.equal(sum(stats.json.call_buckets, 'sum_call_count'), calls.length, `/calls/stats call_count = ${calls.length}, recounted`)
  t.equal(sum(stats.json.usage_buckets, 'sum_total_tokens'), tokens, `/calls/stats total_tokens = ${tokens}, recounted`)
}

async function checkCatalog(t: Test, s: TestServer, w: Write, state: 'acked' | 'doubt'): Promise<void> {
  if (w.kind === 'calls') return
  if (w.kind === 'feedback' || w.kind === 'key') {
    const n = await countOf(s, w)
    if (state === 'acked') t.equal(n, 1, `acknowledged ${w.kind} ${w.ids[0]} there once`)
    else t.ok(n <= 1, `${w.kind} in doubt there at most once (${n})`)
    return
  }
  if (state === 'doubt') return // content-addressed: a write in doubt is there once or not at all
  const digest = w.ids[0]!
  if (w.kind === 'object') {
    const r = await postJson(s, '/obj/read', { project_id: PROJECT, object_id: 'crash_obj', digest })
    t.same(r.json?.obj?.val, w.value, `acknowledged object ${digest} reads back`)
  } else if (w.kind === 'table') {
    const r = await postJson(s, '/table/query', { project_id: PROJECT, digest })
    t.same(
      r.json?.rows?.map((x: any) => x.val),
      w.value,
      `acknowledged table ${digest} reads back`,
    )
  } else {
    const r = await fetch(s.url + '/file/content', {
      method: 'POST',
      headers: { ...s.basic(), 'content-type': 'application/json' },
      body: JSON.stringify({ project_id: PROJECT, digest }),
    })
    t.equal(await r.text(), w.value, `acknowledged file ${digest} reads back`)
  }
}

async function countOf(s: TestServer, w: Write): Promise<number> {
  if (w.kind === 'key') {
    const r = await requestJson(s, 'GET', '/admin/keys')
    const keys: any[] = Array.isArray(r.json) ? r.json : (r.json?.keys ?? [])
    return keys.filter((k) => k.user_id === w.ids[0]).length
  }
  const r = await postJson(s, '/feedback/query', { project_id: PROJECT })
  return (r.json?.result ?? []).filter((f: any) => f.payload?.note === w.ids[0]).length
}

/** A clean server on the data directory: the restart after the crash, or the run before it. */
export const restart = (dataDir: string, key: string, env: Record<string, string> = {}) =>
  startServer({ dataDir, key, env: { ...FAST_FLUSH, ...env } })
