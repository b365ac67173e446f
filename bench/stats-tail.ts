/**
 * Statistics with calls in the tail (`node dist/bench/stats.js --tail N`): issue 18's soak saw `/calls/stats` at
 * 1.8–2.9 s under ingest against 30–50 ms quiet. On a copy of the size's store, a server that holds its flushes off
 * is sent N fresh calls (start and end items in batches of 500, UUIDv7 ids as the SDKs make them, started in the hour
 * before the range's end), so every request pays the correction for the parts past the rollups' mark; the last 24 h
 * and 30 days are then timed over HTTP (each a request answered from the rollups), and their answers checked against
 * weft's scan path over the same store (counts and sums exact, percentiles within the sketch's 1 %).
 */
import { cpSync, mkdtempSync, rmSync } from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { Catalog } from '../src/catalog/db.js'
import { Prices, defaultPrices } from '../src/catalog/prices.js'
import { uuidv7 } from '../src/calls/ids.js'
import { CallStore } from '../src/calls/store.js'
import type { CallStatsReq } from '../src/schemas/calls.js'
import { CallStats } from '../src/stats/engine.js'
import { ROOT_DIR } from '../src/core/version.js'
import { spread, startWeft, type Spread } from './util.js'

const DAY = 86_400_000
const HOUR = 3_600_000
const BATCH = 500

type Body = (start: number, end: number) => Record<string, unknown>
type Post = (p: string, body: unknown) => Promise<{ json: Record<string, unknown>; path: string | null }>

export interface TailResult {
  tail_calls: number
  send_s: number
  ms: Record<'stats_24h' | 'stats_30d', Spread>
  /** Values of the rollup answers that differ from the scan path's (empty: equal). */
  differences: string[]
}

/** The calls, as the SDKs send them: a start item and an end item each, with usage for one of three models. */
function batches(project: string, n: number, end: number): unknown[][] {
  let seed = 12345
  const rand = () => (seed = (seed * 1103515245 + 12345) % 2 ** 31) / 2 ** 31
  const out: unknown[][] = []
  for (let done = 0; done < n; done += BATCH) {
    const batch: unknown[] = []
    for (let i = 0; i < Math.min(BATCH, n - done); i++) {
      const id = uuidv7()
      const started = end - 1 - Math.floor(rand() * HOUR)
      const model = ['gpt-4o', 'gpt-4o-mini', 'claude-3-5-sonnet'][i % 3]!
      const usage = {
        [model]: { input_tokens: 50 + (i % 200), output_tokens: 20 + (i % 90), total_tokens: 70 + (i % 200) + (i % 90), requests: 1 },
      }
      batch.push({
        mode: 'start',
        req: {
          start: {
            project_id: project,
            id,
            trace_id: uuidv7(),
            op_name: 'tail_op',
            started_at: new Date(started).toISOString(),
            attributes: {},
            inputs: { q: i },
          },
        },
      })
      batch.push({
        mode: 'end',
        req: {
          end: {
            project_id: project,
            id,
            ended_at: new Date(started + 200 + Math.floor(rand() * 5000)).toISOString(),
            output: 'ok',
            summary: { usage },
          },
        },
      })
    }
    out.push(batch)
  }
  return out
}

/** Values that differ between two answers: percentiles (`p…`) beyond 1 %, everything else at all. */
function differences(got: Record<string, unknown>, want: Record<string, unknown>, label: string): string[] {
  const out: string[] = []
  for (const kind of ['call_buckets', 'usage_buckets'] as const) {
    const g = got[kind] as Record<string, unknown>[]
    const w = want[kind] as Record<string, unknown>[]
    if (g.length !== w.length) out.push(`${label} ${kind}: ${g.length} buckets, scan ${w.length}`)
    for (let i = 0; i < Math.min(g.length, w.length); i++)
      for (const [k, v] of Object.entries(w[i]!)) {
        const x = g[i]![k]
        const ok =
          typeof v === 'number' && typeof x === 'number'
            ? Math.abs(x - v) <= (k.startsWith('p') ? 0.01 * Math.abs(v) : 1e-9 * Math.max(1, Math.abs(v)))
            : x === v
        if (!ok) out.push(`${label} ${kind}[${i}].${k}: ${JSON.stringify(x)}, scan ${JSON.stringify(v)}`)
      }
  }
  return out
}

export async function tailRun(opts: {
  dir: string
  end: number
  calls: number
  runs: number
  key: string
  project: string
  body: Body
}): Promise<TailResult> {
  const copy = mkdtempSync(path.join(os.tmpdir(), 'weft-stats-tail-'))
  try {
    cpSync(opts.dir, copy, { recursive: true })
    const server = await startWeft({
      root: ROOT_DIR,
      dataDir: copy,
      key: opts.key,
      // No catch-up on the tail (src/stats/rollups.ts, wanted): every request pays the correction for the whole tail,
      // the worst case this bench measures (with it, the first request sets one off and the rest correct for little).
      env: {
        WEFT_ACCESS_LOG: 'false',
        WEFT_CALLS_FLUSH_ROWS: '100000000',
        WEFT_CALLS_FLUSH_INTERVAL_MS: '86400000',
        WEFT_ROLLUP_CATCH_UP_PARTS: '0',
      },
    })
    const headers = { authorization: 'Basic ' + Buffer.from('api:' + opts.key).toString('base64'), 'content-type': 'application/json' }
    const post: Post = async (p, body) => {
      const r = await fetch(server.url + p, { method: 'POST', headers, body: JSON.stringify(body) })
      const text = await r.text()
      if (r.status !== 200) throw new Error(`${p} answered ${r.status}: ${text.slice(0, 300)}`)
      return { json: JSON.parse(text) as Record<string, unknown>, path: r.headers.get('x-weft-stats-path') }
    }
    const answers: Record<string, Record<string, unknown>> = {}
    const ms = {} as TailResult['ms']
    let sendS = 0
    try {
      while ((await post('/calls/stats', opts.body(opts.end - DAY, opts.end))).path !== 'rollup')
        await new Promise((r) => setTimeout(r, 200))
      const t0 = performance.now()
      for (const batch of batches(opts.project, opts.calls, opts.end)) await post('/call/upsert_batch', { batch })
      sendS = (performance.now() - t0) / 1000
      for (const [name, days] of [
        ['stats_24h', 1],
        ['stats_30d', 30],
      ] as const) {
        const body = opts.body(opts.end - days * DAY, opts.end)
        const times: number[] = []
        for (let r = 0; r <= opts.runs; r++) {
          const t = performance.now()
          const a = await post('/calls/stats', body)
          if (a.path !== 'rollup') throw new Error(`${name} with a tail answered by ${a.path}`)
          if (r > 0) times.push(Math.round((performance.now() - t) * 10) / 10)
          answers[name] = a.json
        }
        ms[name] = spread(times)
      }
    } finally {
      await server.stop()
    }
    // The same store, its tail replayed from the log: the scan path, without rollups.
    const store = await CallStore.open(copy, { flushIntervalMs: 0, flushRows: 100_000_000 })
    const catalog = await Catalog.open(copy)
    const diffs: string[] = []
    try {
      const scan = new CallStats(store, null, new Prices(catalog, defaultPrices('')))
      for (const [name, days] of [
        ['stats_24h', 1],
        ['stats_30d', 30],
      ] as const) {
        const want = await scan.run(opts.body(opts.end - days * DAY, opts.end) as CallStatsReq, opts.end)
        diffs.push(...differences(answers[name]!, want.result, name))
      }
    } finally {
      await store.close()
      await catalog.close()
    }
    return { tail_calls: opts.calls, send_s: Math.round(sendS * 10) / 10, ms, differences: diffs }
  } finally {
    rmSync(copy, { recursive: true, force: true })
  }
}
