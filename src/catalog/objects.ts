import { blobValue } from '@duckdb/node-api'
import type { Catalog } from './db.js'
import { digestBytes, valueDigest } from './digest.js'
import { isoFromMicros } from '../core/time.js'

export interface ObjectVersion {
  project_id: string
  object_id: string
  digest: string
  version_index: number
  is_latest: number
  kind: 'op' | 'object'
  base_object_class: string | null
  leaf_object_class: string | null
  val: unknown
  created_at: string
  deleted_at: string | null
  svc_user_id: string | null
}

/** `kind` and classes as Weave derives them from the value (docs/objects.md). */
export function classify(val: unknown): { kind: 'op' | 'object'; base: string | null; leaf: string | null } {
  if (!val || typeof val !== 'object' || Array.isArray(val)) return { kind: 'object', base: null, leaf: null }
  const v = val as Record<string, unknown>
  const wt = v.weave_type as { type?: unknown } | undefined
  const type = wt && typeof wt === 'object' ? wt.type : v._type
  const kind = type === 'Op' ? 'op' : 'object'
  const bases = v._bases
  if (
    Array.isArray(bases) &&
    bases.length >= 2 &&
    bases[bases.length - 1] === 'BaseModel' &&
    (bases[bases.length - 2] === 'Object' || bases[bases.length - 2] === 'BaseObject')
  ) {
    const leaf = typeof v._class_name === 'string' ? v._class_name : null
    const base = bases.length > 2 ? String(bases[bases.length - 3]) : leaf
    return { kind, base, leaf }
  }
  return { kind, base: null, leaf: null }
}

interface Row {
  project_id: string
  object_id: string
  digest: string
  version_index: number
  kind: 'op' | 'object'
  base_object_class: string | null
  leaf_object_class: string | null
  val_dump: string
  user_id: string | null
  created_us: bigint
  deleted_us: bigint | null
  latest: boolean
}

const SELECT = `SELECT project_id, object_id, digest, version_index, kind, base_object_class, leaf_object_class, val_dump, user_id,
  epoch_us(created_at) AS created_us, epoch_us(deleted_at) AS deleted_us,
  (deleted_at IS NULL AND version_index = max(version_index) FILTER (WHERE deleted_at IS NULL) OVER (PARTITION BY project_id, object_id)) AS latest
  FROM objects`

function toVersion(r: Row, metadataOnly = false): ObjectVersion {
  return {
    project_id: r.project_id,
    object_id: r.object_id,
    digest: r.digest,
    version_index: Number(r.version_index),
    is_latest: r.latest ? 1 : 0,
    kind: r.kind,
    base_object_class: r.base_object_class,
    leaf_object_class: r.leaf_object_class,
    val: metadataOnly ? {} : JSON.parse(r.val_dump),
    created_at: isoFromMicros(r.created_us)!,
    deleted_at: isoFromMicros(r.deleted_us),
    svc_user_id: r.user_id,
  }
}

/**
 * Versioned objects in the catalog. Creating an existing digest returns it (and brings a deleted
 * version back) rather than adding a version: the SQLite reference server's rule, which keeps
 * version numbers stable.
 */
export class ObjectStore {
  constructor(private readonly catalog: Catalog) {}

  async create(projectId: string, objectId: string, val: unknown, userId: string): Promise<{ digest: string; object_id: string }> {
    const digest = valueDigest(val)
    const { kind, base, leaf } = classify(val)
    await this.catalog.transaction(async (tx) => {
      const [existing] = await tx.all<{ deleted: boolean }>(
        'SELECT deleted_at IS NOT NULL AS deleted FROM objects WHERE project_id = $1 AND object_id = $2 AND digest = $3',
        [projectId, objectId, digest],
      )
      if (existing) {
        if (existing.deleted)
          await tx.run('UPDATE objects SET deleted_at = NULL WHERE project_id = $1 AND object_id = $2 AND digest = $3', [
            projectId,
            objectId,
            digest,
          ])
        return
      }
      const [{ n }] = (await tx.all<{ n: number }>('SELECT count(*)::INTEGER AS n FROM objects WHERE project_id = $1 AND object_id = $2', [
        projectId,
        objectId,
      ])) as [{ n: number }]
      await tx.run(`INSERT INTO objects VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, now()::TIMESTAMP, NULL)`, [
        projectId,
        objectId,
        digest,
        Number(n),
        kind,
        base,
        leaf,
        JSON.stringify(val),
        userId,
      ])
    })
    return { digest, object_id: objectId }
  }

  /** `digest` may be a content digest, `latest`, or `v<N>`. */
  async read(projectId: string, objectId: string, digest: string, metadataOnly = false): Promise<ObjectVersion | null> {
    const rows = await this.catalog.all<Row>(`SELECT * FROM (${SELECT} WHERE project_id = $1 AND object_id = $2) ORDER BY version_index`, [
      projectId,
      objectId,
    ])
    let r: Row | undefined
    if (digest === 'latest') r = rows.find((x) => x.latest)
    else if (/^v\d+$/.test(digest)) r = rows.find((x) => Number(x.version_index) === Number(digest.slice(1)))
    else r = rows.find((x) => x.digest === digest)
    return r ? toVersion(r, metadataOnly) : null
  }

  /** Files are content-addressed by Weave's file digest (the TS SDK computes the same one client side). */
  async createFile(projectId: string, content: Buffer): Promise<string> {
    const digest = digestBytes(content)
    await this.catalog.run('INSERT INTO files VALUES ($1, $2, $3::BLOB, $4, now()::TIMESTAMP) ON CONFLICT DO NOTHING', [
      projectId,
      digest,
      blobValue(new Uint8Array(content)),
      content.length,
    ])
    return digest
  }

  async readFile(projectId: string, digest: string): Promise<Buffer | null> {
    const [r] = await this.catalog.all<{ content: Uint8Array }>('SELECT content FROM files WHERE project_id = $1 AND digest = $2', [
      projectId,
      digest,
    ])
    return r ? Buffer.from(r.content) : null
  }
}
