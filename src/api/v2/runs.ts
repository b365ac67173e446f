import { pathProject, route, type Ctx, type Reply, type RouteDef } from '../route.js'
import type { EvalDeps } from '../../calls/evals/shared.js'
import { createRun, deleteRuns, finishRun, listRuns, readRun } from '../../calls/evals/runs.js'
import { completeCalls } from '../../calls/evals/complete.js'
import { NumDeletedSchema } from '../../schemas/common.js'
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
  type EvaluationRunCreateReq,
  type EvaluationRunFinishReq,
  type EvaluationRunListQuery,
  type EvaluationRunsDeleteQuery,
} from '../../schemas/v2-runs.js'
import { predictionRoutes, scoreRoutes } from './runs-items.js'
import { jsonl, scopeOf, V2, v2Route } from './runs-common.js'

const handlers = (d: EvalDeps) => ({
  create: async (ctx: Ctx<EvaluationRunCreateReq>): Promise<Reply> => ({ body: await createRun(d, scopeOf(ctx), ctx.body) }),
  list: async (ctx: Ctx<unknown, EvaluationRunListQuery>): Promise<Reply> => jsonl(await listRuns(d, pathProject(ctx), ctx.query)),
  read: async (ctx: Ctx): Promise<Reply> => ({ body: await readRun(d, pathProject(ctx), ctx.params.evaluation_run_id!) }),
  finish: async (ctx: Ctx<EvaluationRunFinishReq>): Promise<Reply> => ({
    body: await finishRun(d, scopeOf(ctx), ctx.params.evaluation_run_id!, ctx.body),
  }),
  remove: async (ctx: Ctx<unknown, EvaluationRunsDeleteQuery>): Promise<Reply> => ({
    body: await deleteRuns(d, pathProject(ctx), ctx.query.evaluation_run_ids),
  }),
  complete: async (ctx: Ctx<CallsCompleteReq>): Promise<Reply> => ({ body: await completeCalls(d, scopeOf(ctx), ctx.body.batch) }),
})

function runRoutes(d: EvalDeps): RouteDef[] {
  const h = handlers(d)
  const tags = ['Evaluation runs']
  const runs = `${V2}/evaluation_runs`
  return [
    route({
      ...v2Route,
      tags,
      method: 'POST',
      path: runs,
      summary: 'Start an evaluation run (a call, op Evaluation.evaluate)',
      body: EvaluationRunCreateReqSchema,
      response: { description: 'The run id', schema: EvaluationRunCreateResSchema },
      handler: h.create,
    }),
    route({
      ...v2Route,
      tags,
      method: 'GET',
      path: runs,
      summary: 'List evaluation runs, filtered by evaluation, model or id (repeat each parameter); JSON lines',
      query: EvaluationRunListQuerySchema,
      response: { description: 'One run per line', contentType: 'application/jsonl', schema: EvaluationRunListSchema },
      handler: h.list,
    }),
    route({
      ...v2Route,
      tags,
      method: 'DELETE',
      path: runs,
      summary: 'Delete evaluation runs and every call under them (repeat `evaluation_run_ids`)',
      query: EvaluationRunsDeleteQuerySchema,
      response: { description: 'How many calls were deleted, the runs and the calls under them', schema: NumDeletedSchema },
      handler: h.remove,
    }),
    route({
      ...v2Route,
      tags,
      method: 'GET',
      path: `${runs}/{evaluation_run_id}`,
      summary: 'Read an evaluation run: refs, status (running, completed, failed), times, summary',
      response: { description: 'The run', schema: EvaluationRunSchema },
      handler: h.read,
    }),
    route({
      ...v2Route,
      tags,
      method: 'POST',
      path: `${runs}/{evaluation_run_id}/finish`,
      summary: 'Finish an evaluation run (ends its call, with the summary given)',
      body: EvaluationRunFinishReqSchema,
      response: { description: 'Success', schema: SuccessSchema },
      handler: h.finish,
    }),
  ]
}

function completeRoute(d: EvalDeps): RouteDef {
  return route({
    ...v2Route,
    tags: ['Calls'],
    method: 'POST',
    path: `${V2}/calls/complete`,
    summary: 'Write finished calls of this project, each with its start and end fields',
    body: CallsCompleteReqSchema,
    response: { description: 'Empty', schema: CallsCompleteResSchema },
    handler: handlers(d).complete,
  })
}

/** Evaluation runs, predictions and scores (all calls underneath), and `calls/complete`. */
export function v2RunRoutes(d: EvalDeps): RouteDef[] {
  return [...runRoutes(d), ...predictionRoutes(d), ...scoreRoutes(d), completeRoute(d)]
}
