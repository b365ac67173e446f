/**
 * `--load direct` of the both-backends bench: the generated calls put into each backend's storage
 * without HTTP, so 1M and 10M calls load in minutes rather than hours. The query and statistics
 * requests are what the bench compares; the store each backend ends up with is the one an HTTP load
 * gives (checked: the same answers either way, bench/README.md), reached by the backend's own code:
 *
 * - embedded: the generated files are a calls store as flushes leave it (scripts/gen-calls.ts), linked
 *   into the data directory and compacted by the store (page index included), as bench/stats.ts and
 *   bench/query.ts use them; the server then builds its rollups at start (timed: until /ready).
 * - chdb: a first start of the server applies the migrations, then, with the server stopped (chdb is
 *   one process per directory), each call's two parts are folded into one part as the ingest path
 *   folds a batch that holds both (calls/ingest/parts.ts foldParts) and inserted into call_parts with
 *   `INSERT … SELECT … FROM file(Parquet)`, so the materialized views (calls_merged, call_usage, the
 *   statistics rollups) are fed by inserts exactly as an HTTP load feeds them; then the server starts again.
 *
 * Both use the served build's code (`weftRoot`'s dist/), so `--weft-root` loads with that build's store
 * and schema too.
 */
import { copyFileSync, linkSync, mkdirSync } from 'node:fs'
import path from 'node:path'
import { pathToFileURL } from 'node:url'
import { FOLDED, USAGE_FIELDS } from '../src/calls/model.js'
import type { Generated } from './backends-load.js'
import { startBackend, type BackendServer } from './backends-servers.js'

/** Calls per INSERT into ClickHouse (each a GROUP BY of two parts per call: bounds chdb's memory). */
const INSERT_CALLS = 250_000

/** A module of the served build's dist/. */
async function weftModule<T>(weftRoot: string, rel: string): Promise<T> {
  return (await import(pathToFileURL(path.join(weftRoot, 'dist', rel)).href)) as T
}

/** Waits until the server's /ready answers 200 (the embedded rollups built); returns the seconds waited. */
async function untilReady(url: string, limitS = 3600): Promise<number> {
  const t = performance.now()
  for (;;) {
    if ((await fetch(url + '/ready')).status === 200) return (performance.now() - t) / 1000
    if (performance.now() - t > limitS * 1000) throw new Error(`${url} not ready after ${limitS} s`)
    await new Promise((r) => setTimeout(r, 500))
  }
}

export interface DirectLoad {
  server: BackendServer
  /** Seconds per step, and their sum (`total_s`: what the load column reports). */
  steps: Record<string, number>
  total_s: number
}

const secs = (ms: number) => Math.round(ms) / 1000

/** embedded: link the generated segments into `dataDir/calls`, compact with the store, start, wait for the rollups. */
export async function directEmbedded(weftRoot: string, g: Generated, dataDir: string, key: string): Promise<DirectLoad> {
  const t0 = performance.now()
  const calls = path.join(dataDir, 'calls')
  mkdirSync(calls, { recursive: true })
  // Linked, not copied: segments are never written after they are made, and compaction unlinks the ones it replaces.
  for (const f of g.files) linkSync(f, path.join(calls, path.basename(f)))
  copyFileSync(path.join(g.dir, 'calls', 'manifest.json'), path.join(calls, 'manifest.json'))
  const { CallStore } = await weftModule<typeof import('../src/calls/store.js')>(weftRoot, 'src/calls/store.js')
  const t1 = performance.now()
  const store = await CallStore.open(dataDir, { flushIntervalMs: 0 })
  await store.compact()
  await store.close()
  const t2 = performance.now()
  const server = await startBackend(weftRoot, 'embedded', dataDir, key)
  const rollups = await untilReady(server.url)
  const steps = { link: secs(t1 - t0), compact: secs(t2 - t1), rollups_at_start: Math.round(rollups * 1000) / 1000 }
  return { server, steps, total_s: secs(performance.now() - t0) }
}

/** A call's fields as the merge folds them (latest non-null), but usage, which comes from the end part. */
const CALL_COLUMNS = FOLDED.filter((c) => c !== 'usage')
const USAGE_TYPE = `Array(Tuple(model String, ${USAGE_FIELDS.map((f) => `${f} Nullable(Int64)`).join(', ')}))`

/**
 * One call_parts row per call of a seq range of a generated file: its parts folded as foldParts folds a
 * batch (each field the latest non-null by seq, ref lists united, the latest delete; `merged` when there
 * were two), the usage rows the end part's (as ingest's usageRows makes them from its summary). The
 * aggregates are named as the columns they fold, so names mean the file's columns (prefer_column_name_to_alias).
 */
function foldedInsert(database: string, file: string, lo: number, hi: number): string {
  const latest = CALL_COLUMNS.map((c) => `argMaxIf(${c}, seq, ${c} IS NOT NULL) AS ${c}`).join(',\n    ')
  const refs = (c: string) => `arrayDistinct(arrayFlatten(groupArray(ifNull(${c}, [])))) AS ${c}`
  return `INSERT INTO ${database}.call_parts (project_id, id, seq, kind, ${CALL_COLUMNS.join(', ')}, deleted_at, input_refs, output_refs, usage)
  SELECT project_id, id, toUInt64(max(seq)) AS seq, if(count() > 1, 'merged', any(kind)) AS kind,
    ${latest},
    max(deleted_at) AS deleted_at, ${refs('input_refs')}, ${refs('output_refs')},
    CAST(argMaxIf(usage, seq, notEmpty(ifNull(usage, []))), '${USAGE_TYPE}') AS usage
  FROM file('${file.replaceAll("'", "\\'")}', Parquet)
  WHERE seq >= ${lo} AND seq <= ${hi}
  GROUP BY project_id, id
  SETTINGS prefer_column_name_to_alias = 1`
}

/** chdb: migrations by a first start, the folded parts inserted with the server stopped, then started again. */
export async function directChdb(weftRoot: string, g: Generated, dataDir: string, key: string, chdbFrom: string[]): Promise<DirectLoad> {
  const t0 = performance.now()
  await (await startBackend(weftRoot, 'chdb', dataDir, key)).stop()
  const t1 = performance.now()
  const { ChdbExecutor } = await weftModule<typeof import('../src/clickhouse/chdb-executor.js')>(
    weftRoot,
    'src/clickhouse/chdb-executor.js',
  )
  const exec = await ChdbExecutor.open({ path: path.join(dataDir, 'chdb'), resolveFrom: chdbFrom })
  try {
    for (const s of g.segments)
      for (let lo = s.min_seq; lo <= s.max_seq; lo += 2 * INSERT_CALLS)
        await exec.command(foldedInsert('weft', s.file, lo, Math.min(s.max_seq, lo + 2 * INSERT_CALLS - 1)))
  } finally {
    await exec.close()
  }
  const t2 = performance.now()
  const server = await startBackend(weftRoot, 'chdb', dataDir, key)
  const steps = { migrate: secs(t1 - t0), insert: secs(t2 - t1), restart: secs(performance.now() - t2) }
  return { server, steps, total_s: secs(performance.now() - t0) }
}
