import type { ObjectsBackend } from './backends.js'

/** What Weave stores for an op whose code was not captured (v2 placeholder ops). */
export const PLACEHOLDER_OP_SOURCE = 'def func(*args, **kwargs):\n    ... # Code-capture unavailable for this op\n'

/** The sources Weave gives the ops a v2 create makes for a scorer or an evaluation (their code is not sent). */
export const PLACEHOLDER_SCORER_SUMMARIZE_SOURCE = `def summarize(score_rows: list) -> dict | None:
    '''Default summarize implementation that auto-summarizes score rows.'''
    from weave.flow.scorer import auto_summarize
import type { ObjectsBackend } from './backends.js'
    return auto_summarize(score_rows)
`
export const PLACEHOLDER_EVALUATE_SOURCE = `import weave
@weave.op
def evaluate(evaluation, model):
    \"\"\"Placeholder evaluate function.\"\"\"
    # TODO: Implement actual evaluation logic
    return {"status": "not_implemented"}
`
export const PLACEHOLDER_PREDICT_AND_SCORE_SOURCE = `import weave
@weave.op
def predict_and_score(evaluation, example):
    \"\"\"Placeholder predict_and_score function.\"\"\"
    # TODO: Implement actual predict and score logic
    return {"prediction": None, "scores": {}}
`
export const PLACEHOLDER_EVALUATION_SUMMARIZE_SOURCE = `import weave
@weave.op
def summarize(evaluation_results):
    \"\"\"Placeholder summarize function.\"\"\"
    # TODO: Implement actual summarization logic
    return {"summary": "not_implemented"}
`

/** The op's source lives in this file of the op object, as the SDKs save it. */
export const OP_FILE = 'obj.py'

/** Weave's `make_object_id`: the object id a v2 create derives from a display name. */
export function makeObjectId(name: string | null | undefined, fallback: string): string {
  if (name === null || name === undefined) return fallback
  return name.replaceAll(' ', '_').replaceAll('/', '_').replaceAll('<', '').replaceAll('>', '').toLowerCase()
}

export const objectRef = (projectId: string, objectId: string, digest: string): string =>
  `weave:///${projectId}/object/${objectId}:${digest}`
export const opRef = (projectId: string, objectId: string, digest: string): string => `weave:///${projectId}/op/${objectId}:${digest}`

export interface CreatedVersion {
  digest: string
  object_id: string
  version_index: number
}

/** Saves `source` as the op's `obj.py` and the op object pointing at it, as the SDKs do. */
export async function createOp(
  objects: ObjectsBackend,
  projectId: string,
  objectId: string,
  source: string,
  userId: string,
): Promise<CreatedVersion> {
  const file = await objects.createFile(projectId, Buffer.from(source, 'utf8'))
  const val = { _type: 'CustomWeaveType', weave_type: { type: 'Op' }, files: { [OP_FILE]: file } }
  return createVersion(objects, projectId, objectId, val, userId)
}

/** Creates (or finds) a version and reads back its `version_index`. */
export async function createVersion(
  objects: ObjectsBackend,
  projectId: string,
  objectId: string,
  val: unknown,
  userId: string,
): Promise<CreatedVersion> {
  const { digest } = await objects.create(projectId, objectId, val, userId)
  const read = await objects.read(projectId, objectId, digest, true)
  return { digest, object_id: objectId, version_index: read!.version_index }
}

/** The UTF-8 text of an op's (or model's) `obj.py`; null when the value names no such file or it is missing. */
export async function readSourceFile(objects: ObjectsBackend, projectId: string, val: unknown): Promise<string | null> {
  const files = (val as { files?: Record<string, unknown> } | null)?.files
  const digest = files && typeof files === 'object' ? files[OP_FILE] : undefined
  if (typeof digest !== 'string') return null
  const bytes = await objects.readFile(projectId, digest)
  return bytes ? bytes.toString('utf8') : null
}
