import fs from 'node:fs/promises'
import path from 'node:path'
import zlib from 'node:zlib'
import { hit } from '../../core/failpoints.js'

/**
 * The write-ahead log. A record is `u32 length | u32 crc32 | payload`, little-endian. Appends are
 * group-committed: every append waiting while a write+fdatasync is in flight goes out in the next
 * single writev+fdatasync, so durability costs one sync per group, not per request. An append's
 * promise resolves only after its bytes are synced: that is when a write may be acknowledged.
 */
export class Wal {
  private pending: { buf: Buffer; resolve: () => void; reject: (e: unknown) => void }[] = []
  private flushing = false
  private failed: unknown = null
  private size: number

  private constructor(
    private readonly fh: fs.FileHandle,
    readonly file: string,
    size: number,
  ) {
    this.size = size
  }

  /**
   * Opens (creating) the log and returns every intact record in order. A torn tail — a crash in the
   * middle of a write, which was therefore never acknowledged — is cut off. A damaged record with intact
   * records after it (a flipped bit, not a crash: those records were acknowledged) is handed to `quarantine`
   * and left out, and the log is rewritten without it; the records after it are kept.
   */
  static async open(file: string, quarantine?: (damaged: Buffer[]) => Promise<void>): Promise<OpenedWal> {
    await fs.mkdir(path.dirname(file), { recursive: true })
    const data = await fs.readFile(file).catch((e: NodeJS.ErrnoException) => (e.code === 'ENOENT' ? Buffer.alloc(0) : Promise.reject(e)))
    const { records, damaged, end } = scan(data)
    if (damaged.length) {
      await quarantine?.(damaged)
      await rewrite(file, records)
      const fh = await fs.open(file, 'a+')
      const size = records.reduce((a, r) => a + 8 + r.length, 0)
      return { wal: new Wal(fh, file, size), records, truncatedBytes: data.length - end, damaged }
    }
    const fh = await fs.open(file, 'a+')
    const truncatedBytes = data.length - end
    if (truncatedBytes > 0) {
      await fh.truncate(end)
      await fh.datasync()
    }
    return { wal: new Wal(fh, file, end), records, truncatedBytes, damaged }
  }

  get bytes(): number {
    return this.size
  }

  append(payload: Uint8Array): Promise<void> {
    return this.appendRecord(walRecord(payload))
  }

  /** Appends a record already framed by walRecord (the ingest workers frame theirs). */
  appendRecord(record: Buffer): Promise<void> {
    if (this.failed) return Promise.reject(this.failed)
    return new Promise((resolve, reject) => {
      this.pending.push({ buf: record, resolve, reject })
      if (!this.flushing) void this.flush()
    })
  }

  private async flush(): Promise<void> {
    this.flushing = true
    while (this.pending.length > 0) {
      const group = this.pending
      this.pending = []
      try {
        hit('wal.append')
        await this.fh.writev(group.map((g) => g.buf))
        await this.fh.datasync()
        for (const g of group) this.size += g.buf.length
        for (const g of group) g.resolve()
      } catch (e) {
        // After a failed write (a full disk) the file's tail is unknown: cut it back to the last synced
        // record so later appends can follow once there is room. If even that fails, refuse further
        // appends rather than acknowledge anything that might sit behind garbage.
        if (!(await this.cutBack())) this.failed = e
        for (const g of [...group, ...this.pending]) g.reject(e)
        this.pending = []
      }
    }
    this.flushing = false
  }

  private async cutBack(): Promise<boolean> {
    try {
      await this.fh.truncate(this.size)
      await this.fh.datasync()
      return true
    } catch {
      return false
    }
  }

  /** Waits for in-flight appends, then closes the file. */
  async close(): Promise<void> {
    while (this.flushing || this.pending.length > 0) await new Promise((r) => setTimeout(r, 1))
    await this.fh.close()
  }
}

export interface OpenedWal {
  wal: Wal
  records: Buffer[]
  truncatedBytes: number
  /** Damaged stretches that intact records followed: set aside, not replayed. */
  damaged: Buffer[]
}

/** The intact record at `off`, if one starts there. */
function recordAt(data: Buffer, off: number): Buffer | null {
  if (off + 8 > data.length) return null
  const len = data.readUInt32LE(off)
  // No record is empty: eight zero bytes (a file extended but never written) are no record.
  if (len === 0 || off + 8 + len > data.length) return null
  const payload = data.subarray(off + 8, off + 8 + len)
  return crc32(payload) === data.readUInt32LE(off + 4) ? payload : null
}

/**
 * Whether a payload can start at `at`: a record holds JSON (a batch of parts is an array; `{` or `[`) or Arrow (an
 * IPC stream, which opens with 0xFFFFFFFF). Binary payloads are full of small integers that read as plausible lengths, and
 * checksumming at each of them spent resync's budget within a record or two (the records after the damage were
 * then cut off as a torn tail).
 */
const payloadStart = (data: Buffer, at: number): boolean =>
  data[at] === 0x5b || data[at] === 0x7b || isArrowBatch(data.subarray(at, at + 4))

/** Whether a record's payload is Arrow (partsBatch: an IPC stream, which opens with 0xFFFFFFFF) rather than JSON (`[`). */
export const isArrowBatch = (b: Uint8Array): boolean => b.length >= 4 && b[0] === 0xff && b[1] === 0xff && b[2] === 0xff && b[3] === 0xff

/**
 * The offset after `from` where an intact record starts, or -1. The checksums tried are bounded (a few times the
 * log's size): past that the rest counts as a torn tail, as it would have before.
 */
function resync(data: Buffer, from: number): number {
  let budget = 8 * data.length
  for (let at = from; at + 8 <= data.length; at++) {
    const len = data.readUInt32LE(at)
    if (len === 0 || at + 8 + len > data.length || !payloadStart(data, at + 8)) continue
    if ((budget -= len) < 0) return -1
    if (recordAt(data, at)) return at
  }
  return -1
}

/**
 * The log's intact records, the damaged stretches between them, and where the last intact record ends. After a
 * bad record the scan looks for the next offset where an intact record starts (a false match needs a CRC-32
 * collision); when there is none the rest is a torn tail.
 */
function scan(data: Buffer): { records: Buffer[]; damaged: Buffer[]; end: number } {
  const records: Buffer[] = []
  const damaged: Buffer[] = []
  let off = 0
  let end = 0
  while (off + 8 <= data.length) {
    const payload = recordAt(data, off)
    if (payload) {
      records.push(Buffer.from(payload))
      off = end = off + 8 + payload.length
      continue
    }
    const next = resync(data, off + 1)
    if (next < 0) break
    damaged.push(Buffer.from(data.subarray(off, next)))
    off = next
  }
  return { records, damaged, end }
}

/** Replaces the log with just these records: written aside, synced, renamed over it. */
async function rewrite(file: string, records: Buffer[]): Promise<void> {
  const tmp = file + '.repair'
  const fh = await fs.open(tmp, 'w')
  try {
    await fh.writev(records.map(walRecord))
    await fh.datasync()
  } finally {
    await fh.close()
  }
  await fs.rename(tmp, file)
  const dir = await fs.open(path.dirname(file), 'r')
  try {
    await dir.sync()
  } finally {
    await dir.close()
  }
}

/** A log record: `u32 length | u32 crc32 | payload`, in one buffer of its own (so it can move between threads). */
export function walRecord(payload: Uint8Array): Buffer {
  const record = Buffer.allocUnsafeSlow(8 + payload.byteLength)
  record.writeUInt32LE(payload.byteLength, 0)
  record.writeUInt32LE(crc32(payload), 4)
  record.set(payload, 8)
  return record
}

export class WalLockedError extends Error {}

/**
 * One writer per log: two processes appending to the same file would interleave records. The lock
 * file holds the owner's pid; a lock whose process is gone (a crash, SIGKILL) is taken over.
 */
export async function takeLock(lock: string): Promise<void> {
  for (let attempt = 0; attempt < 2; attempt++) {
    try {
      await fs.writeFile(lock, String(process.pid), { flag: 'wx' })
      return
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code !== 'EEXIST') throw e
    }
    const owner = Number((await fs.readFile(lock, 'utf8').catch(() => '')).trim())
    if (owner && alive(owner)) {
      throw new WalLockedError(`${lock} is held by process ${owner}: another weft process owns this data directory`)
    }
    await fs.rm(lock, { force: true })
  }
  throw new WalLockedError(`could not take ${lock}`)
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0)
    return true
  } catch (e) {
    return (e as NodeJS.ErrnoException).code === 'EPERM'
  }
}

/** CRC-32 (IEEE), native (node:zlib, Node >= 20.15). */
export function crc32(buf: Uint8Array): number {
  return zlib.crc32(buf)
}
