import { DomainError } from '../core/errors.js'
import { bodyProject, pathProject, route, type Ctx, type RouteDef } from './route.js'
import { NumDeletedSchema } from '../schemas/common.js'
import { ObjQueryReqSchema, ObjQueryResSchema } from '../schemas/objects.js'
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
import { chatCompletionsRoute, modelsRoute } from './chat.js'

function unknownInference(ctx: Ctx): never {
  throw new DomainError(
    404,
    `No inference endpoint ${ctx.method} /inference/v1${ctx.params.path}; this server offers /inference/v1/chat/completions and /inference/v1/models`,
  )
}

const OBJECTS = 'objects and the /v2 project API'
const CHAT = 'chat completions (this server was started without a model: --model none)'

/**
 * Every route of the interface spec. Each declares its contract now, so requests are validated and
 * authorised and the OpenAPI document is complete; the ones without a handler answer 501 until
 * their issue lands, never 404.
 */
export function specRoutes(opts: { chat: boolean } = { chat: false }): RouteDef[] {
  const v2 = '/v2/{entity}/{project}'
  const pendingChat = opts.chat ? [] : [chatCompletionsRoute({ pending: CHAT }), modelsRoute({ pending: CHAT })]
  return [
    ...pendingChat,
    route({
      method: 'GET',
      path: '/inference/v1{path}',
      catchAll: true,
      family: 'openai',
      auth: 'key',
      tags: ['Chat'],
      summary: 'The chat-completion-compatible API under the /inference/v1 prefix (read endpoints)',
      description: '`/inference/v1/X` answers as `/v1/X`; sub-paths with no such route are 404.',
      handler: unknownInference,
    }),
    route({
      method: 'POST',
      path: '/inference/v1{path}',
      catchAll: true,
      family: 'openai',
      auth: 'key',
      tags: ['Chat'],
      summary: 'The chat-completion-compatible API under the /inference/v1 prefix',
      description: '`/inference/v1/X` answers as `/v1/X`; sub-paths with no such route are 404.',
      handler: unknownInference,
    }),
    route({
      method: 'POST',
      path: '/objs/query',
      family: 'trace',
      auth: 'key',
      tags: ['Objects'],
      summary: 'Query object versions',
      body: ObjQueryReqSchema,
      response: { description: 'Object versions', schema: ObjQueryResSchema },
      project: bodyProject,
      pending: OBJECTS,
    }),
    route({
      method: 'POST',
      path: `${v2}/datasets`,
      family: 'trace',
      auth: 'key',
      tags: ['Datasets'],
      summary: 'Create a dataset',
      body: DatasetCreateReqSchema,
      response: { description: 'The dataset version', schema: DatasetCreateResSchema },
      project: pathProject,
      pending: OBJECTS,
    }),
    route({
      method: 'GET',
      path: `${v2}/predictions/{prediction_id}`,
      family: 'trace',
      auth: 'key',
      tags: ['Predictions'],
      summary: 'Read a prediction',
      response: { description: 'The prediction', schema: PredictionSchema },
      project: pathProject,
      pending: OBJECTS,
    }),
    route({
      method: 'DELETE',
      path: `${v2}/predictions`,
      family: 'trace',
      auth: 'key',
      tags: ['Predictions'],
      summary: 'Delete predictions (repeat `prediction_ids` in the query string)',
      query: PredictionsDeleteQuerySchema,
      response: { description: 'How many were deleted', schema: NumDeletedSchema },
      project: pathProject,
      pending: OBJECTS,
    }),
    route({
      method: 'GET',
      path: `${v2}/ops/{object_id}/versions/{digest}`,
      family: 'trace',
      auth: 'key',
      tags: ['Ops'],
      summary: 'Read one op version',
      query: OpVersionQuerySchema,
      response: { description: 'The op version', schema: OpVersionSchema },
      project: pathProject,
      pending: OBJECTS,
    }),
    route({
      method: 'GET',
      path: `${v2}/evaluations`,
      family: 'trace',
      auth: 'key',
      tags: ['Evaluations'],
      summary: 'List evaluations',
      query: ListQuerySchema,
      project: pathProject,
      pending: OBJECTS,
    }),
    route({
      method: 'DELETE',
      path: `${v2}/evaluations/{object_id}`,
      family: 'trace',
      auth: 'key',
      tags: ['Evaluations'],
      summary: 'Delete versions of an evaluation (repeat `digests`; none given: all versions)',
      query: EvaluationDeleteQuerySchema,
      response: { description: 'How many versions were deleted', schema: NumDeletedSchema },
      project: pathProject,
      pending: OBJECTS,
    }),
    route({
      method: 'GET',
      path: `${v2}/scorers`,
      family: 'trace',
      auth: 'key',
      tags: ['Scorers'],
      summary: 'List scorers',
      query: ListQuerySchema,
      project: pathProject,
      pending: OBJECTS,
    }),
  ]
}
