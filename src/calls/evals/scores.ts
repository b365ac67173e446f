import { DomainError } from '../../core/errors.js'
import { checkFeedback } from '../../catalog/feedback-rules.js'
import type { FeedbackCreateReq } from '../../schemas/feedback.js'
import type { RunItemsListQuery, Score, ScoreCreateReq } from '../../schemas/v2-runs.js'
import { uuidv7 } from '../ids.js'
import type { CallRecord } from '../model.js'
import {
  allOf,
  attrIs,
  deleteKind,
  endOf,
  ensureOp,
  KIND,
  listRunItems,
  NAME,
  parseRef,
  readKind,
  startOf,
  str,
  weaveAttrs,
  write,
  type EvalDeps,
  type ParsedRef,
  type Scope,
} from './shared.js'

export function toScore(call: CallRecord): Score {
  const w = weaveAttrs(call)
  return {
    score_id: String(call.id),
    scorer: str(w.scorer) ?? '',
    // Weave answers 0.0 for a score stored without a value.
    value: call.output ?? 0.0,
    evaluation_run_id: str(w.evaluation_run_id),
    svc_user_id: str(call.svc_user_id),
  }
}

/** A scorer is an object of this project (its feedback's runnable ref must be one), with a name an op can extend. */
function scorerRef(ref: string, project: string): ParsedRef {
  const r = parseRef(ref)
  if (!r || r.kind !== 'object' || !NAME.test(r.name))
    throw new DomainError(
      400,
      `Invalid scorer ref ${JSON.stringify(ref.slice(0, 200))}: a scorer must be an object ref, weave:///<entity>/<project>/object/<name>:<digest>`,
    )
  if (r.project !== project) throw new DomainError(400, `The scorer ref must be an object of this project (${project})`)
  return r
}

/** The runnable feedback a score leaves on its prediction call, so the UI shows it there. */
function feedbackOf(project: string, req: ScoreCreateReq, scorer: ParsedRef): FeedbackCreateReq {
  return {
    project_id: project,
    weave_ref: `weave:///${project}/call/${req.prediction_id}`,
    feedback_type: `wandb.runnable.${scorer.name}`,
    payload: { output: req.value ?? null },
    runnable_ref: req.scorer,
  }
}

/**
 * A score is a call of op `<scorer name>.score`, started and ended at once with the value as its
 * output and the prediction's inputs and output as its inputs. In a run it sits beside the
 * prediction, under the same predict-and-score call, so the prediction's finish collects it.
 * Everything is checked before anything is written.
 */
export async function createScore(d: EvalDeps, s: Scope, req: ScoreCreateReq): Promise<{ score_id: string }> {
  const scorer = scorerRef(req.scorer, s.project)
  const prediction = await readKind(d, s.project, req.prediction_id, 'prediction')
  const runId = req.evaluation_run_id ?? null
  if (runId) await readKind(d, s.project, runId, 'run')
  const feedback = feedbackOf(s.project, req, scorer)
  checkFeedback(feedback)
  const id = uuidv7()
  const weave: Record<string, unknown> = { [KIND.score]: 'true', prediction_id: req.prediction_id, scorer: req.scorer }
  if (runId) weave.evaluation_run_id = runId
  const predInputs = (prediction.inputs as Record<string, unknown> | null)?.inputs ?? {}
  await write(d, [
    startOf(s, {
      id,
      trace_id: runId ?? id,
      parent_id: runId ? (str(prediction.parent_id) ?? runId) : null,
      op_name: await ensureOp(d, s, `${scorer.name}.score`),
      attributes: { weave },
      inputs: { self: req.scorer, inputs: predInputs, output: prediction.output ?? null },
    }),
    endOf(s, id, req.value ?? null),
  ])
  await d.feedback.create([feedback], s.userId)
  return { score_id: id }
}

export const readScore = async (d: EvalDeps, project: string, id: string): Promise<Score> =>
  toScore(await readKind(d, project, id, 'score'))

export const listScores = (d: EvalDeps, project: string, q: RunItemsListQuery): Promise<AsyncGenerator<Score[]>> =>
  listRunItems(d, project, 'score', q, toScore)

export const deleteScores = (d: EvalDeps, project: string, ids: string[]): Promise<{ num_deleted: number }> =>
  deleteKind(d, project, ids, 'score')

/** The scorer name of a scorer ref as Weave reads it: the last path segment up to its `:`. */
function scorerName(ref: unknown): string {
  if (typeof ref !== 'string') return 'unknown'
  const last = ref.split('/').pop() ?? ''
  return last.includes(':') ? last.split(':')[0]! : 'unknown'
}

/** More scores than any evaluation gives one example; a bound on what one finish reads. */
const MAX_SCORES = 10_000

/** `{<scorer name>: value}` of the scores under a predict-and-score call; a later score of one scorer wins. */
export async function scoresOf(d: EvalDeps, project: string, parentId: string): Promise<Record<string, unknown>> {
  const calls = await d.calls.query(project, {
    filter: { parent_ids: [parentId] },
    query: allOf([attrIs(KIND.score, 'true')]),
    limit: MAX_SCORES,
  })
  const scores: Record<string, unknown> = {}
  for (const c of calls) {
    if (c.output === null || c.output === undefined) continue
    scores[scorerName(weaveAttrs(c).scorer)] = c.output
  }
  return scores
}
