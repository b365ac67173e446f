/**
 * What a read costs with fresh data (issue 18): the soak's three call reads — a page of the 100 newest calls, a count
 * (`/calls/query_stats`) and an hour of `/calls/stats` — in process (no HTTP, no chat, no client), in three states:
 * after a compaction (no tail, rollups current), while ingest runs beside them at `--rate` calls/s (batches of 100,
 * as the soak sends them), and idle again after it (the tail and the parts past the rollups' mark left as they are).
 *
 *   npm run build && node dist/bench/reads-fresh.js [--calls 500000] [--rate 2900] [--seconds 20]
 *
 * Each state's reads run one after another, 100 ms apart; the count is checked against the merged calls counted
 * directly at the end of each idle state. Writes bench/results/reads-fresh-<stamp>.json and .svg.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import type { CallPart } from '../src/calls/model.js'
import { uuidv7 } from '../src/calls/ids.js'
import { parseFlags } from '../src/core/config.js'
import { ROOT_DIR, VERSION } from '../src/core/version.js'
import { Params } from '../src/query/params.js'
import { openAnalytics, type Analytics } from '../src/stats/analytics.js'
import { genCalls } from '../scripts/gen-calls.js'
import { spreadChart } from './chart.js'
import { spread } from './util.js'

const { flags } = parseFlags(process.argv.slice(2))
const CALLS = Number(flags.calls ?? 500_000)
const RATE = Number(flags.rate ?? 2900)
const SECONDS = Number(flags.seconds ?? 20)
const PROJECT = 'bench/reads-fresh'
const READS = ['page', 'count', 'stats'] as const

/** A batch of 100 calls started now, each one part (the ingest worker folds a call's start and end sent in one batch). */
function batch(): CallPart[] {
  const now = Date.now()
  return Array.from({ length: 100 }, (_, i) => ({
    kind: 'merged' as const,
    project_id: PROJECT,
    id: uuidv7(now),
    trace_id: uuidv7(now),
    op_name: `weave:///${PROJECT}/op/op_${i % 20}:v1`,
    started_us: now * 1000,
    ended_us: (now + 50 + i) * 1000,
    attributes: '{}',
    inputs: `{"q":"${'x'.repeat(1000)}"}`,
    output: `"${'y'.repeat(1000)}"`,
    summary: '{}',
    usage: [{ model: 'gpt-4o', input_tokens: 10 + i, output_tokens: 5, total_tokens: 15 + i }],
  }))
}

const reads = (a: Analytics): Record<(typeof READS)[number], () => Promise<unknown>> => ({
  page: () => a.store.query(PROJECT, { limit: 100, sort_by: [{ field: 'started_at', direction: 'desc' }] }),
  count: () => a.stats.count(PROJECT, null),
  stats: () =>
    a.stats.stats({
      project_id: PROJECT,
      start: new Date(Date.now() - 3_600_000).toISOString(),
      call_metrics: [{ metric: 'latency_ms', aggregations: ['avg'], percentiles: [50, 99] }, { metric: 'call_count' }],
      usage_metrics: [{ metric: 'total_tokens' }],
    }),
})

/** One state: the reads in turn for SECONDS, with ingest at RATE beside them when `ingest`. */
async function state(a: Analytics, ingest: boolean): Promise<Record<string, number[]>> {
  const ms: Record<string, number[]> = { page: [], count: [], stats: [] }
  let stop = false
  const loader = (async () => {
    const t0 = performance.now()
    for (let i = 0; ingest && !stop; i++) {
      const wait = t0 + (i * 100_000) / RATE - performance.now()
      if (wait > 0) await new Promise((r) => setTimeout(r, wait))
      void a.store.ingest(batch())
    }
  })()
  const fns = reads(a)
  const t0 = performance.now()
  while (performance.now() - t0 < SECONDS * 1000) {
    for (const r of READS) {
      const t = performance.now()
      await fns[r]()
      ms[r]!.push(performance.now() - t)
    }
    await new Promise((r) => setTimeout(r, 100))
  }
  stop = true
  await loader
  return ms
}

/** The live calls counted from the merged view directly (the count's answer must equal it). */
async function directCount(a: Analytics): Promise<number> {
  const params = new Params()
  const p = params.add(PROJECT)
  const rows = await a.store.rows(
    `SELECT count(*)::BIGINT AS n FROM (SELECT id, max(deleted_at) AS d, max(started_at) AS s FROM all_parts WHERE project_id = ${p} GROUP BY id)
      WHERE d IS NULL AND s IS NOT NULL`,
    params,
  )
  return Number(rows[0]!.n)
}

async function main(): Promise<void> {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'weft-reads-fresh-'))
  try {
    await genCalls({ dataDir: dir, calls: CALLS, days: 2, project: PROJECT, end: new Date(Date.now() - 2 * 3_600_000) })
    const a = await openAnalytics(dir, {})
    try {
      await a.store.compact()
      await a.ready()
      const out: Record<string, Record<string, number[]>> = {}
      const layout: Record<string, unknown> = {}
      const rollupMs: Record<string, unknown> = {}
      for (const [name, ingest] of [
        ['after a compaction', false],
        ['with ingest', true],
        ['idle, fresh parts left', false],
      ] as const) {
        for (const d of Object.values(a.rollups.timings)) d.reset()
        out[name] = await state(a, ingest)
        const st = a.store.stats()
        layout[name] = { tail_parts: st.tail_parts, segments: st.segments, parts_past_x: Math.max(0, a.store.lastSeq - a.rollups.x) }
        // The rollups' upkeep during the state (advances' merges and inserts, commits, folds: count/total/max ms).
        rollupMs[name] = Object.fromEntries(Object.entries(a.rollups.timings).map(([k, d]) => [k, d.json()]))
        if (!ingest) {
          const [got, want] = [await a.stats.count(PROJECT, null), await directCount(a)]
          if (got !== want) throw new Error(`${name}: count ${got}, merged calls ${want}`)
        }
        const line = READS.map((r) => {
          const s = spread(out[name]![r]!)
          return `${r} ${s.min.toFixed(0)}/${s.median.toFixed(0)}/${s.max.toFixed(0)}`
        })
        process.stdout.write(
          `${name}: ${line.join(', ')} ms (min/median/max); ${JSON.stringify(layout[name])}; rollups ${JSON.stringify(rollupMs[name])}\n`,
        )
      }
      const stamp = new Date().toISOString().replace(/[:.]/g, '-')
      const results = {
        date: new Date().toISOString(),
        weft_version: VERSION,
        machine: { cpus: os.cpus().length, model: os.cpus()[0]?.model, node: process.version, load_average_1m: os.loadavg()[0] },
        setup: { calls: CALLS, rate: RATE, seconds: SECONDS, layout },
        rollups_ms: rollupMs,
        ms: Object.fromEntries(
          Object.entries(out).map(([s, rs]) => [s, Object.fromEntries(Object.entries(rs).map(([r, v]) => [r, { ...spread(v), runs: v }]))]),
        ),
      }
      const base = path.join(ROOT_DIR, 'bench', 'results', `reads-fresh-${stamp}`)
      writeFileSync(`${base}.json`, JSON.stringify(results, null, 2) + '\n')
      const rows = Object.entries(out).flatMap(([s, rs]) => READS.map((r) => ({ label: `${r}, ${s}`, ...spread(rs[r]!) })))
      writeFileSync(`${base}.svg`, spreadChart(`reads with fresh data, ${CALLS} compacted calls (ms)`, 'ms', rows, 250))
      process.stdout.write(`wrote ${base}.json\n`)
    } finally {
      await a.close()
    }
  } finally {
    rmSync(dir, { recursive: true, force: true })
  }
}

await main()
