import fs from 'node:fs/promises'
import path from 'node:path'
import { PARQUET, fileStats, refreshView, sqlPath } from './parquet.js'
import { fileName, fsyncPath, writeManifest } from './segments.js'
import { walNumber, type StorageState } from './state.js'
import { Wal } from './wal.js'
import { hit } from '../../core/failpoints.js'
import { refreshNewerParts } from './page-index.js'

/**
 * Moves the tail into a new Parquet segment; false when there was nothing to move. Steps, each safe
 * to crash after: (1) new appends go to a fresh log, listed in the manifest next to the old ones;
 * (2) the parts of the old logs are written to a segment file, fsynced; (3) the manifest swaps the
 * old logs for the segment; (4) the old logs are deleted. A restart replays whatever logs the
 * manifest lists.
 */
export async function flushTail(s: StorageState): Promise<boolean> {
  if (s.tail.rows === 0 || s.closed) return false
  if (s.tail.failure) throw s.tail.failedError()
  const oldWals = await switchLog(s)
  hit('flush.after-switch')
  // Every batch logged in the old logs is in the tail before the tail is copied.
  await s.tail.settled(oldWals.map(walNumber))
  // A batch of these logs that missed the tail would be dropped with them: keep the logs (both stay listed).
  if (s.tail.failure) throw s.tail.failedError()
  const gens = oldWals.map(walNumber).join(', ')
  const segName = fileName('seg', s.manifest.next_file++)
  const segPath = path.join(s.dir, segName)
  const tmp = segPath + '.tmp'
  hit('flush.before-copy')
  await s.maint.run(
    `COPY (SELECT * EXCLUDE (wal_gen) FROM call_parts WHERE wal_gen IN (${gens}) ORDER BY project_id, id, seq) TO ${sqlPath(tmp)} (${PARQUET})`,
  )
  hit('flush.after-copy')
  await fsyncPath(tmp)
  await fs.rename(tmp, segPath)
  await fsyncPath(s.dir)
  hit('flush.after-rename')
  const stats = await fileStats(s.maint, segPath)
  const bytes = (await fs.stat(segPath)).size
  const empty = stats.n === 0
  if (empty) await fs.rm(segPath, { force: true })
  s.manifest = {
    ...s.manifest,
    segments: empty
      ? s.manifest.segments
      : [...s.manifest.segments, { file: segName, rows: stats.n, min_seq: stats.lo, max_seq: stats.hi, bytes }],
    wals: s.manifest.wals.filter((w) => !oldWals.includes(w)),
  }
  await writeManifest(s.dir, s.manifest)
  hit('flush.after-manifest')
  await refreshView(s.maint, s.dir, s.manifest.segments)
  await refreshNewerParts(s.maint, s.dir, s.manifest.segments)
  await s.tail.drop(oldWals.map(walNumber))
  s.tail.dropped(oldWals.map(walNumber))
  for (const w of oldWals) await fs.rm(path.join(s.dir, w), { force: true })
  hit('flush.after-wal-delete')
  return true
}

/** Step (1): new appends go to a fresh log, listed after the old ones; returns the old logs. */
async function switchLog(s: StorageState): Promise<string[]> {
  const oldWals = [...s.manifest.wals]
  const newWal = fileName('wal', s.manifest.next_file++)
  const previous = s.wal
  const next = (await Wal.open(path.join(s.dir, newWal))).wal
  // Listed before it takes appends: a record acknowledged from a log the manifest does not name yet would be
  // removed, as a stray file, by a start after a crash here (the crash matrix lost calls this way).
  await writeManifest(s.dir, { ...s.manifest, wals: [...oldWals, newWal] })
  // The manifest as it is now: a compaction's fold names its files from it meanwhile (next_file; compact.ts).
  s.manifest = { ...s.manifest, wals: [...oldWals, newWal] }
  s.wal = next
  await previous.close()
  return oldWals
}
