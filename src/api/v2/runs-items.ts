import { route, type Ctx, type Reply, type RouteDef } from '../route.js'
import type { EvalDeps } from '../../calls/evals/shared.js'
import { createPrediction, deletePredictions, finishPrediction, listPredictions, readPrediction } from '../../calls/evals/predictions.js'
import { createScore, deleteScores, listScores, readScore } from '../../calls/evals/scores.js'
import { PredictionSchema, PredictionsDeleteQuerySchema } from '../../schemas/v2.js'
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
} from '../../schemas/v2-runs.js'
import { callKindRoutes, scopeOf, V2, v2Route, type CallKindRoutes } from './runs-common.js'

const PREDICTIONS: CallKindRoutes = {
  tag: 'Predictions',
  path: `${V2}/predictions`,
  id: 'prediction_id',
  create: {
    summary: 'Record a prediction (a call, started and ended), in an evaluation run or alone',
    body: PredictionCreateReqSchema,
    response: { description: 'The prediction id', schema: PredictionCreateResSchema },
    run: createPrediction,
  },
  list: {
    summary: "List predictions, optionally one run's; JSON lines",
    query: RunItemsListQuerySchema,
    item: 'prediction',
    schema: PredictionListSchema,
    run: listPredictions,
  },
  remove: {
    summary: 'Delete predictions (repeat `prediction_ids` in the query string)',
    query: PredictionsDeleteQuerySchema,
    description: 'How many were deleted',
    run: deletePredictions,
  },
  read: { summary: 'Read a prediction', response: { description: 'The prediction', schema: PredictionSchema }, run: readPrediction },
}

function predictionFinishRoute(d: EvalDeps): RouteDef {
  const finish = async (ctx: Ctx): Promise<Reply> => ({ body: await finishPrediction(d, scopeOf(ctx), ctx.params.prediction_id!) })
  return route({
    ...v2Route,
    tags: [PREDICTIONS.tag],
    method: 'POST',
    path: `${PREDICTIONS.path}/{prediction_id}/finish`,
    summary: 'Finish a prediction: in a run, ends its predict-and-score call with the output and the scores',
    response: { description: 'Success', schema: SuccessSchema },
    handler: finish,
  })
}

export const predictionRoutes = (d: EvalDeps): RouteDef[] => [...callKindRoutes(d, PREDICTIONS), predictionFinishRoute(d)]

const SCORES: CallKindRoutes = {
  tag: 'Scores',
  path: `${V2}/scores`,
  id: 'score_id',
  create: {
    summary: 'Record a score of a prediction (a call; also runnable feedback on the prediction)',
    body: ScoreCreateReqSchema,
    response: { description: 'The score id', schema: ScoreCreateResSchema },
    run: createScore,
  },
  list: {
    summary: "List scores, optionally one run's; JSON lines",
    query: RunItemsListQuerySchema,
    item: 'score',
    schema: ScoreListSchema,
    run: listScores,
  },
  remove: {
    summary: 'Delete scores (repeat `score_ids` in the query string)',
    query: ScoresDeleteQuerySchema,
    description: 'How many were deleted',
    run: deleteScores,
  },
  read: {
    summary: 'Read a score (value 0.0 when none was stored)',
    response: { description: 'The score', schema: ScoreSchema },
    run: readScore,
  },
}

export const scoreRoutes = (d: EvalDeps): RouteDef[] => callKindRoutes(d, SCORES)
