import fs from 'node:fs/promises'
import path from 'node:path'
import { DuckDBInstance, type DuckDBConnection } from '@duckdb/node-api'
import { cleanSpill, duckdbMemorySettings, reportMemory, spillDir } from '../../core/duckdb-memory.js'
import { progress, type Task } from '../../core/progress.js'
import { CHECKSUMS, damagedSegment, recordSegments, verifySegments } from './checksums.js'
import { withDefaults, type StoreOptions } from './options.js'
import { attachPageIndex, ensurePageIndex } from './page-index.js'
import { refreshView, segmentFiles } from './parquet.js'
import {
  MANIFEST as MANIFEST_FILE,
  checkName,
  fileName,
  fsyncPath,
  ownFiles,
  readManifest,
  writeManifest,
  type Manifest,
} from './segments.js'
import { walNumber } from './state.js'
import { Storage, type Recovered } from './storage.js'
import { Tail } from './tail.js'
import { Wal, isArrowBatch, takeLock, walRecord } from './wal.js'

/** Log records a replay could not add to the tail, kept (framed as in the log) rather than lost or blocking starts. */
const QUARANTINE = 'quarantine.log'

/**
 * Opens (creating) the calls directory of a data directory: takes its lock, reads the manifest,
 * removes files it does not name, and replays every log it still lists into the tail.
 */
export async function openStorage(dataDir: string, options: StoreOptions = {}): Promise<Storage> {
  const opts = withDefaults(options)
  const dir = path.join(dataDir, 'calls')
  const manifest = await openDir(dir)
  await verifySegments(dir, manifest.segments)
  // Held to its share of the budget: without a limit DuckDB takes up to 80 % of RAM (the soak reached 18 GB).
  const spill = spillDir(dataDir, 'calls')
  await cleanSpill(spill)
  // The reader threads' spill (they start with the first pooled export; see CallStore.startReaders), the block-file
  // writer's (block-file-writer.ts) and the compactions' folds' (compact.ts foldSegments).
  for (const role of ['readers', 'blocks', 'compaction'] as const) await fs.rm(spillDir(dataDir, role), { recursive: true, force: true })
  const db = await DuckDBInstance.create(':memory:', {
    ...duckdbMemorySettings(opts.memoryLimit, 'calls', spill),
    // A flush takes its parts out of the tail by rebuilding the table (Tail.drop), not by deleting, since deleted
    // rows are freed only at a checkpoint; the threshold still bounds what any other change leaves dead.
    checkpoint_threshold: `${Math.max(1, Math.floor(opts.flushBytes / 2 ** 20))}MiB`,
  })
  reportMemory('calls', db)
  const writer = await db.connect()
  // Segment files never change once named (names are never reused): their footers can be cached,
  // which saves re-reading ten footers for every query of a large store.
  await writer.run('SET GLOBAL parquet_metadata_cache = true')
  // DuckDB keeps its own copy of the Parquet bytes it reads (external file cache): for local files the OS page cache
  // holds them already, and the copy grew by the segments read, ~6 MiB a minute in a 30-minute soak (185 MiB at the
  // end). Reads over a 1M-call store took the same time without it (pages 19-30 ms, a 3-day scan 184-250 ms).
  await writer.run('SET GLOBAL enable_external_file_cache = false')
  // The tail's group files (see Tail.moveNow) sit beside DuckDB's spill, under the data directory.
  const tail = await Tail.create(writer, path.join(path.dirname(spill), 'calls-tail'), await db.connect())
  const maint = await db.connect()
  const recovered: Recovered = { records: 0, parts: 0, truncatedBytes: 0, segments: manifest.segments.length, quarantined: 0 }
  // Replay every log the manifest still lists; only the last one takes appends.
  const logs: { wal: Wal; records: Buffer[] }[] = []
  for (const name of manifest.wals) {
    const file = path.join(dir, checkName(name))
    const opened = await Wal.open(file, (damaged) => quarantineDamage(dir, file, damaged))
    logs.push(opened)
    recovered.truncatedBytes += opened.truncatedBytes
    recovered.quarantined += opened.damaged.length
  }
  for (const l of logs.slice(0, -1)) await l.wal.close()
  const storage = new Storage(dir, manifest, logs[logs.length - 1]!.wal, db, writer, maint, tail, opts, recovered)
  storage.seq = BigInt(manifest.segments.reduce((m, seg) => Math.max(m, seg.max_seq), 0))
  await refreshView(maint, dir, manifest.segments).catch((e: Error) => namedFailure(maint, dir, manifest, e))
  storage.onSegments(() => recordSegments(dir, storage.manifest.segments))
  // A tail insert out of memory retries after a checkpoint (see Tail.moveRetrying).
  tail.relieve = () => maint.run('CHECKPOINT').then(() => {})
  // A compacted segment without a readable page index gets one in the background; until then pages merge.
  if ((await attachPageIndex(maint, dir, manifest.segments)).length) void storage.exclusive(() => ensurePageIndex(storage)).catch(() => {})
  // A start with 100M parts in its logs takes minutes: it reports how far it is (and /ready waits for it).
  const total = logs.reduce((a, l) => a + l.records.length, 0)
  const task = progress.start('calls log replay', { total, unit: 'records', warming: true, fields: { logs: logs.length } })
  await task.run(async () => {
    for (const [i, l] of logs.entries()) await replay(storage, walNumber(manifest.wals[i]!), l.records, task)
  })
  storage.startTimer()
  return storage
}

/** The directory locked and its manifest (a new one for a new directory), with stray files removed. */
async function openDir(dir: string): Promise<Manifest> {
  await fs.mkdir(dir, { recursive: true })
  await takeLock(path.join(dir, 'LOCK'))
  let manifest = await readManifest(dir)
  if (!manifest) {
    manifest = { version: 1, segments: [], wals: [fileName('wal', 1)], next_file: 2 }
    await writeManifest(dir, manifest)
  }
  // Files a crash left behind before the manifest named them (or after it stopped naming them).
  const live = new Set([MANIFEST_FILE, 'LOCK', QUARANTINE, CHECKSUMS, ...manifest.segments.flatMap(ownFiles), ...manifest.wals])
  for (const f of await fs.readdir(dir)) if (!live.has(f)) await fs.rm(path.join(dir, f), { force: true })
  return manifest
}

/** A view DuckDB could not build (a segment's footer it cannot read): the error names the file. */
async function namedFailure(maint: DuckDBConnection, dir: string, manifest: Manifest, e: Error): Promise<never> {
  const files = segmentFiles(dir, manifest.segments)
  for (const [i, f] of files.entries()) {
    const err = await maint.run(`SELECT count(*) FROM read_parquet(${f})`).then(
      () => null,
      (x: Error) => x,
    )
    if (err) throw damagedSegment(manifest.segments[i]!.file, `DuckDB cannot read it: ${err.message}`)
  }
  throw e
}

/** Damaged stretches of a log, kept whole in the quarantine file before the log is rewritten without them. */
async function quarantineDamage(dir: string, file: string, damaged: Buffer[]): Promise<void> {
  for (const d of damaged) await fs.appendFile(path.join(dir, QUARANTINE), walRecord(d))
  await fsyncPath(path.join(dir, QUARANTINE))
  await fsyncPath(dir)
  const bytes = damaged.reduce((a, d) => a + d.length, 0)
  process.emitWarning(
    `calls store: ${path.basename(file)} had ${damaged.length} damaged stretch(es) (${bytes} bytes) before intact records: moved to ${QUARANTINE}, the records after them kept`,
  )
}

/** Log records a replay moves into the tail in one statement (a record read alone costs a statement each). */
const REPLAY_GROUP_BYTES = 8 * 2 ** 20

/**
 * One log's records into the tail, numbered on from the storage's seq: a log's parts are numbered in a row, so
 * records go in groups (see Tail.insertRecords). A group that fails goes again record by record, so that only a
 * record DuckDB cannot read is set aside.
 */
async function replay(s: Storage, gen: number, records: Buffer[], task: Task): Promise<void> {
  for (let i = 0; i < records.length;) {
    // A group is all JSON or all Arrow (the store logs Arrow batches where it can, JSON otherwise).
    const arrow = isArrowBatch(records[i]!)
    let j = i + 1
    for (let bytes = records[i]!.length; j < records.length && bytes + records[j]!.length <= REPLAY_GROUP_BYTES; j++) {
      if (isArrowBatch(records[j]!) !== arrow) break
      bytes += records[j]!.length
    }
    const group = records.slice(i, j)
    i = j
    if (group.length > 1) {
      const n = await s.tail.insertRecords(group, s.seq + 1n, gen).catch(() => null)
      if (n !== null) {
        task.advance(group.length)
        replayed(s, gen, n, group)
        continue
      }
    }
    for (const r of group) await replayOne(s, gen, r, task)
  }
}

async function replayOne(s: Storage, gen: number, r: Buffer, task: Task): Promise<void> {
  task.advance()
  let n: number
  try {
    n = await s.tail.insert(r, s.seq + 1n, gen)
  } catch (e) {
    // A record DuckDB cannot read would stop every start: it is set aside, whole, for inspection.
    await fs.appendFile(path.join(s.dir, QUARANTINE), walRecord(r))
    await fsyncPath(path.join(s.dir, QUARANTINE))
    await fsyncPath(s.dir)
    process.emitWarning(`calls store: a logged batch DuckDB cannot read was moved to ${QUARANTINE}: ${(e as Error).message}`)
    s.tail.failure = null
    s.recovered.quarantined++
    return
  }
  replayed(s, gen, n, [r])
}

/** Counts replayed records holding n parts. */
function replayed(s: Storage, gen: number, n: number, records: Buffer[]): void {
  s.seq += BigInt(n)
  s.tail.counted(
    gen,
    n,
    records.reduce((a, r) => a + r.length + 8, 0),
  )
  s.recovered.records += records.length
  s.recovered.parts += n
}
