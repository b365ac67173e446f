import { DomainError } from '../core/errors.js'
import type { ObjectsBackend } from './backends.js'
import type { ObjectVersion } from '../schemas/objects.js'
import { MAX_DELETE_DIGESTS } from '../schemas/objects.js'
import { readSourceFile } from './ops.js'

/** The versioned kinds of the /v2 project API; each is a class of object versions (or the ops). */
export type V2Kind = 'ops' | 'datasets' | 'scorers' | 'evaluations' | 'models'

/** One read result (a JSONL line of a listing): the version fields plus the kind's own. */
export type V2Item = Record<string, unknown>

type Shape = (objects: ObjectsBackend, v: ObjectVersion, strict: boolean) => Promise<V2Item>

interface KindSpec {
  /** In messages: `Dataset x:v0 not found`. */
  noun: string
  /** The base object class of its versions (none: ops, found by kind). */
  base: string | null
  shape: Shape
}

/** The fields of the object itself rather than its extra attributes (what a model read leaves out of `attributes`). */
const MODEL_OWN_KEYS = new Set(['_type', '_class_name', '_bases', 'name', 'description', 'files'])

const head = (v: ObjectVersion) => ({
  object_id: v.object_id,
  digest: v.digest,
  version_index: v.version_index,
  created_at: v.created_at,
})

const valOf = (v: ObjectVersion): Record<string, unknown> =>
  v.val && typeof v.val === 'object' && !Array.isArray(v.val) ? (v.val as Record<string, unknown>) : {}

const str = (x: unknown, fallback: string): string => (typeof x === 'string' ? x : fallback)
const optStr = (x: unknown): string | null => (typeof x === 'string' ? x : null)

async function shapeOp(objects: ObjectsBackend, v: ObjectVersion): Promise<V2Item> {
  return { ...head(v), code: (await readSourceFile(objects, projectOf(v), v.val)) ?? '' }
}

async function shapeDataset(_o: ObjectsBackend, v: ObjectVersion): Promise<V2Item> {
  const val = valOf(v)
  return { ...head(v), name: str(val.name, v.object_id), description: optStr(val.description), rows: str(val.rows, '') }
}

async function shapeScorer(_o: ObjectsBackend, v: ObjectVersion): Promise<V2Item> {
  const val = valOf(v)
  return { ...head(v), name: str(val.name, v.object_id), description: optStr(val.description), score_op: str(val.score, '') }
}

async function shapeEvaluation(_o: ObjectsBackend, v: ObjectVersion): Promise<V2Item> {
  const val = valOf(v)
  return {
    ...head(v),
    name: str(val.name, v.object_id),
    description: optStr(val.description),
    dataset: str(val.dataset, ''),
    scorers: Array.isArray(val.scorers) ? val.scorers.filter((s): s is string => typeof s === 'string') : [],
    trials: Number.isInteger(val.trials) ? val.trials : 1,
    evaluation_name: optStr(val.evaluation_name),
    evaluate_op: optStr(val.evaluate),
    predict_and_score_op: optStr(val.predict_and_score),
    summarize_op: optStr(val.summarize),
  }
}

/** `strict` (a read of one version): a model without its source file is an error, as in Weave; a listing shows "". */
async function shapeModel(objects: ObjectsBackend, v: ObjectVersion, strict: boolean): Promise<V2Item> {
  const val = valOf(v)
  const source = await readSourceFile(objects, projectOf(v), val)
  if (source === null && strict) throw new DomainError(400, `Model ${v.object_id} has no source file`)
  const extra = Object.entries(val).filter(([k]) => !MODEL_OWN_KEYS.has(k))
  return {
    ...head(v),
    name: str(val.name, v.object_id),
    description: optStr(val.description),
    source_code: source ?? '',
    // fromEntries defines own properties, so a `__proto__` attribute stays data.
    attributes: extra.length ? Object.fromEntries(extra) : null,
  }
}

const projectOf = (v: ObjectVersion) => v.project_id

export const KINDS: Record<V2Kind, KindSpec> = {
  ops: { noun: 'Op', base: null, shape: shapeOp },
  datasets: { noun: 'Dataset', base: 'Dataset', shape: shapeDataset },
  scorers: { noun: 'Scorer', base: 'Scorer', shape: shapeScorer },
  evaluations: { noun: 'Evaluation', base: 'Evaluation', shape: shapeEvaluation },
  models: { noun: 'Model', base: 'Model', shape: shapeModel },
}

/** Whether a version belongs to the kind: ops by their kind, the rest by base class (a subclass counts). */
export function isOfKind(kind: V2Kind, v: Pick<ObjectVersion, 'kind' | 'base_object_class'>): boolean {
  const spec = KINDS[kind]
  return spec.base === null ? v.kind === 'op' : v.kind !== 'op' && v.base_object_class === spec.base
}

/**
 * The kind's live versions, as Weave lists them: every version (not only the latest), oldest first. Ops paged
 * with limit/offset go by object id instead, as Weave's op listing does when it pages.
 */
export async function listVersions(
  objects: ObjectsBackend,
  kind: V2Kind,
  projectId: string,
  page: { limit?: number; offset?: number },
): Promise<V2Item[]> {
  const spec = KINDS[kind]
  const paged = page.limit !== undefined || page.offset !== undefined
  const versions = await objects.query({
    project_id: projectId,
    filter: spec.base === null ? { is_op: true } : { is_op: false, base_object_classes: [spec.base] },
    limit: page.limit,
    offset: page.offset,
    sort_by: spec.base === null && paged ? [{ field: 'object_id', direction: 'asc' }] : undefined,
  })
  const out: V2Item[] = []
  for (const v of versions) out.push(await spec.shape(objects, v, false))
  return out
}

/** One version; `digest` may be a content digest, `latest` or `v<N>`. Unknown, another kind's, or deleted: 404. */
export async function readVersion(
  objects: ObjectsBackend,
  kind: V2Kind,
  projectId: string,
  objectId: string,
  digest: string,
): Promise<V2Item> {
  const spec = KINDS[kind]
  const v = await objects.read(projectId, objectId, digest)
  if (!v || !isOfKind(kind, v)) throw new DomainError(404, `${spec.noun} ${objectId}:${digest} not found`)
  if (v.deleted_at)
    throw new DomainError(404, `${objectId}:v${v.version_index} was deleted at ${v.deleted_at}`, { extra: { deleted_at: v.deleted_at } })
  return spec.shape(objects, v, true)
}

/**
 * Soft-deletes versions of one object of the kind (none named: all of them). The object store's rules apply:
 * nothing found, or some digests unknown → 404 and nothing deleted.
 */
export async function deleteVersions(
  objects: ObjectsBackend,
  kind: V2Kind,
  projectId: string,
  objectId: string,
  digests: string[] | undefined,
): Promise<number> {
  if (digests && digests.length > MAX_DELETE_DIGESTS)
    throw new DomainError(
      400,
      `Object delete request contains ${digests.length} objects. Please delete ${MAX_DELETE_DIGESTS} or fewer objects at a time.`,
    )
  const noun = KINDS[kind].noun
  const live = await objects.query({ project_id: projectId, filter: { object_ids: [objectId] }, metadata_only: true })
  const mine = live.filter((v) => isOfKind(kind, v))
  if (!mine.length)
    throw new DomainError(404, `${noun} ${objectId} (${digests ? digests.join(', ') : 'all versions'}) not found when deleting.`)
  // Object ids are shared across kinds: a delete here never touches a version of another kind.
  if (!digests) return objects.delete(projectId, objectId, mine.length === live.length ? null : mine.map((v) => v.digest))
  const foreign: string[] = []
  for (const d of new Set(digests)) {
    const v = await objects.read(projectId, objectId, d, true)
    if (v && !v.deleted_at && !isOfKind(kind, v)) foreign.push(d)
  }
  if (foreign.length) throw new DomainError(404, `${noun} ${objectId} has no version ${foreign.join(', ')}; nothing was deleted.`)
  return objects.delete(projectId, objectId, digests)
}
