import { createHash } from 'node:crypto'
import fs from 'node:fs/promises'
import path from 'node:path'

/**
 * DuckDB stops replaying its log at the first entry it cannot read and, when that entry is the last one, takes it
 * for a write torn by a crash: it drops it without a word, though the write was committed and acknowledged. So
 * after each commit the stretch of `catalog.duckdb.wal` it added is recorded in a sidecar (offset, end, SHA-256;
 * one line, fsynced before the write is acknowledged), and a start checks every recorded stretch before DuckDB
 * opens the file. Bytes past the last recorded end were never acknowledged: DuckDB's torn-tail rule is right for
 * them. A checkpoint empties the log; the sidecar then starts again from the log's new bytes.
 */
export const SIDECAR_SUFFIX = '.wal.sums'

interface Stretch {
  from: number
  to: number
  sha256: string
}

const LINE = /^(\d{1,15}) (\d{1,15}) ([0-9a-f]{64})$/

function parse(text: string): Stretch[] {
  const out: Stretch[] = []
  // A last line cut by a crash belongs to a commit that was never acknowledged: skipped.
  for (const line of text.split('\n')) {
    const m = LINE.exec(line)
    if (m) out.push({ from: Number(m[1]), to: Number(m[2]), sha256: m[3]! })
  }
  return out
}

async function sizeOf(file: string): Promise<number> {
  return (await fs.stat(file).catch(() => ({ size: 0 }))).size
}

/** Bytes read at a time when hashing a stretch of the log. */
const READ_BYTES = 4 << 20

async function hashRange(
  fh: fs.FileHandle,
  from: number,
  to: number,
  buf = Buffer.allocUnsafe(Math.min(READ_BYTES, Math.max(1, to - from))),
): Promise<string> {
  const h = createHash('sha256')
  for (let at = from; at < to;) {
    const { bytesRead } = await fh.read(buf, 0, Math.min(buf.length, to - at), at)
    if (bytesRead === 0) break
    h.update(buf.subarray(0, bytesRead))
    at += bytesRead
  }
  return h.digest('hex')
}

/**
 * Checks the catalog's log against its sidecar before DuckDB opens it; throws naming the log when a recorded
 * stretch is missing or its bytes differ. No log (a clean stop checkpointed it): nothing to check.
 */
export async function checkCatalogWal(dbFile: string): Promise<void> {
  const wal = dbFile + '.wal'
  const size = await sizeOf(wal)
  if (size === 0) return
  const stretches = parse(await fs.readFile(dbFile + SIDECAR_SUFFIX, 'utf8').catch(() => ''))
  if (stretches.length === 0) return
  const fh = await fs.open(wal, 'r')
  try {
    for (const s of stretches) {
      const why =
        s.to > size
          ? `it is ${size} bytes, shorter than the ${s.to} bytes acknowledged writes reached`
          : (await hashRange(fh, s.from, s.to)) !== s.sha256
            ? `bytes ${s.from}–${s.to} (acknowledged catalog writes) differ from what was written`
            : null
      if (why) {
        throw new Error(
          `catalog log ${wal} is damaged: ${why}. DuckDB would drop those writes silently. Restore the data directory ` +
            `from a backup, or move ${path.basename(wal)} and ${path.basename(dbFile + SIDECAR_SUFFIX)} away to start ` +
            `from the last checkpoint (losing the catalog writes since).`,
        )
      }
    }
  } finally {
    await fh.close()
  }
}

/** Records, after each commit, the stretch of the log the commit added. */
export class WalGuard {
  /** The log's size at the last record; -1 until the first one of this process. */
  private end = -1
  /**
   * Reused for every commit's stretch (a 10 MB table chunk's commit is ~10 MB of log): a fresh buffer each time
   * cost first touches of its pages.
   */
  private readonly buf = Buffer.allocUnsafe(READ_BYTES)

  private constructor(
    private readonly wal: string,
    private readonly sidecar: string,
    private fh: fs.FileHandle,
  ) {}

  static async open(dbFile: string): Promise<WalGuard> {
    const sidecar = dbFile + SIDECAR_SUFFIX
    return new WalGuard(dbFile + '.wal', sidecar, await fs.open(sidecar, 'a'))
  }

  /** Call after a COMMIT returned and before the write is acknowledged; commits are serialised by the caller. */
  async record(): Promise<void> {
    const size = await sizeOf(this.wal)
    if (size === this.end) return
    const fh = await fs.open(this.wal, 'r').catch(() => null)
    if (this.end < 0 || size < this.end) {
      // First commit of this process (DuckDB may have cut a torn tail) or a checkpoint emptied the log: start over.
      const line = size > 0 && fh ? `0 ${size} ${await hashRange(fh, 0, size, this.buf)}\n` : ''
      await fh?.close()
      await this.rewrite(line)
    } else {
      const line = `${this.end} ${size} ${await hashRange(fh!, this.end, size, this.buf)}\n`
      await fh?.close()
      await this.fh.write(line)
      await this.fh.datasync()
    }
    this.end = size
  }

  private async rewrite(text: string): Promise<void> {
    const tmp = this.sidecar + '.tmp'
    await fs.writeFile(tmp, text, { flush: true })
    await fs.rename(tmp, this.sidecar)
    const dir = await fs.open(path.dirname(this.sidecar), 'r')
    await dir.sync().finally(() => dir.close())
    await this.fh.close()
    this.fh = await fs.open(this.sidecar, 'a')
  }

  /** After the closing checkpoint: the log is folded into the file, so the sums are empty again. */
  async close(): Promise<void> {
    if ((await sizeOf(this.wal)) === 0) await this.rewrite('').catch(() => {})
    await this.fh.close()
  }
}
