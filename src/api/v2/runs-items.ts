import { pathProject, route, type Ctx, type Reply, type RouteDef } from '../route.js'
import type { EvalDeps } from '../../calls/evals/shared.js'
import { createPrediction, deletePredictions, finishPrediction, listPredictions, readPrediction } from '../../calls/evals/predictions.js'
import { createScore, deleteScores, listScores, readScore } from '../../calls/evals/scores.js'
import { NumDeletedSchema } from '../../schemas/common.js'
import { PredictionSchema, PredictionsDeleteQuerySchema, type PredictionsDeleteQuery } from '../../schemas/v2.js'
import {
  PredictionCreateReqSchema,
  PredictionCreateResSchema,
  PredictionListSchema,
  RunItemsListQuerySchema,
  ScoreCreateReqSchema,
  ScoreCreateResSchema,
  ScoreListSchema,
  ScoreSchema,
  ScoresDeleteQuerySchema,
  SuccessSchema,
  type PredictionCreateReq,
  type RunItemsListQuery,
  type ScoreCreateReq,
  type ScoresDeleteQuery,
} from '../../schemas/v2-runs.js'
import { jsonl, scopeOf, V2, v2Route } from './runs-common.js'

const predictionHandlers = (d: EvalDeps) => ({
  create: async (ctx: Ctx<PredictionCreateReq>): Promise<Reply> => ({ body: await createPrediction(d, scopeOf(ctx), ctx.body) }),
  list: async (ctx: Ctx<unknown, RunItemsListQuery>): Promise<Reply> => jsonl(await listPredictions(d, pathProject(ctx), ctx.query)),
  read: async (ctx: Ctx): Promise<Reply> => ({ body: await readPrediction(d, pathProject(ctx), ctx.params.prediction_id!) }),
  finish: async (ctx: Ctx): Promise<Reply> => ({ body: await finishPrediction(d, scopeOf(ctx), ctx.params.prediction_id!) }),
  remove: async (ctx: Ctx<unknown, PredictionsDeleteQuery>): Promise<Reply> => ({
    body: await deletePredictions(d, pathProject(ctx), ctx.query.prediction_ids),
  }),
})

export function predictionRoutes(d: EvalDeps): RouteDef[] {
  const h = predictionHandlers(d)
  const tags = ['Predictions']
  const path = `${V2}/predictions`
  return [
    route({
      ...v2Route,
      tags,
      method: 'POST',
      path,
      summary: 'Record a prediction (a call, started and ended), in an evaluation run or alone',
      body: PredictionCreateReqSchema,
      response: { description: 'The prediction id', schema: PredictionCreateResSchema },
      handler: h.create,
    }),
    route({
      ...v2Route,
      tags,
      method: 'GET',
      path,
      summary: "List predictions, optionally one run's; JSON lines",
      query: RunItemsListQuerySchema,
      response: { description: 'One prediction per line', contentType: 'application/jsonl', schema: PredictionListSchema },
      handler: h.list,
    }),
    route({
      ...v2Route,
      tags,
      method: 'DELETE',
      path,
      summary: 'Delete predictions (repeat `prediction_ids` in the query string)',
      query: PredictionsDeleteQuerySchema,
      response: { description: 'How many were deleted', schema: NumDeletedSchema },
      handler: h.remove,
    }),
    route({
      ...v2Route,
      tags,
      method: 'GET',
      path: `${path}/{prediction_id}`,
      summary: 'Read a prediction',
      response: { description: 'The prediction', schema: PredictionSchema },
      handler: h.read,
    }),
    route({
      ...v2Route,
      tags,
      method: 'POST',
      path: `${path}/{prediction_id}/finish`,
      summary: 'Finish a prediction: in a run, ends its predict-and-score call with the output and the scores',
      response: { description: 'Success', schema: SuccessSchema },
      handler: h.finish,
    }),
  ]
}

const scoreHandlers = (d: EvalDeps) => ({
  create: async (ctx: Ctx<ScoreCreateReq>): Promise<Reply> => ({ body: await createScore(d, scopeOf(ctx), ctx.body) }),
  list: async (ctx: Ctx<unknown, RunItemsListQuery>): Promise<Reply> => jsonl(await listScores(d, pathProject(ctx), ctx.query)),
  read: async (ctx: Ctx): Promise<Reply> => ({ body: await readScore(d, pathProject(ctx), ctx.params.score_id!) }),
  remove: async (ctx: Ctx<unknown, ScoresDeleteQuery>): Promise<Reply> => ({
    body: await deleteScores(d, pathProject(ctx), ctx.query.score_ids),
  }),
})

export function scoreRoutes(d: EvalDeps): RouteDef[] {
  const h = scoreHandlers(d)
  const tags = ['Scores']
  const path = `${V2}/scores`
  return [
    route({
      ...v2Route,
      tags,
      method: 'POST',
      path,
      summary: 'Record a score of a prediction (a call; also runnable feedback on the prediction)',
      body: ScoreCreateReqSchema,
      response: { description: 'The score id', schema: ScoreCreateResSchema },
      handler: h.create,
    }),
    route({
      ...v2Route,
      tags,
      method: 'GET',
      path,
      summary: "List scores, optionally one run's; JSON lines",
      query: RunItemsListQuerySchema,
      response: { description: 'One score per line', contentType: 'application/jsonl', schema: ScoreListSchema },
      handler: h.list,
    }),
    route({
      ...v2Route,
      tags,
      method: 'DELETE',
      path,
      summary: 'Delete scores (repeat `score_ids` in the query string)',
      query: ScoresDeleteQuerySchema,
      response: { description: 'How many were deleted', schema: NumDeletedSchema },
      handler: h.remove,
    }),
    route({
      ...v2Route,
      tags,
      method: 'GET',
      path: `${path}/{score_id}`,
      summary: 'Read a score (value 0.0 when none was stored)',
      response: { description: 'The score', schema: ScoreSchema },
      handler: h.read,
    }),
  ]
}
