import { DomainError } from '../core/errors.js'
import { route, type Ctx, type RouteDef } from './route.js'
import { chatCompletionsRoute, completionsRoute, modelRoute, modelsRoute } from './chat/contract.js'

function unknownInference(ctx: Ctx): never {
  throw new DomainError(
    404,
    `No inference endpoint ${ctx.method} /inference/v1${ctx.params.path}; this server offers /inference/v1/chat/completions, /inference/v1/completions, /inference/v1/models, /inference/v1/models/{id}, /inference/v1/tokenize and /inference/v1/detokenize`,
  )
}

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

/**
 * Every route of the interface spec. Each declares its contract now, so requests are validated and
 * authorised and the OpenAPI document is complete; the ones without a handler answer 501 until
 * their issue lands, never 404.
 */
export function specRoutes(opts: { chat: boolean } = { chat: false }): RouteDef[] {
  const pendingChat = opts.chat
    ? []
    : [
        chatCompletionsRoute({ pending: CHAT }),
        completionsRoute({ pending: CHAT }),
        modelsRoute({ pending: CHAT }),
        modelRoute({ pending: CHAT }),
      ]
  return [...pendingChat, ...inferencePrefixRoutes()]
}
