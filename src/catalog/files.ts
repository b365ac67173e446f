import { createHash, randomUUID } from 'node:crypto'
import fs from 'node:fs/promises'
import path from 'node:path'
import type { FilesBackend, Staged, StoredFile } from './backends.js'

export type { Staged, StoredFile } from './backends.js'
import type { Catalog } from './db.js'
import { digestOfSha256 } from './digest.js'
import { DomainError } from '../core/errors.js'
import { hit } from '../core/failpoints.js'

/**
 * Files (docs/objects.md#files): the bytes live under `<data dir>/files/<project hash>/<digest>`, one file per
 * content, and the catalog's `files` table keeps one row per (project, digest) with the size and creation time.
 * Bytes on disk can be streamed in and out with backpressure; as BLOBs in DuckDB each would be held whole in
 * memory, several times over, on every write and read (docs/on-disk.md says what was measured).
 */
export const FILES_DIR = 'files'
const TMP_DIR = 'tmp'
/** What `digestBytes` produces; nothing else is ever used as a file name. */
const DIGEST = /^[A-Za-z0-9]{43}$/
const READ_CHUNK = 256 * 1024

/** Makes a rename or a new directory entry durable: fsync the directory holding it. */
async function syncDir(dir: string): Promise<void> {
  const fh = await fs.open(dir, 'r')
  try {
    await fh.sync()
  } finally {
    await fh.close()
  }
}

/** A full disk is the operator's problem, not a server bug: say so with 507. */
function storageError(e: unknown): unknown {
  const code = (e as NodeJS.ErrnoException).code
  if (code === 'ENOSPC' || code === 'EDQUOT') return new DomainError(507, 'Not enough disk space to store the file')
  return e
}

async function* once(b: Buffer): AsyncGenerator<Buffer> {
  yield b
}

/**
 * Writes `chunks` to a new file in `tmpDir` while hashing them, then fsyncs it; throws (and leaves nothing behind)
 * if the chunks do. Both file stores stage uploads so (this one and clickhouse/files.ts).
 */
export async function stageFile(tmpDir: string, chunks: AsyncIterable<Uint8Array> | Iterable<Uint8Array>): Promise<Staged> {
  const tmp = path.join(tmpDir, randomUUID())
  const hash = createHash('sha256')
  let size = 0
  let fh: fs.FileHandle | undefined
  try {
    fh = await fs.open(tmp, 'wx', 0o644)
    for await (const chunk of chunks) {
      hash.update(chunk)
      size += chunk.byteLength
      for (let at = 0; at < chunk.byteLength;) at += (await fh.write(chunk, at)).bytesWritten
    }
    await fh.sync()
    await fh.close()
    fh = undefined
  } catch (e) {
    await fh?.close().catch(() => {})
    await fs.rm(tmp, { force: true })
    throw storageError(e)
  }
  return { tmp, digest: digestOfSha256(hash.digest()), size }
}
/** Stages, commits and cleans up: a file from bytes the server has (op code), on either store. */
export async function putFile(
  files: FilesBackend,
  projectId: string,
  chunks: AsyncIterable<Uint8Array> | Iterable<Uint8Array>,
): Promise<string> {
  const staged = await files.stage(chunks)
  try {
    await files.commit(projectId, staged)
  } finally {
    await files.discard(staged)
  }
  return staged.digest
}

/** The whole file in memory, for callers that need it so (op code, small files); null if unknown. */
export async function readWholeFile(files: FilesBackend, projectId: string, digest: string): Promise<Buffer | null> {
  const f = await files.open(projectId, digest)
  if (!f) return null
  const parts: Buffer[] = []
  for await (const c of f.chunks) parts.push(c)
  return Buffer.concat(parts)
}

const stores = new WeakMap<Catalog, FileStore>()

export class FileStore implements FilesBackend {
  private readonly root: string
  private readonly tmpDir: string
  /** Directories made and carried-over bytes written before the first use (see prepare()). */
  private readonly ready: Promise<void>

  private constructor(private readonly catalog: Catalog) {
    this.root = path.join(path.dirname(catalog.file), FILES_DIR)
    this.tmpDir = path.join(this.root, TMP_DIR)
    this.ready = this.prepare()
    // Every use awaits `ready` and sees the failure there.
    this.ready.catch(() => {})
  }

  /** The catalog's store once prepared (a failure to prepare fails the caller: the server's start). */
  static async open(catalog: Catalog): Promise<FileStore> {
    const s = FileStore.of(catalog)
    await s.ready
    return s
  }

  /** One store per catalog, so preparation and carrying over happen once. */
  static of(catalog: Catalog): FileStore {
    let s = stores.get(catalog)
    if (!s) stores.set(catalog, (s = new FileStore(catalog)))
    return s
  }

  /**
   * Writes `chunks` to a new temporary file while hashing them, then fsyncs it. Throws (and leaves nothing
   * behind) if the chunks do; the caller then commits or discards the result.
   */
  async stage(chunks: AsyncIterable<Uint8Array> | Iterable<Uint8Array>): Promise<Staged> {
    await this.ready
    return this.writeTemp(chunks)
  }

  private writeTemp(chunks: AsyncIterable<Uint8Array> | Iterable<Uint8Array>): Promise<Staged> {
    return stageFile(this.tmpDir, chunks)
  }

  /**
   * Makes staged bytes the project's file of that digest: renamed into place (atomic: a reader sees the whole
   * file or none), the directory fsynced, and only then the catalog row written, so a row always has its bytes.
   * A crash in between leaves a file with no row, which the next upload of the same content takes over.
   */
  async commit(projectId: string, staged: Staged): Promise<void> {
    const dir = this.projectDir(projectId)
    try {
      if (await fs.mkdir(dir, { recursive: true })) await syncDir(this.root)
      await fs.rename(staged.tmp, path.join(dir, staged.digest))
      await syncDir(dir)
      hit('files.after-data')
    } catch (e) {
      throw storageError(e)
    }
    await this.catalog.run('INSERT INTO files VALUES ($1, $2, NULL, $3, now()::TIMESTAMP) ON CONFLICT DO NOTHING', [
      projectId,
      staged.digest,
      staged.size,
    ])
  }

  /** Removes staged bytes that will not be committed (no-op once committed). */
  async discard(staged: Staged): Promise<void> {
    await fs.rm(staged.tmp, { force: true })
  }

  put(projectId: string, chunks: AsyncIterable<Uint8Array> | Iterable<Uint8Array>): Promise<string> {
    return putFile(this, projectId, chunks)
  }

  /** The file, opened (so a missing file fails here, before any byte is sent), or null if unknown to the project. */
  async open(projectId: string, digest: string): Promise<StoredFile | null> {
    await this.ready
    const [row] = await this.catalog.all<{ size_bytes: bigint; content: Uint8Array | null }>(
      'SELECT size_bytes, content FROM files WHERE project_id = $1 AND digest = $2',
      [projectId, digest],
    )
    if (!row) return null
    // Bytes a database from before files moved to disk still holds (until prepare() carries them over).
    if (row.content) return { size: row.content.byteLength, chunks: once(Buffer.from(row.content)) }
    if (!DIGEST.test(digest)) return null
    let fh: fs.FileHandle
    try {
      fh = await fs.open(path.join(this.projectDir(projectId), digest), 'r')
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code === 'ENOENT')
        throw new DomainError(500, `The bytes of file ${digest} are missing from the data directory`)
      throw e
    }
    return { size: Number(row.size_bytes), chunks: fh.createReadStream({ highWaterMark: READ_CHUNK }) }
  }

  /** The whole file in memory, for callers that need it so (op code, small files); null if unknown. */
  read(projectId: string, digest: string): Promise<Buffer | null> {
    return readWholeFile(this, projectId, digest)
  }

  /** Bytes of every file in the project (each digest once). */
  async totalSize(projectId: string): Promise<number> {
    await this.ready
    const [r] = await this.catalog.all<{ n: bigint }>('SELECT coalesce(sum(size_bytes), 0)::BIGINT AS n FROM files WHERE project_id = $1', [
      projectId,
    ])
    return Number(r?.n ?? 0)
  }

  /** Project ids may hold any character; a hash of one is a safe, fixed-length directory name. */
  private projectDir(projectId: string): string {
    return path.join(this.root, createHash('sha256').update(projectId).digest('hex').slice(0, 32))
  }

  /**
   * Makes the directories, removes temporary files a crash left behind (never visible under a digest), and
   * carries bytes older databases kept in the catalog out to disk, one file at a time: written and committed
   * first, the catalog's copy cleared after, so a crash midway repeats a step rather than losing bytes.
   */
  private async prepare(): Promise<void> {
    await fs.mkdir(this.tmpDir, { recursive: true })
    for (const name of await fs.readdir(this.tmpDir)) await fs.rm(path.join(this.tmpDir, name), { force: true })
    const legacy = await this.catalog.all<{ project_id: string; digest: string }>(
      'SELECT project_id, digest FROM files WHERE content IS NOT NULL',
    )
    for (const { project_id, digest } of legacy) {
      if (!DIGEST.test(digest)) continue
      const [row] = await this.catalog.all<{ content: Uint8Array }>('SELECT content FROM files WHERE project_id = $1 AND digest = $2', [
        project_id,
        digest,
      ])
      if (!row?.content) continue
      const staged = await this.writeTemp([row.content])
      // Stored under the digest clients know it by, even in the (impossible) case the bytes hash otherwise.
      await this.commit(project_id, { ...staged, digest })
      await this.catalog.run('UPDATE files SET content = NULL WHERE project_id = $1 AND digest = $2', [project_id, digest])
    }
  }
}
