import { blobValue, type DuckDBValue } from '@duckdb/node-api'
import type { Catalog } from './db.js'
import { digestBytes, valueDigest } from './digest.js'
import { DomainError } from '../core/errors.js'
import { isoFromMicros } from '../core/time.js'
import type { ObjectVersion, ObjQueryReq } from '../schemas/objects.js'

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
  size_bytes: bigint
  latest: boolean
}

/**
 * `latest`: the newest non-deleted version by creation time. Re-creating a deleted digest gives it a
 * new `created_at` (as Weave's ClickHouse server does), so it comes back as latest while keeping its
 * `version_index`. `val_dump` is left out when the query asks for metadata only.
 */
function select(metadataOnly = false): string {
  return `SELECT project_id, object_id, digest, version_index, kind, base_object_class, leaf_object_class,
  ${metadataOnly ? "'{}'" : 'val_dump'} AS val_dump, strlen(val_dump) AS size_bytes, user_id,
  epoch_us(created_at) AS created_us, epoch_us(deleted_at) AS deleted_us,
  (deleted_at IS NULL AND row_number() OVER (PARTITION BY project_id, object_id
    ORDER BY deleted_at IS NULL DESC, created_at DESC, version_index DESC) = 1) AS latest
  FROM objects`
}

function toVersion(r: Row, metadataOnly = false, withSize = false): ObjectVersion {
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
    ...(withSize ? { size_bytes: Number(r.size_bytes) } : {}),
  }
}

/** `digest` may be a content digest, `latest`, or `v<N>`. */
function resolve(rows: Row[], digest: string): Row | undefined {
  if (digest === 'latest') return rows.find((x) => x.latest)
  if (/^v\d+$/.test(digest)) return rows.find((x) => Number(x.version_index) === Number(digest.slice(1)))
  return rows.find((x) => x.digest === digest)
}

/** Every version of one object ($1, $2), deleted ones included, by version_index. */
const VERSIONS = `SELECT * FROM (${select()} WHERE project_id = $1 AND object_id = $2) ORDER BY version_index`

const SORT_COLUMNS = { created_at: 'created_us', object_id: 'object_id' } as const

/**
 * The `/objs/query` SQL. User values are only ever bound parameters; the SQL text holds only
 * placeholders and the fixed column names and directions the schema allows.
 */
function querySql(req: ObjQueryReq): { sql: string; params: DuckDBValue[] } {
  const params: DuckDBValue[] = [req.project_id]
  const bind = (v: DuckDBValue) => `$${params.push(v)}`
  const list = (vs: string[]) => vs.map(bind).join(', ')
  const f = req.filter ?? {}
  const where = ['deleted_us IS NULL']
  // An empty list filters nothing, as in Weave (it tests the lists for truthiness).
  if (f.object_ids?.length) where.push(`object_id IN (${list(f.object_ids)})`)
  if (f.is_op === true || f.is_op === false) where.push(`kind ${f.is_op ? '=' : '<>'} 'op'`)
  if (f.latest_only === true) where.push('latest')
  if (f.base_object_classes?.length) where.push(`base_object_class IN (${list(f.base_object_classes)})`)
  // SQL NOT IN drops rows with no base class, as ClickHouse does for Weave.
  if (f.exclude_base_object_classes?.length) where.push(`base_object_class NOT IN (${list(f.exclude_base_object_classes)})`)
  if (f.leaf_object_classes?.length) where.push(`leaf_object_class IN (${list(f.leaf_object_classes)})`)
  const keys = (req.sort_by?.length ? req.sort_by : [{ field: 'created_at', direction: 'asc' } as const]).map(
    (s) => `${SORT_COLUMNS[s.field]} ${s.direction === 'desc' ? 'DESC' : 'ASC'}`,
  )
  let sql = `SELECT * FROM (${select(req.metadata_only === true)} WHERE project_id = $1) WHERE ${where.join(' AND ')}
    ORDER BY ${[...keys, 'object_id ASC', 'version_index ASC'].join(', ')}`
  if (req.limit !== undefined && req.limit !== null) sql += ` LIMIT ${bind(req.limit)}`
  if (req.offset) sql += ` OFFSET ${bind(req.offset)}`
  return { sql, params }
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
          await tx.run(
            'UPDATE objects SET deleted_at = NULL, created_at = now()::TIMESTAMP WHERE project_id = $1 AND object_id = $2 AND digest = $3',
            [projectId, objectId, digest],
          )
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
    const r = resolve(await this.catalog.all<Row>(VERSIONS, [projectId, objectId]), digest)
    return r ? toVersion(r, metadataOnly) : null
  }

  /** Deleted versions are never returned; `latest` is computed over the whole object before the filters apply. */
  async query(req: ObjQueryReq): Promise<ObjectVersion[]> {
    const { sql, params } = querySql(req)
    const rows = await this.catalog.all<Row>(sql, params)
    return rows.map((r) => toVersion(r, req.metadata_only === true, req.include_storage_size === true))
  }

  /**
   * Soft delete: sets `deleted_at`, so the versions keep their `version_index`. `digests` absent:
   * every live version. Aliases resolve among live versions; duplicates count once.
   */
  async delete(projectId: string, objectId: string, digests?: string[] | null): Promise<number> {
    return this.catalog.transaction(async (tx) => {
      const live = (await tx.all<Row>(VERSIONS, [projectId, objectId])).filter((r) => r.deleted_us === null)
      const asked = digests ? [...new Set(digests)] : null
      const found = asked ? asked.map((d) => resolve(live, d)) : live
      const missing = asked ? asked.filter((_, i) => !found[i]) : []
      const targets = [...new Set(found.filter((r): r is Row => !!r).map((r) => r.digest))]
      if (targets.length === 0)
        throw new DomainError(404, `Object ${objectId} (${asked ? asked.join(', ') : 'all versions'}) not found when deleting.`)
      if (missing.length)
        throw new DomainError(
          404,
          `Delete request contains ${asked!.length} digests, but found ${asked!.length - missing.length} objects to delete. Diff digests: ${missing.join(', ')}`,
          { extra: { missing_digests: missing } },
        )
      const marks = targets.map((_, i) => `$${i + 3}`).join(', ')
      await tx.run(
        `UPDATE objects SET deleted_at = now()::TIMESTAMP WHERE project_id = $1 AND object_id = $2 AND deleted_at IS NULL AND digest IN (${marks})`,
        [projectId, objectId, ...targets],
      )
      return targets.length
    })
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
