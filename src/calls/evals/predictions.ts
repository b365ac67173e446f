import { microsOf } from '../ingest/parts.js'
import { uuidv7 } from '../ids.js'
import type { CallPart, CallRecord } from '../model.js'
import type { Prediction } from '../../schemas/v2.js'
import type { PredictionCreateReq, RunItemsListQuery } from '../../schemas/v2-runs.js'
import {
  deleteKind,
  endOf,
  ensureOp,
  KIND,
  listRunItems,
  NAME,
  opNameIs,
  parseRef,
  PREDICT_AND_SCORE_OP,
  readKind,
  startOf,
  str,
  weaveAttrs,
  write,
  type EvalDeps,
  type Scope,
} from './shared.js'
import { scoresOf } from './scores.js'

export function toPrediction(call: CallRecord): Prediction {
  const w = weaveAttrs(call)
  const inputs = (call.inputs as Record<string, unknown> | null)?.inputs
  return {
    prediction_id: String(call.id),
    model: str(w.model) ?? '',
    inputs: inputs && typeof inputs === 'object' && !Array.isArray(inputs) ? (inputs as Record<string, unknown>) : {},
    output: call.output ?? null,
    evaluation_run_id: str(w.evaluation_run_id),
    svc_user_id: str(call.svc_user_id),
  }
}

/** `<model name>.predict`, the name taken from the model ref; `Model.predict` when the ref names none usable. */
function predictOpName(model: string): string {
  const name = parseRef(model)?.name
  return `${name && NAME.test(name) ? name : 'Model'}.predict`
}

/**
 * In a run, a prediction sits under its own `Evaluation.predict_and_score` call (a child of the
 * run, in the run's trace, its inputs the evaluation, the model and the example), which the
 * prediction's finish ends. Outside a run it is the root of its own trace.
 */
async function predictAndScore(d: EvalDeps, s: Scope, runId: string, predictionId: string, req: PredictionCreateReq) {
  const run = await readKind(d, s.project, runId, 'run')
  const id = uuidv7()
  const start = startOf(s, {
    id,
    trace_id: runId,
    parent_id: runId,
    op_name: await ensureOp(d, s, PREDICT_AND_SCORE_OP),
    attributes: { weave: { predict_call_id: predictionId } },
    inputs: { self: (run.inputs as Record<string, unknown>).self ?? null, model: req.model, example: req.inputs },
  })
  return { id, start }
}

/** A prediction call is started and ended at once, its output the one given. */
export async function createPrediction(d: EvalDeps, s: Scope, req: PredictionCreateReq): Promise<{ prediction_id: string }> {
  const id = uuidv7()
  const runId = req.evaluation_run_id ?? null
  const parent = runId ? await predictAndScore(d, s, runId, id, req) : null
  const weave: Record<string, unknown> = { [KIND.prediction]: 'true', model: req.model }
  if (runId) weave.evaluation_run_id = runId
  if (req.genai_span_ref) weave.genai_span_ref = req.genai_span_ref
  const op = await ensureOp(d, s, predictOpName(req.model))
  const parts: CallPart[] = parent ? [parent.start] : []
  parts.push(
    startOf(s, {
      id,
      trace_id: runId ?? id,
      parent_id: parent?.id ?? null,
      op_name: op,
      attributes: { weave },
      inputs: { self: req.model, inputs: req.inputs },
    }),
    endOf(s, id, req.output),
  )
  await write(d, parts)
  return { prediction_id: id }
}

export const readPrediction = async (d: EvalDeps, project: string, id: string): Promise<Prediction> =>
  toPrediction(await readKind(d, project, id, 'prediction'))

export const listPredictions = (d: EvalDeps, project: string, q: RunItemsListQuery): Promise<AsyncGenerator<Prediction[]>> =>
  listRunItems(d, project, 'prediction', q, toPrediction)

/** Seconds between a call's start and end, or null while it runs. */
function latencySeconds(call: CallRecord): number | null {
  const start = str(call.started_at)
  const end = str(call.ended_at)
  if (!start || !end) return null
  return Number(BigInt(microsOf(end, 'ended_at')) - BigInt(microsOf(start, 'started_at'))) / 1e6
}

/**
 * Ends the prediction if it is still running (one made here ended at creation, and Weave keeps a
 * call's first end, so it is left as it is); then, when its parent is a predict-and-score call, ends
 * that with `{output, scores: {<scorer name>: value}, model_latency: {mean: seconds} | null}`.
 */
export async function finishPrediction(d: EvalDeps, s: Scope, id: string): Promise<{ success: true }> {
  const prediction = await readKind(d, s.project, id, 'prediction')
  if (!prediction.ended_at) await write(d, [endOf(s, id, null)])
  const parentId = str(prediction.parent_id)
  const parent = parentId ? await d.calls.read(s.project, parentId) : null
  if (!parent || !opNameIs(parent.op_name, PREDICT_AND_SCORE_OP)) return { success: true }
  const latency = latencySeconds(prediction)
  const output = {
    output: prediction.output ?? null,
    scores: await scoresOf(d, s.project, String(parent.id)),
    model_latency: latency === null ? null : { mean: latency },
  }
  await write(d, [endOf(s, String(parent.id), output)])
  return { success: true }
}

export const deletePredictions = (d: EvalDeps, project: string, ids: string[]): Promise<{ num_deleted: number }> =>
  deleteKind(d, project, ids, 'prediction')
