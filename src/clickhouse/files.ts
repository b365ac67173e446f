import fs from 'node:fs/promises'
import type { FilesBackend, Staged, StoredFile } from '../catalog/backends.js'
import { putFile, readWholeFile, stageFile } from '../catalog/files.js'
import { insertTarget, table } from './layout.js'
import { chTime, type ChStore } from './objects-store.js'
import { ChParams } from './query/params.js'

/** Bytes per stored chunk, and chunks per insert: a file streams in and out a chunk at a time. */
const CHUNK_BYTES = 1024 * 1024
const CHUNKS_PER_INSERT = 1

/**
 * Files on ClickHouse, in the `files` table, for chdb and a remote server alike: a cluster has no disk all its
 * servers share, and one code path means the chdb runs test what a cluster runs. Uploads are staged on local
 * disk as in the embedded store (hashed while they stream in), then inserted a chunk of 1 MiB at a time. A
 * file is visible once all its chunks are: an upload that failed half way leaves chunks no read counts. The
 * bytes are kept as base64 text, the one form that travels unchanged in JSONEachRow over both executors.
 */
export class ClickHouseFiles implements FilesBackend {
  /** Temporary files a crash left behind were never committed: removed before the first upload. */
  private readonly ready: Promise<void>

  /** Staged uploads go to `tmpDir`. */
  constructor(
    private readonly s: ChStore,
    private readonly tmpDir: string,
  ) {
    this.ready = fs.rm(tmpDir, { recursive: true, force: true }).then(() => fs.mkdir(tmpDir, { recursive: true }).then(() => {}))
    // Every upload awaits `ready` and sees the failure there.
    this.ready.catch(() => {})
  }

  async stage(chunks: AsyncIterable<Uint8Array> | Iterable<Uint8Array>): Promise<Staged> {
    await this.ready
    return stageFile(this.tmpDir, chunks)
  }

  async commit(projectId: string, staged: Staged): Promise<void> {
    if (await this.complete(projectId, staged.digest)) return
    const n = Math.max(1, Math.ceil(staged.size / CHUNK_BYTES))
    const created_at = chTime(this.s.clock.next())
    const fh = await fs.open(staged.tmp, 'r')
    try {
      for (let first = 0; first < n; first += CHUNKS_PER_INSERT) {
        const rows = []
        for (let i = first; i < Math.min(n, first + CHUNKS_PER_INSERT); i++) {
          const buf = Buffer.alloc(Math.min(CHUNK_BYTES, staged.size - i * CHUNK_BYTES))
          if (buf.length) await fh.read(buf, 0, buf.length, i * CHUNK_BYTES)
          const val_bytes = buf.toString('base64')
          rows.push({
            project_id: projectId,
            digest: staged.digest,
            chunk_index: i,
            n_chunks: n,
            name: '',
            size_bytes: staged.size,
            val_bytes,
            created_at,
          })
        }
        await this.s.exec.insert(insertTarget(this.s.layout, 'files'), rows, this.s.writes)
      }
    } finally {
      await fh.close()
    }
  }

  async discard(staged: Staged): Promise<void> {
    await fs.rm(staged.tmp, { force: true })
  }

  put(projectId: string, chunks: AsyncIterable<Uint8Array> | Iterable<Uint8Array>): Promise<string> {
    return putFile(this, projectId, chunks)
  }

  read(projectId: string, digest: string): Promise<Buffer | null> {
    return readWholeFile(this, projectId, digest)
  }

  /** Size and chunk count of a file whose chunks are all stored; null otherwise. */
  private async complete(projectId: string, digest: string): Promise<{ size: number; n: number } | null> {
    const p = new ChParams()
    const [r] = await this.s.exec.query(
      `SELECT any(size_bytes) AS size, any(n_chunks) AS n, uniqExact(chunk_index) AS have FROM ${table(this.s.layout, 'files')}
        WHERE project_id = ${p.add(projectId, 'String')} AND digest = ${p.add(digest, 'String')}`,
      p.values,
      this.s.reads,
    )
    if (!r || Number(r.n) === 0 || Number(r.have) < Number(r.n)) return null
    return { size: Number(r.size), n: Number(r.n) }
  }

  async open(projectId: string, digest: string): Promise<StoredFile | null> {
    const f = await this.complete(projectId, digest)
    return f ? { size: f.size, chunks: this.chunks(projectId, digest, f.n) } : null
  }

  private async *chunks(projectId: string, digest: string, n: number): AsyncGenerator<Buffer> {
    for (let i = 0; i < n; i++) {
      const p = new ChParams()
      const [r] = await this.s.exec.query(
        `SELECT val_bytes FROM ${table(this.s.layout, 'files')} WHERE project_id = ${p.add(projectId, 'String')}
          AND digest = ${p.add(digest, 'String')} AND chunk_index = ${p.add(i, 'UInt32')} LIMIT 1`,
        p.values,
        this.s.reads,
      )
      yield Buffer.from(String(r?.val_bytes ?? ''), 'base64')
    }
  }

  async totalSize(projectId: string): Promise<number> {
    const p = new ChParams()
    const [r] = await this.s.exec.query(
      `SELECT sum(size) AS n FROM (SELECT any(size_bytes) AS size, any(n_chunks) AS n, uniqExact(chunk_index) AS have
        FROM ${table(this.s.layout, 'files')} WHERE project_id = ${p.add(projectId, 'String')} GROUP BY digest HAVING have >= n)`,
      p.values,
      this.s.reads,
    )
    return Number(r?.n ?? 0)
  }
}
