import { DomainError } from '../core/errors.js'
import type { ObjectsBackend, TablesBackend } from './backends.js'
import type { DatasetCreateReq, EvaluationCreateReq, ModelCreateReq, OpCreateReq, ScorerCreateReq } from '../schemas/v2.js'
import { parseRef } from './refs.js'
import {
  createOp,
  createVersion,
  makeObjectId,
  objectRef,
  opRef,
  OP_FILE,
  PLACEHOLDER_EVALUATE_SOURCE,
  PLACEHOLDER_EVALUATION_SUMMARIZE_SOURCE,
  PLACEHOLDER_OP_SOURCE,
  PLACEHOLDER_PREDICT_AND_SCORE_SOURCE,
  PLACEHOLDER_SCORER_SUMMARIZE_SOURCE,
  type CreatedVersion,
} from './ops.js'

/** The object ids Weave accepts (an id outside them is a 403 there, and here). */
const OBJECT_ID = /^[\w.-]{1,128}$/

function checkObjectId(id: string): void {
  if (!OBJECT_ID.test(id))
    throw new DomainError(
      403,
      `Invalid object_id ${JSON.stringify(id.slice(0, 200))} (derived from the name): only letters, digits, '_', '.' and '-', at most 128 characters`,
    )
}

/** The object a v2 create makes, with the keys in Weave's order: the digest is taken over this exact text. */
const header = (cls: string) => ({ _type: cls, _class_name: cls, _bases: ['Object', 'BaseModel'] })

/**
 * Adds caller-given attributes after the object's own keys, as Weave's `dict.update` does; a key that would
 * overwrite one of the object's own fields is refused rather than silently replacing it.
 */
function withAttributes(
  val: Record<string, unknown>,
  attrs: Record<string, unknown> | null | undefined,
  field: string,
): Record<string, unknown> {
  if (!attrs) return val
  const clash = Object.keys(attrs).filter((k) => Object.hasOwn(val, k))
  if (clash.length) throw new DomainError(400, `${field} may not set ${clash.map((k) => JSON.stringify(k)).join(', ')}: the object sets it`)
  // fromEntries defines own properties, so a `__proto__` attribute stays data.
  return Object.fromEntries([...Object.entries(val), ...Object.entries(attrs)])
}

/**
 * A ref given in a body must parse, stay in this project, name a version by content digest (a stored ref
 * must not move) and name a live version of the expected kind.
 */
async function checkRef(objects: ObjectsBackend, projectId: string, ref: string, field: string, want: 'dataset' | 'scorer'): Promise<void> {
  let r
  try {
    r = parseRef(ref)
  } catch (e) {
    throw new DomainError(400, `${field}: ${(e as Error).message}`)
  }
  if (`${r.entity}/${r.project}` !== projectId)
    throw new DomainError(
      400,
      `${field}: ${ref.slice(0, 200)} points into project ${r.entity}/${r.project}; refs must stay in ${projectId}`,
    )
  const kinds = want === 'dataset' ? ['object'] : ['object', 'op']
  if (!kinds.includes(r.kind) || r.path.length)
    throw new DomainError(400, `${field}: expected a ${want} ref weave:///${projectId}/${kinds.join('|')}/<name>:<digest>`)
  if (r.digest === 'latest' || /^v\d+$/.test(r.digest))
    throw new DomainError(400, `${field}: a ref must name a content digest, not ${r.digest}`)
  const v = await objects.read(projectId, r.name, r.digest, true)
  if (!v || v.deleted_at || v.kind !== r.kind) throw new DomainError(404, `${field}: ${ref.slice(0, 200)} names no existing version`)
  if (want === 'dataset' && v.base_object_class !== 'Dataset') throw new DomainError(400, `${field}: ${ref.slice(0, 200)} is not a dataset`)
}

/** An op from its source; none sent: Weave's placeholder. An empty string is kept as sent. */
export async function createV2Op(objects: ObjectsBackend, projectId: string, body: OpCreateReq, userId: string): Promise<CreatedVersion> {
  const id = makeObjectId(body.name, 'Op')
  checkObjectId(id)
  return createOp(objects, projectId, id, body.source_code ?? PLACEHOLDER_OP_SOURCE, userId)
}

/** The rows become a table; the Dataset object points at it by ref. */
export async function createDataset(
  objects: ObjectsBackend,
  tables: TablesBackend,
  projectId: string,
  body: DatasetCreateReq,
  userId: string,
): Promise<CreatedVersion> {
  const id = makeObjectId(body.name, 'Dataset')
  checkObjectId(id)
  const table = await tables.create(projectId, body.rows)
  const val = {
    ...header('Dataset'),
    name: body.name ?? 'Dataset',
    description: body.description ?? null,
    rows: `weave:///${projectId}/table/${table.digest}`,
  }
  return createVersion(objects, projectId, id, val, userId)
}

/** Two ops (`<id>_score` from the source, `<id>_summarize` a placeholder) and the Scorer object naming them. */
export async function createScorer(
  objects: ObjectsBackend,
  projectId: string,
  body: ScorerCreateReq,
  userId: string,
): Promise<CreatedVersion & { scorer: string }> {
  const id = makeObjectId(body.name, 'Scorer')
  for (const x of [id, `${id}_score`, `${id}_summarize`]) checkObjectId(x)
  const score = await createOp(objects, projectId, `${id}_score`, body.op_source_code, userId)
  const summarize = await createOp(objects, projectId, `${id}_summarize`, PLACEHOLDER_SCORER_SUMMARIZE_SOURCE, userId)
  const val = {
    ...header('Scorer'),
    name: body.name,
    description: body.description ?? null,
    score: opRef(projectId, score.object_id, score.digest),
    summarize: opRef(projectId, summarize.object_id, summarize.digest),
    column_map: null,
  }
  const created = await createVersion(objects, projectId, id, val, userId)
  return { ...created, scorer: objectRef(projectId, id, created.digest) }
}

/** Three placeholder ops and the Evaluation object; the dataset and scorer refs are checked first. */
export async function createEvaluation(
  objects: ObjectsBackend,
  projectId: string,
  body: EvaluationCreateReq,
  userId: string,
): Promise<CreatedVersion & { evaluation_ref: string }> {
  const id = makeObjectId(body.name, 'Evaluation')
  const opIds = [`${id}_evaluate`, `${id}_predict_and_score`, `${id}_summarize`] as const
  for (const x of [id, ...opIds]) checkObjectId(x)
  await checkRef(objects, projectId, body.dataset, 'dataset', 'dataset')
  const scorers = body.scorers ?? []
  for (const [i, s] of scorers.entries()) await checkRef(objects, projectId, s, `scorers[${i}]`, 'scorer')
  const base = {
    ...header('Evaluation'),
    name: body.name,
    description: body.description ?? null,
    dataset: body.dataset,
    scorers,
    trials: body.trials ?? 1,
    evaluation_name: body.evaluation_name ?? null,
    metadata: null,
    preprocess_model_input: null,
    on_complete: null,
    evaluate: '',
    predict_and_score: '',
    summarize: '',
  }
  const val = withAttributes(base, body.eval_attributes, 'eval_attributes')
  const sources = [PLACEHOLDER_EVALUATE_SOURCE, PLACEHOLDER_PREDICT_AND_SCORE_SOURCE, PLACEHOLDER_EVALUATION_SUMMARIZE_SOURCE]
  const refs: string[] = []
  for (const [i, op] of opIds.entries()) {
    const made = await createOp(objects, projectId, op, sources[i]!, userId)
    refs.push(opRef(projectId, made.object_id, made.digest))
  }
  // Assigned in place: the keys keep their position, so the digest covers Weave's key order.
  Object.assign(val, { evaluate: refs[0], predict_and_score: refs[1], summarize: refs[2] })
  const created = await createVersion(objects, projectId, id, val, userId)
  return { ...created, evaluation_ref: objectRef(projectId, id, created.digest) }
}

/** The source as the model's `obj.py`; `attributes` merged into the object after its own fields. */
export async function createModel(
  objects: ObjectsBackend,
  projectId: string,
  body: ModelCreateReq,
  userId: string,
): Promise<CreatedVersion & { model_ref: string }> {
  const id = makeObjectId(body.name, 'Model')
  checkObjectId(id)
  const base = { ...header('Model'), name: body.name, description: body.description ?? null, files: { [OP_FILE]: '' } }
  const val = withAttributes(base, body.attributes, 'attributes')
  const file = await objects.createFile(projectId, Buffer.from(body.source_code, 'utf8'))
  val.files = { [OP_FILE]: file }
  const created = await createVersion(objects, projectId, id, val, userId)
  return { ...created, model_ref: objectRef(projectId, id, created.digest) }
}
