/**
 * A newest-first page while ingest runs: the page index holds the compacted calls, and the calls that arrived since
 * are in flushed segments and the tail (`newer_parts`), as a store under steady ingest always has them (up to 8
 * flushed segments of 200,000 parts before a compaction, and the tail). Measures the page's ids step and the whole
 * page (ids, then the calls), in-process, with the newer parts windowed (read/page-index.ts `pageNewer`) and merged
 * whole as before, alternating run by run in one process on the same store; every answer is checked equal between
 * the two and with the merged view's (the same order spelt with a second key, which the index does not take).
 *
 *   npm run build && node dist/bench/page-newer.js [--calls 1000000] [--newer 300000] [--runs 7]
 *
 * Writes bench/results/page-newer-<stamp>.json and .svg.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import type { CallPart, QueryOptions } from '../src/calls/model.js'
import { CallStore } from '../src/calls/store.js'
import { pagePlan } from '../src/calls/read/order.js'
import { pageNewer } from '../src/calls/read/page-index.js'
import { uuidv7 } from '../src/calls/ids.js'
import { parseFlags } from '../src/core/config.js'
import { ROOT_DIR, VERSION } from '../src/core/version.js'
import { genCalls } from '../scripts/gen-calls.js'
import { spreadChart } from './chart.js'
import { spread } from './util.js'

const { flags } = parseFlags(process.argv.slice(2))
const CALLS = Number(flags.calls ?? 1_000_000)
const NEWER = Number(flags.newer ?? 300_000)
const runs = Number(flags.runs ?? 7)
const PROJECT = 'bench/page-newer'
/** op_3 has no root among the newer calls (a filter the recent traffic does not match); op_0 has (it does). */
const OP = `weave:///${PROJECT}/op/op_3:v1`
const OP_RECENT = `weave:///${PROJECT}/op/op_0:v1`

const desc = [{ field: 'started_at', direction: 'desc' as const }]
/**
 * The pages a traces table asks for: the newest calls, and bench/query's (one op, roots, slow ones) for an op with no
 * newer root (the window finds nothing there and the newer parts are merged whole) and for one with some.
 */
const SHAPES: Record<string, QueryOptions> = {
  newest: { sort_by: desc, limit: 100 },
  op_roots_slow: {
    filter: { op_names: [OP], trace_roots_only: true },
    query: { $expr: { $gt: [{ $getField: 'summary.weave.latency_ms' }, { $literal: 1000 }] } },
    sort_by: desc,
    limit: 100,
  },
  op_roots_recent: {
    filter: { op_names: [OP_RECENT], trace_roots_only: true },
    query: { $expr: { $gt: [{ $getField: 'summary.weave.latency_ms' }, { $literal: 1000 }] } },
    sort_by: desc,
    limit: 100,
  },
}

/** Calls that arrive after the compaction, in the last hour: traces of 10, ops as gen-calls names them, start and end. */
function newerCalls(n: number, i0: number): CallPart[] {
  const parts: CallPart[] = []
  const now = Date.now()
  let root = ''
  let trace = ''
  for (let i = i0; i < i0 + n; i++) {
    const ms = now - 3_600_000 + Math.floor((i * 3_600_000) / NEWER)
    const id = uuidv7(ms)
    if (i % 10 === 0) [root, trace] = [id, uuidv7(ms)]
    const latency = 50 + ((i * 7919) % 3000)
    const op = `weave:///${PROJECT}/op/op_${(i * 7) % 20}:v1`
    parts.push(
      {
        kind: 'start',
        project_id: PROJECT,
        id,
        trace_id: trace,
        parent_id: i % 10 === 0 ? null : root,
        op_name: op,
        started_us: ms * 1000,
        attributes: '{}',
        inputs: `{"q":"${'x'.repeat(200)}"}`,
      },
      { kind: 'end', project_id: PROJECT, id, ended_us: (ms + latency) * 1000, output: `"${'y'.repeat(200)}"`, summary: '{}' },
    )
  }
  return parts
}

async function main(): Promise<void> {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'weft-page-newer-'))
  try {
    const t0 = performance.now()
    await genCalls({ dataDir: dir, calls: CALLS, project: PROJECT, end: new Date(Date.now() - 2 * 3_600_000) })
    const store = await CallStore.open(dir, { flushIntervalMs: 0, maxSegments: 1000 })
    try {
      await store.compact()
      const compactS = (performance.now() - t0) / 1000
      for (let i = 0; i < NEWER; i += 1000) await store.ingest(newerCalls(Math.min(1000, NEWER - i), i))
      await store.visible()
      const st = store.stats()
      const layout = { segments: st.segments, flushed: store.segments.filter((s) => !s.level).length, tail_parts: st.tail_parts }
      process.stdout.write(`store: ${CALLS} compacted calls (${compactS.toFixed(0)} s) + ${NEWER} newer: ${JSON.stringify(layout)}\n`)
      const out: Record<string, Record<string, number[]>> = {}
      for (const [shape, q] of Object.entries(SHAPES)) {
        const merged = await store.query(PROJECT, { ...q, sort_by: [...q.sort_by!, { field: 'id', direction: 'asc' }] })
        for (let r = 0; r < runs; r++)
          for (const windowed of r % 2 ? [true, false] : [false, true]) {
            pageNewer.windowed = windowed
            const side = windowed ? 'windowed' : 'whole'
            const conn = await store.connect()
            try {
              const readAll = async (s: string, p: { values: unknown[] }) =>
                (await conn.runAndReadAll(s, p.values as never)).getRowObjectsJS()
              const a = performance.now()
              const plan = await pagePlan(PROJECT, q, readAll)
              const b = performance.now()
              const page = await store.query(PROJECT, q)
              const c = performance.now()
              if (JSON.stringify(page) !== JSON.stringify(merged))
                throw new Error(`${shape} ${side}: the page differs from the merged view's`)
              if (plan!.ids.join() !== page.map((x) => x.id).join())
                throw new Error(`${shape} ${side}: the plan's ids differ from the page's`)
              const m = ((out[shape] ??= {})[side] ??= [])
              m.push(b - a)
              ;((out[shape] ??= {})[`${side}_page`] ??= []).push(c - b)
            } finally {
              conn.closeSync()
            }
          }
        pageNewer.windowed = true
        process.stdout.write(
          `${shape}: ${Object.entries(out[shape]!)
            .map(([k, v]) => {
              const s = spread(v)
              return `${k} ${s.min.toFixed(0)}/${s.median.toFixed(0)}/${s.max.toFixed(0)} ms`
            })
            .join(', ')} (load ${os.loadavg()[0]!.toFixed(1)})\n`,
        )
      }
      const stamp = new Date().toISOString().replace(/[:.]/g, '-')
      const results = {
        date: new Date().toISOString(),
        weft_version: VERSION,
        machine: { cpus: os.cpus().length, model: os.cpus()[0]?.model, node: process.version, load_average_1m: os.loadavg()[0] },
        setup: {
          calls: CALLS,
          newer: NEWER,
          layout,
          runs,
          what: 'in-process: ids step (pagePlan) and the whole page (store.query: ids, then the calls) per side; windowed: newer parts windowed by start time; whole: every newer part merged (WEFT_PAGE_NEWER_WINDOW=off)',
          shapes: SHAPES,
        },
        ms: Object.fromEntries(
          Object.entries(out).map(([shape, sides]) => [
            shape,
            Object.fromEntries(Object.entries(sides).map(([k, v]) => [k, { ...spread(v), runs: v }])),
          ]),
        ),
      }
      const base = path.join(ROOT_DIR, 'bench', 'results', `page-newer-${stamp}`)
      writeFileSync(`${base}.json`, JSON.stringify(results, null, 2) + '\n')
      const rows = Object.entries(out).flatMap(([shape, sides]) =>
        ['whole', 'windowed'].map((k) => ({ label: `${shape} ${k}`, ...spread(sides[k]!) })),
      )
      writeFileSync(`${base}.svg`, spreadChart(`ids of a page, ${CALLS} compacted + ${NEWER} newer calls (ms)`, 'ms', rows, 50))
      process.stdout.write(`wrote ${base}.json\n`)
    } finally {
      await store.close()
    }
  } finally {
    rmSync(dir, { recursive: true, force: true })
  }
}

await main()
