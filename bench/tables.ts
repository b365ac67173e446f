/**
 * Tables and objects bench (issue 14): datasets of N rows (~1 KB each) saved and read the way the Weave
 * SDKs do, against weft over HTTP and, in the same run, ClickHouse (chdb) with Weave's `tables` /
 * `table_rows` / `object_versions` schema doing Weave's server's work for the same requests.
 *
 *   npm run build && node dist/bench/tables.js [--rows 10000,1000000] [--runs 3] [--reads 20] [--row-bytes 1024]
 *     [--objects 10000] [--versions 10] [--refs 1000] [--upload digests|update]
 *   (ClickHouse: npm --prefix bench/peer-deps install; skipped when absent)
 *
 * Per size: a fresh weft server and chdb session; 10k objects × 10 versions loaded into both; then per
 * run a fresh dataset (generated, never a re-sent body) saved in the Python SDK's ~10 MB chunks — by default as
 * the SDK does with `use_parallel_table_upload` (on by default): every chunk created as a table, four at a time,
 * and the table assembled with `/table/create_from_digests` (`--upload digests`); or `/table/create` of the first
 * chunk and `/table/update` appends of the rest, the SDK's other path (`--upload update`).
 * Then, on the last run's table, alternating sides: a 100-row page by position (the middle of the
 * table), the first page sorted by a column, `/objs/query` latest_only (100 objects), and a
 * `/refs/read_batch` of 1000 dataset-row refs. Every answer is checked against the generated data and
 * between the sides. chdb runs in a child process (tables-peer-process.ts), so this process, the client timing both
 * sides, holds neither server's heap or threads. Writes bench/results/tables-<stamp>.json and .svg.
 */
import { spawnSync } from 'node:child_process'
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { isDeepStrictEqual } from 'node:util'
import { valueDigest } from '../src/catalog/digest.js'
import { parseFlags } from '../src/core/config.js'
import { ROOT_DIR, VERSION } from '../src/core/version.js'
import { sizeChart } from './chart.js'
import { spread, startWeft, type Spread } from './util.js'
import {
  chunkJson,
  datasetVal,
  expectedPage,
  expectedSorted,
  makeDataset,
  objectId,
  objectVal,
  prng,
  PROJECT,
  tableDigestOf,
  settle,
  uploadDataset,
  type Dataset,
  type Uploader,
} from './tables-data.js'
import { chdbInstalled, startPeer, type RemotePeer } from './tables-peer-process.js'
import { diskBytes, preloadObjects, rssMb, serverPid, WeftClient } from './tables-weft.js'

const { flags } = parseFlags(process.argv.slice(2))
const sizes = (flags.rows ?? '10000,1000000').split(',').map(Number)
const runs = Number(flags.runs ?? 3)
/** Timed requests per read and side; a side whose warm-up took longer than SLOW_MS gets `runs` of them instead. */
const reads = Number(flags.reads ?? 20)
const SLOW_MS = 2000
const rowBytes = Number(flags['row-bytes'] ?? 1024)
const nObjects = Number(flags.objects ?? 10000)
const nVersions = Number(flags.versions ?? 10)
const nRefs = Number(flags.refs ?? 1000)
/** Real `/obj/create` requests timed one at a time (the bulk of the objects is written into the catalog). */
const objSample = Number(flags['obj-sample'] ?? 200)
const upload = (flags.upload ?? 'digests') as 'update' | 'digests'
const PAGE = 100
const KEY = 'bench-key'
const TARGETS = { page_ms: 20, objs_ms: 20, ingest_mb_s: 50 }

type Side = 'weft' | 'clickhouse'
interface Ingester extends Uploader {
  page(table: string, offset: number, limit: number): Promise<unknown> | unknown
}

const ms = (t0: number) => performance.now() - t0
const round = (x: number, d = 1) => Math.round(x * 10 ** d) / 10 ** d
const roundSpread = (s: Spread): Spread => ({ min: round(s.min), median: round(s.median), max: round(s.max) })

function check(what: string, got: unknown, want: unknown): void {
  if (!isDeepStrictEqual(got, want)) {
    const g = JSON.stringify(got).slice(0, 400)
    const w = JSON.stringify(want).slice(0, 400)
    throw new Error(`${what}: answers differ\n  got  ${g}\n  want ${w}`)
  }
}

/** The object versions, a round of versions at a time (version v of every object, then v + 1). */
function objectRounds() {
  return Array.from({ length: nVersions }, (_, v) => {
    const rand = prng(v * 7919 + 1)
    return Array.from({ length: nObjects }, (_, k) => ({ object_id: objectId(k), val: objectVal(k, v, 1, rand) }))
  })
}

/** 10k objects × 10 versions: into weft's catalog before it starts, into ClickHouse one insert per round. */
async function loadObjects(dataDir: string, peer: RemotePeer | null) {
  const rounds = objectRounds()
  let t0 = performance.now()
  const weftDigests = await preloadObjects(dataDir, rounds)
  const t = { weft_catalog_s: round(ms(t0) / 1000, 2), clickhouse_s: 0 }
  t0 = performance.now()
  if (peer) for (const [v, objs] of rounds.entries()) check(`object digests, round ${v}`, await peer.insertObjects(objs), weftDigests[v])
  t.clickhouse_s = round(ms(t0) / 1000, 2)
  const v = nVersions - 1
  const latest = rounds[v]!.slice(0, PAGE).map((o, k) => ({
    object_id: o.object_id,
    digest: weftDigests[v]![k],
    version_index: v,
    is_latest: 1,
    base_object_class: 'Prompt',
    val: o.val,
  }))
  return { ...t, latest }
}

/** Real `/obj/create` requests, one at a time (another class, so the latest-objects query does not see them). */
async function sampleCreates(weft: WeftClient, n: number): Promise<Spread> {
  const times: number[] = []
  const rand = prng(4242)
  for (let k = 0; k < n; k++) {
    const val = { ...objectVal(k, 0, 2, rand), _type: 'Sample', _class_name: 'Sample' }
    const t0 = performance.now()
    const digest = await weft.createObject(`sample_${k}`, val)
    times.push(round(ms(t0)))
    check('sample object digest', digest, valueDigest(val))
  }
  return spread(times)
}

const pick = (o: Record<string, unknown>) => ({
  object_id: o.object_id,
  digest: o.digest,
  version_index: o.version_index,
  is_latest: o.is_latest,
  base_object_class: o.base_object_class,
  val: o.val,
})

interface SideRun {
  ingest_s: number
  mb_s: number
  first_page_ms: number
  peer_merges_waited_ms?: number
  disk_sync_ms?: number
  /** CPU seconds of weft's server, the peer's process and the bench during the ingest. */
  cpu_s?: Record<string, number>
}

/** One run: a fresh dataset saved to both sides (order alternating), then each side's first page, cold. */
/** CPU seconds a process has used so far (its threads' user and system time, /proc; 0 when it is gone). */
function cpuSeconds(pid: number): number {
  try {
    const f = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ')
    return (Number(f[11]) + Number(f[12])) / 100
  } catch {
    return 0
  }
}

async function ingestRun(r: number, n: number, sides: Partial<Record<Side, Ingester>>, peer: RemotePeer | null, serverPid: number) {
  const d = makeDataset(n, rowBytes, n + r + 1)
  const want = tableDigestOf(d.digests)
  const firstPage = expectedPage(d, 0, PAGE)
  const out: Partial<Record<Side, SideRun | { error: string }>> = {}
  const order = (Object.keys(sides) as Side[]).sort()
  if (r % 2) order.reverse()
  for (const s of order) {
    const side = sides[s]!
    try {
      side.prepare?.(d, upload)
      // Either side's ingest waits for ClickHouse's merges of the last one (its table lists grow with the square of
      // the table, ~15 GB at 3M rows), which would otherwise run on the same two cores.
      const merges = peer ? await peer.settleMerges(300_000) : null
      // And for the disk: the other side's dirty pages (chdb wrote ~15 GB over three 1M runs) written back now, not
      // during this side's fsyncs.
      const t_sync = performance.now()
      spawnSync('sync')
      const synced_ms = round(ms(t_sync))
      await settle()
      // What each process spent during this side's ingest: the other side's should be ~0 (it is idle).
      const pids = { weft_server: serverPid, peer: peer?.pid ?? 0, bench: process.pid }
      const cpu0 = Object.fromEntries(Object.entries(pids).map(([k, p]) => [k, cpuSeconds(p)]))
      const t0 = performance.now()
      const digest = await uploadDataset(side, d, upload)
      const s_ = ms(t0) / 1000
      const cpu_s = Object.fromEntries(Object.entries(pids).map(([k, p]) => [k, round(cpuSeconds(p) - cpu0[k]!, 2)]))
      check(`${s} table digest`, digest, want)
      const t1 = performance.now()
      const page = await side.page(digest, 0, PAGE)
      const first = ms(t1)
      check(`${s} first page`, page, firstPage)
      out[s] = {
        ingest_s: round(s_, 3),
        mb_s: round(d.bytes / 1e6 / s_),
        first_page_ms: round(first),
        peer_merges_waited_ms: merges?.waited_ms,
        disk_sync_ms: synced_ms,
        cpu_s,
      }
    } catch (e) {
      out[s] = { error: (e as Error).message.slice(0, 500) }
    }
    process.stdout.write(`  run ${r + 1} ${s}: ${JSON.stringify(out[s])}\n`)
  }
  return { d, table: want, out, chunks: d.chunks.length, mb: round(d.bytes / 1e6) }
}

type Case = Partial<Record<Side, () => Promise<unknown> | unknown>> & { want: unknown; normalise?: (x: unknown) => unknown }

/** Warm each side once (its answer checked), then `reads` timed requests alternating between the sides. */
async function timeCase(name: string, c: Case): Promise<Record<string, Spread>> {
  const sides = (['weft', 'clickhouse'] as Side[]).filter((s) => c[s])
  const times: Record<string, number[]> = {}
  const count: Record<string, number> = {}
  for (const s of sides) {
    const t0 = performance.now()
    const got = await c[s]!()
    // The peer's sorted page and ref batch take ~20 s each at 1M rows: 20 of them would add minutes and say nothing more.
    count[s] = ms(t0) > SLOW_MS ? Math.min(runs, reads) : reads
    check(`${name} (${s})`, c.normalise ? c.normalise(got) : got, c.want)
    times[s] = []
  }
  for (let r = 0; r < Math.max(...Object.values(count)); r++)
    for (const s of sides) {
      if (r >= count[s]!) continue
      const t0 = performance.now()
      await c[s]!()
      times[s]!.push(round(ms(t0)))
    }
  const out = Object.fromEntries(Object.entries(times).map(([k, v]) => [k, roundSpread(spread(v))]))
  process.stdout.write(
    `  ${name}: ${Object.entries(out)
      .map(([k, v]) => `${k} ${v.min}/${v.median}/${v.max} ms`)
      .join(', ')}\n`,
  )
  return out
}

/** `reads` timed requests of one side after a warm-up (the answer was checked by timeCase). */
async function timeAlone(name: string, f: () => Promise<unknown> | unknown): Promise<Spread> {
  await f()
  const times: number[] = []
  for (let r = 0; r < reads; r++) {
    const t0 = performance.now()
    await f()
    times.push(round(ms(t0)))
  }
  const out = roundSpread(spread(times))
  process.stdout.write(`  ${name}, weft alone: ${out.min}/${out.median}/${out.max} ms\n`)
  return out
}

// house: long because it is the bench's one sequence per size (start, load, runs, reads, costs), clearer whole
async function benchSize(n: number, chdb: boolean) {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'weft-tables-'))
  const chDir = mkdtempSync(path.join(os.tmpdir(), 'weft-tables-chdb-'))
  const peer = chdb ? await startPeer(chDir) : null
  let peerOpen = peer !== null
  const objLoad = await loadObjects(dir, peer)
  const server = await startWeft({ root: ROOT_DIR, dataDir: dir, key: KEY, env: { WEFT_ACCESS_LOG: 'false' } })
  const pid = serverPid(dir)
  const weft = new WeftClient(server.url, KEY)
  const result: Record<string, unknown> = { rows: n }
  try {
    const { latest: _latest, ...loadTimes } = objLoad
    const http_obj_create_ms = await sampleCreates(weft, objSample)
    result.objects_load = { objects: nObjects, versions: nVersions, ...loadTimes, http_obj_create_ms }
    process.stdout.write(`  objects loaded: ${JSON.stringify(result.objects_load)}\n`)

    const sides: Partial<Record<Side, Ingester>> = {
      weft: {
        prepare: (d, mode) => weft.prepare(d, mode),
        create: (c) => weft.create(c),
        append: (b, c) => weft.append(b, c),
        fromDigests: (d) => weft.fromDigests(d),
        page: (t, o, l) => weft.page(t, o, l),
      },
    }
    if (peer)
      sides.clickhouse = {
        create: (c) => peer.create(chunkJson(c)),
        append: (b, c) => peer.append(b, chunkJson(c)),
        fromDigests: async (d) => {
          const digest = tableDigestOf(d)
          await peer.insertTableOnly(digest, d)
          return { digest }
        },
        page: (t, o, l) => peer.page(t, o, l),
      }
    const ingests = []
    let last: Awaited<ReturnType<typeof ingestRun>> | null = null
    for (let r = 0; r < runs; r++) {
      last = await ingestRun(r, n, sides, peer, pid ?? server.pid)
      ingests.push({ chunks: last.chunks, mb: last.mb, ...last.out })
    }
    result.ingest = { upload, runs: ingests, ...ingestSpread(ingests) }
    const d = last!.d
    const table = last!.table
    const weftOk = !ingests.some((x) => x.weft && 'error' in x.weft)

    // The dataset object a row ref goes through.
    const ds = datasetVal(table)
    const dsDigest = await weft.createObject('bench_dataset', ds)
    if (peer) check('dataset digest', (await peer.insertObjects([{ object_id: 'bench_dataset', val: ds }]))[0], dsDigest)
    const rand = prng(n)
    const refIdx = Array.from({ length: nRefs }, () => Math.floor(rand() * n))
    const refs = refIdx.map((i) => `weave:///${PROJECT}/object/bench_dataset:${dsDigest}/attr/rows/id/${d.digests[i]}`)
    const mid = Math.floor(n / 2)
    if (peer) {
      // What a call to the peer's process costs beyond the call itself (its reads are timed from here, like weft's).
      result.peer_ipc_ms = roundSpread(spread(await peer.ipcMs(reads)))
      result.peer_merges_before_reads = await peer.settleMerges(300_000)
      const t_sync = performance.now()
      spawnSync('sync')
      result.disk_sync_before_reads_ms = round(ms(t_sync))
      process.stdout.write(`  peer merges before the reads: ${JSON.stringify(result.peer_merges_before_reads)}\n`)
    }
    const cases: Record<string, Case> = {
      page_by_position: {
        weft: () => weft.page(table, mid, PAGE),
        clickhouse: peer ? () => peer.page(table, mid, PAGE) : undefined,
        want: expectedPage(d, mid, PAGE),
      },
      page_sorted_by_column: {
        weft: () => weft.sortedPage(table, PAGE),
        clickhouse: peer ? () => peer.sortedPage(table, PAGE) : undefined,
        want: expectedSorted(d, PAGE),
      },
      objs_query_latest: {
        weft: () => weft.latestObjects(PAGE),
        clickhouse: peer ? () => peer.latestObjects(PAGE) : undefined,
        want: objLoad.latest,
        normalise: (x) => (x as Record<string, unknown>[]).map(pick),
      },
      refs_read_batch: {
        weft: () => weft.readRefs(refs),
        clickhouse: peer ? () => peer.readRefs(refs) : undefined,
        want: refIdx.map((i) => d.row(i)),
      },
    }
    for (const [name, c] of Object.entries(cases)) {
      // weft has no table when its ingest failed (over its row bound at 1M): the table reads run on the peer only.
      if (!weftOk && name !== 'objs_query_latest') delete c.weft
      try {
        const s = await timeCase(name, c)
        const ratio = s.weft && s.clickhouse ? round(s.weft.median / s.clickhouse.median, 3) : null
        result[name] = { ms: s, weft_over_clickhouse: ratio }
      } catch (e) {
        result[name] = { error: (e as Error).message.slice(0, 500) }
        process.stdout.write(`  ${name}: ${(e as Error).message} ${String((e as Error).cause ?? '')}\n`)
      }
    }
    const rss = rssMb(pid)
    result.costs = { weft_peak_rss_mb: rss?.peak ?? null, weft_rss_mb: rss?.now ?? null }
    if (peer) {
      // The same reads of weft again with the peer's process gone: it shares the two cores (its merges, its threads).
      await peer.close()
      peerOpen = false
      for (const [name, c] of Object.entries(cases)) {
        const r = result[name] as { ms?: Record<string, Spread>; weft_alone_ms?: Spread }
        if (c.weft && r.ms?.weft) r.weft_alone_ms = await timeAlone(name, c.weft)
      }
    }
  } finally {
    weft.close()
    await server.stop()
    if (peerOpen) await peer?.close()
  }
  // After a clean stop the catalog is checkpointed: its file is what the data costs on disk.
  const costs = result.costs as Record<string, unknown>
  costs.weft_catalog_bytes = diskBytes(path.join(dir, 'catalog.duckdb')) + diskBytes(path.join(dir, 'catalog.duckdb.wal'))
  costs.clickhouse_disk_bytes = chdb ? diskBytes(chDir) : null
  costs.stored_rows = n * runs
  process.stdout.write(`  costs: ${JSON.stringify(costs)}\n`)
  rmSync(dir, { recursive: true, force: true })
  rmSync(chDir, { recursive: true, force: true })
  return result
}

function ingestSpread(ingests: Partial<Record<Side, SideRun | { error: string }>>[]) {
  const out: Record<string, unknown> = {}
  for (const s of ['weft', 'clickhouse'] as Side[]) {
    const ok = ingests.map((x) => x[s]).filter((x): x is SideRun => !!x && !('error' in x))
    if (!ok.length) continue
    out[`${s}_mb_s`] = roundSpread(spread(ok.map((x) => x.mb_s)))
    out[`${s}_first_page_ms`] = roundSpread(spread(ok.map((x) => x.first_page_ms)))
  }
  return out
}

async function main(): Promise<void> {
  const chdb = chdbInstalled()
  if (!chdb) process.stdout.write('chdb not installed (npm --prefix bench/peer-deps install): ClickHouse peer skipped\n')
  const results: Record<string, unknown> = {}
  for (const n of sizes) {
    process.stdout.write(`${n} rows (~${rowBytes} B each), ${runs} runs, ${reads} reads, upload ${upload}\n`)
    results[String(n)] = await benchSize(n, chdb)
  }
  const stamp = new Date().toISOString().replace(/[:.]/g, '-')
  const outDir = path.join(ROOT_DIR, 'bench', 'results')
  mkdirSync(outDir, { recursive: true })
  const base = path.join(outDir, `tables-${stamp}`)
  const setup = {
    runs,
    reads,
    reads_when_slow: Math.min(runs, reads),
    row_bytes: rowBytes,
    objects: nObjects,
    versions: nVersions,
    refs: nRefs,
    upload,
    page_rows: PAGE,
    targets: TARGETS,
    peer: "ClickHouse (chdb, in a child process) with Weave's tables / table_rows / object_versions schema and query shapes",
  }
  const machine = { cpus: os.cpus().length, model: os.cpus()[0]?.model, node: process.version }
  writeFileSync(
    base + '.json',
    JSON.stringify({ bench: 'tables', weft_version: VERSION, date: new Date().toISOString(), machine, setup, results }, null, 2) + '\n',
  )
  writeFileSync(base + '.svg', chart(results))
  process.stdout.write(`wrote ${base}.json and .svg\n`)
}

function chart(results: Record<string, unknown>): string {
  const label = (n: number) => (n >= 1e6 ? `${n / 1e6}M` : `${n / 1e3}k`)
  const med = (n: number, k: string, s: Side): number | null => {
    const r = results[String(n)] as Record<string, { ms?: Record<string, Spread> } & Record<string, unknown>>
    if (k === 'ingest') return (r.ingest?.[`${s}_mb_s`] as Spread | undefined)?.median ?? null
    return r[k]?.ms?.[s]?.median ?? null
  }
  const panels = [
    ['ingest', 'table/create MB/s (target ≥ 50)'],
    ['page_by_position', '100-row page ms (target ≤ 20)'],
    ['page_sorted_by_column', 'sorted page ms'],
    ['objs_query_latest', 'objs/query latest ms (target ≤ 20)'],
    ['refs_read_batch', '1000 row refs ms'],
  ].map(([k, title]) => ({
    title: title!,
    series: (['weft', 'clickhouse'] as Side[]).map((s) => ({
      label: s === 'weft' ? 'weft' : 'ClickHouse (chdb)',
      values: sizes.map((n) => med(n, k!, s)),
    })),
  }))
  return sizeChart(`weft ${VERSION} tables and objects against ClickHouse (medians; log scale)`, sizes.map(label), panels, (v) => String(v))
}

await main()
