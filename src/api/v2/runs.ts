import { route, type Ctx, type Reply, type RouteDef } from '../route.js'
import type { EvalDeps } from '../../calls/evals/shared.js'
import { createRun, deleteRuns, finishRun, listRuns, readRun } from '../../calls/evals/runs.js'
import { completeCalls } from '../../calls/evals/complete.js'
import {
  CallsCompleteReqSchema,
  CallsCompleteResSchema,
  EvaluationRunCreateReqSchema,
  EvaluationRunCreateResSchema,
  EvaluationRunFinishReqSchema,
  EvaluationRunListQuerySchema,
  EvaluationRunListSchema,
  EvaluationRunSchema,
  EvaluationRunsDeleteQuerySchema,
  SuccessSchema,
  type CallsCompleteReq,
  type EvaluationRunFinishReq,
} from '../../schemas/v2-runs.js'
import { predictionRoutes, scoreRoutes } from './runs-items.js'
import { callKindRoutes, scopeOf, V2, v2Route, type CallKindRoutes } from './runs-common.js'

const RUNS: CallKindRoutes = {
  tag: 'Evaluation runs',
  path: `${V2}/evaluation_runs`,
  id: 'evaluation_run_id',
  create: {
    summary: 'Start an evaluation run (a call, op Evaluation.evaluate)',
    body: EvaluationRunCreateReqSchema,
    response: { description: 'The run id', schema: EvaluationRunCreateResSchema },
    run: createRun,
  },
  list: {
    summary: 'List evaluation runs, filtered by evaluation, model or id (repeat each parameter); JSON lines',
    query: EvaluationRunListQuerySchema,
    item: 'run',
    schema: EvaluationRunListSchema,
    run: listRuns,
  },
  remove: {
    summary: 'Delete evaluation runs and every call under them (repeat `evaluation_run_ids`)',
    query: EvaluationRunsDeleteQuerySchema,
    description: 'How many calls were deleted, the runs and the calls under them',
    run: deleteRuns,
  },
  read: {
    summary: 'Read an evaluation run: refs, status (running, completed, failed), times, summary',
    response: { description: 'The run', schema: EvaluationRunSchema },
    run: readRun,
  },
}

function runFinishRoute(d: EvalDeps): RouteDef {
  const finish = async (ctx: Ctx<EvaluationRunFinishReq>): Promise<Reply> => ({
    body: await finishRun(d, scopeOf(ctx), ctx.params.evaluation_run_id!, ctx.body),
  })
  return route({
    ...v2Route,
    tags: [RUNS.tag],
    method: 'POST',
    path: `${RUNS.path}/{evaluation_run_id}/finish`,
    summary: 'Finish an evaluation run (ends its call, with the summary given)',
    body: EvaluationRunFinishReqSchema,
    response: { description: 'Success', schema: SuccessSchema },
    handler: finish,
  })
}

function completeRoute(d: EvalDeps): RouteDef {
  const complete = async (ctx: Ctx<CallsCompleteReq>): Promise<Reply> => ({ body: await completeCalls(d, scopeOf(ctx), ctx.body.batch) })
  return route({
    ...v2Route,
    tags: ['Calls'],
    method: 'POST',
    path: `${V2}/calls/complete`,
    summary: 'Write finished calls of this project, each with its start and end fields',
    body: CallsCompleteReqSchema,
    response: { description: 'Empty', schema: CallsCompleteResSchema },
    handler: complete,
  })
}

/** Evaluation runs, predictions and scores (all calls underneath), and `calls/complete`. */
export function v2RunRoutes(d: EvalDeps): RouteDef[] {
  return [...callKindRoutes(d, RUNS), runFinishRoute(d), ...predictionRoutes(d), ...scoreRoutes(d), completeRoute(d)]
}
