import type { ObjectsBackend } from '../catalog/backends.js'
import { valueDigest } from '../catalog/digest.js'
import { classify, deleteTargets, resolveVersion, toVersion, type StoredVersion } from '../catalog/object-rules.js'
import type { ObjectVersion, ObjQueryReq } from '../schemas/objects.js'
import { insertTarget, table } from './layout.js'
import { objQuerySql, versionsSql } from './objects-sql.js'
import { chTime, type ChStore } from './objects-store.js'
import { ChParams } from './query/params.js'

/** Where op code and other bytes of objects go: the server's file store, whichever it is. */
export interface FileBytes {
  put(projectId: string, chunks: Iterable<Uint8Array>): Promise<string>
  read(projectId: string, digest: string): Promise<Buffer | null>
}

type ChVersion = StoredVersion & { latest: boolean | number }

/** ClickHouse answers booleans as 0/1 and 64-bit integers as strings; the shared rules want a boolean latest. */
const stored = (r: Record<string, unknown>): ChVersion => ({ ...(r as unknown as ChVersion), latest: Number(r.latest) === 1 })

/**
 * Versioned objects on ClickHouse (`object_versions`, ReplacingMergeTree by `updated_at`): every change is a
 * new row — a create, a delete (the row again with `deleted_at`), a re-create — and reads take the newest row
 * per version. Each write is one insert, so what ClickHouse acknowledged is the whole change and a failed
 * request leaves nothing. Same rules and digests as the embedded store (catalog/object-rules.ts).
 */
export class ClickHouseObjects implements ObjectsBackend {
  constructor(
    private readonly s: ChStore,
    private readonly files: FileBytes,
  ) {}

  private async versions(project: string, objectId: string, metadataOnly = false): Promise<ChVersion[]> {
    const p = new ChParams()
    const sql = `${versionsSql(this.s.layout, p, project, objectId, metadataOnly)} ORDER BY version_index`
    return (await this.s.exec.query(sql, p.values, this.s.reads)).map(stored)
  }

  async create(projectId: string, objectId: string, val: unknown, userId: string): Promise<{ digest: string; object_id: string }> {
    const digest = valueDigest(val)
    const { kind, base, leaf } = classify(val)
    const p = new ChParams()
    const [existing] = await this.s.exec.query(
      `SELECT isNotNull(deleted_at) AS deleted, first_created_at FROM ${table(this.s.layout, 'object_versions')} FINAL
        WHERE project_id = ${p.add(projectId, 'String')} AND object_id = ${p.add(objectId, 'String')} AND digest = ${p.add(digest, 'String')}`,
      p.values,
      this.s.reads,
    )
    if (existing && Number(existing.deleted) === 0) return { digest, object_id: objectId }
    const now = chTime(this.s.clock.next())
    const row = {
      project_id: projectId,
      kind,
      object_id: objectId,
      digest,
      base_object_class: base,
      leaf_object_class: leaf,
      refs: [],
      val_dump: JSON.stringify(val),
      user_id: userId,
      created_at: now,
      deleted_at: null,
      updated_at: now,
      // A re-created version keeps its place among the versions (see OBJECT_FIRST_CREATED).
      first_created_at: existing ? String(existing.first_created_at) : now,
    }
    await this.s.exec.insert(insertTarget(this.s.layout, 'object_versions'), [row], this.s.writes)
    return { digest, object_id: objectId }
  }

  async read(projectId: string, objectId: string, digest: string, metadataOnly = false): Promise<ObjectVersion | null> {
    const r = resolveVersion(await this.versions(projectId, objectId, metadataOnly), digest)
    return r ? toVersion(r, metadataOnly) : null
  }

  async query(req: ObjQueryReq): Promise<ObjectVersion[]> {
    const p = new ChParams()
    const rows = await this.s.exec.query(objQuerySql(this.s.layout, p, req), p.values, this.s.reads)
    return rows.map((r) => toVersion(stored(r), req.metadata_only === true, req.include_storage_size === true))
  }

  /** The deleted versions are written again with `deleted_at`, by one INSERT … SELECT: all of them or none. */
  async delete(projectId: string, objectId: string, digests?: string[] | null): Promise<number> {
    const live = (await this.versions(projectId, objectId, true)).filter((r) => r.deleted_us === null)
    const targets = deleteTargets(live, objectId, digests)
    const now = chTime(this.s.clock.next())
    const p = new ChParams()
    const t = table(this.s.layout, 'object_versions')
    const at = p.add(now, "DateTime64(6, 'UTC')")
    await this.s.exec.command(
      `INSERT INTO ${t} (project_id, kind, object_id, digest, base_object_class, leaf_object_class, refs, val_dump, user_id,
          created_at, deleted_at, updated_at, first_created_at)
        SELECT project_id, kind, object_id, digest, base_object_class, leaf_object_class, refs, val_dump, user_id,
          created_at, ${at}, ${at}, first_created_at
        FROM ${t} FINAL
        WHERE project_id = ${p.add(projectId, 'String')} AND object_id = ${p.add(objectId, 'String')}
          AND has(${p.add(targets, 'Array(String)')}, digest) AND isNull(deleted_at)`,
      p.values,
      this.s.writes,
    )
    return targets.length
  }

  createFile(projectId: string, content: Buffer): Promise<string> {
    return this.files.put(projectId, [content])
  }

  readFile(projectId: string, digest: string): Promise<Buffer | null> {
    return this.files.read(projectId, digest)
  }
}
