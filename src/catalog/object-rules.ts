import { DomainError } from '../core/errors.js'
import { isoFromMicros } from '../core/time.js'
import type { ObjectVersion } from '../schemas/objects.js'

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

/** What alias resolution needs to know of a stored version. */
export interface VersionKey {
  digest: string
  version_index: number | bigint
  latest: boolean
}

/** `digest` may be a content digest, `latest`, or `v<N>`. */
export function resolveVersion<T extends VersionKey>(rows: T[], digest: string): T | undefined {
  if (digest === 'latest') return rows.find((x) => x.latest)
  if (/^v\d+$/.test(digest)) return rows.find((x) => Number(x.version_index) === Number(digest.slice(1)))
  return rows.find((x) => x.digest === digest)
}

/**
 * The digests a delete names among an object's live versions (`digests` absent: all of them). Aliases resolve
 * among live versions; duplicates count once; nothing found, or some of the asked digests not found, is 404.
 */
export function deleteTargets<T extends VersionKey>(live: T[], objectId: string, digests?: string[] | null): string[] {
  const asked = digests ? [...new Set(digests)] : null
  const found = asked ? asked.map((d) => resolveVersion(live, d)) : live
  const missing = asked ? asked.filter((_, i) => !found[i]) : []
  const targets = [...new Set(found.filter((r): r is T => !!r).map((r) => r.digest))]
  if (targets.length === 0)
    throw new DomainError(404, `Object ${objectId} (${asked ? asked.join(', ') : 'all versions'}) not found when deleting.`)
  if (missing.length)
    throw new DomainError(
      404,
      `Delete request contains ${asked!.length} digests, but found ${asked!.length - missing.length} objects to delete. Diff digests: ${missing.join(', ')}`,
      { extra: { missing_digests: missing } },
    )
  return targets
}

/** A stored version as both stores read it (64-bit numbers as bigint or, from ClickHouse, as strings). */
export interface StoredVersion {
  project_id: string
  object_id: string
  digest: string
  version_index: number | bigint
  kind: 'op' | 'object'
  base_object_class: string | null
  leaf_object_class: string | null
  val_dump: string
  user_id: string | null
  created_us: bigint | string
  deleted_us: bigint | string | null
  size_bytes: bigint | number | string
  latest: boolean
}

/** A stored version as the API answers it. */
export function toVersion(r: StoredVersion, metadataOnly = false, withSize = false): ObjectVersion {
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
    created_at: isoFromMicros(BigInt(r.created_us))!,
    deleted_at: r.deleted_us === null ? null : isoFromMicros(BigInt(r.deleted_us)),
    svc_user_id: r.user_id,
    ...(withSize ? { size_bytes: Number(r.size_bytes) } : {}),
  }
}
