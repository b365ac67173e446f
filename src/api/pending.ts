import { DomainError } from '../core/errors.js'
import { pathProject, route, type Ctx, type RouteDef } from './route.js'
import { NumDeletedSchema } from '../schemas/common.js'
import {
  DatasetCreateReqSchema,
  DatasetCreateResSchema,
  EvaluationDeleteQuerySchema,
  ListQuerySchema,
  OpVersionQuerySchema,
  OpVersionSchema,
  PredictionSchema,
  PredictionsDeleteQuerySchema,
} from '../schemas/v2.js'
import { chatCompletionsRoute, modelsRoute } from './chat/contract.js'

function unknownInference(ctx: Ctx): never {
  throw new DomainError(
    404,
    `No inference endpoint ${ctx.method} /inference/v1${ctx.params.path}; this server offers /inference/v1/chat/completions and /inference/v1/models`,
  )
}

const OBJECTS = 'the /v2 project API'
const CHAT = 'chat completions (this server was started without a model: --model none)'

/** `/inference/v1/X` is served as `/v1/X` (http/app.ts); these catch-alls answer the sub-paths no /v1 route has. */
function inferencePrefixRoutes(): RouteDef[] {
  const prefix = {
    path: '/inference/v1{path}',
    catchAll: true,
    family: 'openai' as const,
    auth: 'key' as const,
    tags: ['Chat'],
    description: '`/inference/v1/X` answers as `/v1/X`; sub-paths with no such route are 404.',
    handler: unknownInference,
  }
  return [
    route({ ...prefix, method: 'GET', summary: 'The chat-completion-compatible API under the /inference/v1 prefix (read endpoints)' }),
    route({ ...prefix, method: 'POST', summary: 'The chat-completion-compatible API under the /inference/v1 prefix' }),
  ]
}

/** The /v2 project API: contracts only, until it lands. */
function pendingObjectRoutes(): RouteDef[] {
  const v2 = '/v2/{entity}/{project}'
  const later = { family: 'trace' as const, auth: 'key' as const, project: pathProject, pending: OBJECTS }
  return [
    route({
      ...later,
      method: 'POST',
      path: `${v2}/datasets`,
      tags: ['Datasets'],
      summary: 'Create a dataset',
      body: DatasetCreateReqSchema,
      response: { description: 'The dataset version', schema: DatasetCreateResSchema },
    }),
    ...pendingPredictionRoutes(v2, later),
    ...pendingEvaluationRoutes(v2, later),
  ]
}

type Later = { family: 'trace'; auth: 'key'; project: (ctx: Ctx) => string; pending: string }

function pendingPredictionRoutes(v2: string, later: Later): RouteDef[] {
  return [
    route({
      ...later,
      method: 'GET',
      path: `${v2}/predictions/{prediction_id}`,
      tags: ['Predictions'],
      summary: 'Read a prediction',
      response: { description: 'The prediction', schema: PredictionSchema },
    }),
    route({
      ...later,
      method: 'DELETE',
      path: `${v2}/predictions`,
      tags: ['Predictions'],
      summary: 'Delete predictions (repeat `prediction_ids` in the query string)',
      query: PredictionsDeleteQuerySchema,
      response: { description: 'How many were deleted', schema: NumDeletedSchema },
    }),
    route({
      ...later,
      method: 'GET',
      path: `${v2}/ops/{object_id}/versions/{digest}`,
      tags: ['Ops'],
      summary: 'Read one op version',
      query: OpVersionQuerySchema,
      response: { description: 'The op version', schema: OpVersionSchema },
    }),
  ]
}

function pendingEvaluationRoutes(v2: string, later: Later): RouteDef[] {
  return [
    route({
      ...later,
      method: 'GET',
      path: `${v2}/evaluations`,
      tags: ['Evaluations'],
      summary: 'List evaluations',
      query: ListQuerySchema,
    }),
    route({
      ...later,
      method: 'DELETE',
      path: `${v2}/evaluations/{object_id}`,
      tags: ['Evaluations'],
      summary: 'Delete versions of an evaluation (repeat `digests`; none given: all versions)',
      query: EvaluationDeleteQuerySchema,
      response: { description: 'How many versions were deleted', schema: NumDeletedSchema },
    }),
    route({ ...later, method: 'GET', path: `${v2}/scorers`, tags: ['Scorers'], summary: 'List scorers', query: ListQuerySchema }),
  ]
}

/**
 * Every route of the interface spec. Each declares its contract now, so requests are validated and
 * authorised and the OpenAPI document is complete; the ones without a handler answer 501 until
 * their issue lands, never 404.
 */
export function specRoutes(opts: { chat: boolean } = { chat: false }): RouteDef[] {
  const pendingChat = opts.chat ? [] : [chatCompletionsRoute({ pending: CHAT }), modelsRoute({ pending: CHAT })]
  return [...pendingChat, ...inferencePrefixRoutes(), ...pendingObjectRoutes()]
}
