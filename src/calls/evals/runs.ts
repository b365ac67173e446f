import { uuidv7 } from '../ids.js'
import type { CallRecord } from '../model.js'
import type { EvaluationRun, EvaluationRunCreateReq, EvaluationRunFinishReq, EvaluationRunListQuery } from '../../schemas/v2-runs.js'
import {
  allOf,
  attrIn,
  attrIs,
  checkIds,
  deleteKind,
  endOf,
  ensureOp,
  KIND,
  listKind,
  readKind,
  RUN_OP,
  startOf,
  str,
  weaveAttrs,
  write,
  type EvalDeps,
  type Scope,
} from './shared.js'

/** `running` until the call ends; then `failed` when it ended with an exception, else `completed`. */
export function runStatus(call: CallRecord): 'running' | 'completed' | 'failed' {
  if (!call.ended_at) return 'running'
  return call.exception ? 'failed' : 'completed'
}

export function toRun(call: CallRecord): EvaluationRun {
  const w = weaveAttrs(call)
  return {
    evaluation_run_id: String(call.id),
    evaluation: str(w.evaluation) ?? '',
    model: str(w.model) ?? '',
    status: runStatus(call),
    started_at: str(call.started_at),
    finished_at: str(call.ended_at),
    summary: (call.summary as Record<string, unknown> | null) ?? null,
    source_evaluation_run_id: str(w.source_evaluation_run_id),
  }
}

/**
 * A run is the root call of its own trace (id = trace id), op `Evaluation.evaluate`, marked
 * `attributes.weave.evaluation_run = "true"` with the evaluation and model refs, which are its inputs.
 */
export async function createRun(d: EvalDeps, s: Scope, req: EvaluationRunCreateReq): Promise<{ evaluation_run_id: string }> {
  const id = uuidv7()
  const op = await ensureOp(d, s, RUN_OP)
  const weave: Record<string, unknown> = { [KIND.run]: 'true', evaluation: req.evaluation, model: req.model }
  if (req.source_evaluation_run_id) weave.source_evaluation_run_id = req.source_evaluation_run_id
  await write(d, [
    startOf(s, {
      id,
      trace_id: id,
      op_name: op,
      attributes: { weave },
      inputs: { self: req.evaluation, model: req.model },
    }),
  ])
  return { evaluation_run_id: id }
}

export const readRun = async (d: EvalDeps, project: string, id: string): Promise<EvaluationRun> =>
  toRun(await readKind(d, project, id, 'run'))

/** Every filter list narrows (empty lists filter nothing, as in Weave); oldest first. */
export function listRuns(d: EvalDeps, project: string, q: EvaluationRunListQuery): Promise<AsyncGenerator<EvaluationRun[]>> {
  // The ref lists become query literals, which the query compiler bounds; ids go through the call filter.
  checkIds(q.evaluations ?? [], 'evaluations', 500)
  checkIds(q.models ?? [], 'models', 500)
  checkIds(q.evaluation_run_ids ?? [], 'evaluation_run_ids')
  const conds: object[] = [attrIs(KIND.run, 'true')]
  if (q.evaluations?.length) conds.push(attrIn('evaluation', q.evaluations))
  if (q.models?.length) conds.push(attrIn('model', q.models))
  return listKind(d, project, { query: allOf(conds), callIds: q.evaluation_run_ids, limit: q.limit, offset: q.offset }, toRun)
}

/** Ends the run call: output `{}`, the summary given (or `{}`). Finishing again ends it again. */
export async function finishRun(d: EvalDeps, s: Scope, id: string, req: EvaluationRunFinishReq): Promise<{ success: true }> {
  await readKind(d, s.project, id, 'run')
  await write(d, [endOf(s, id, {}, req.summary ?? {})])
  return { success: true }
}

/** Deletes runs with every call under them: predict-and-score calls, predictions, scores. */
export const deleteRuns = (d: EvalDeps, project: string, ids: string[]): Promise<{ num_deleted: number }> =>
  deleteKind(d, project, ids, 'run')
