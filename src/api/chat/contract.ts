import { route, type Ctx, type Reply, type RouteDef } from '../route.js'
import { ChatCompletionReqSchema, ChatCompletionResSchema, ModelCardSchema } from '../../schemas/chat.js'
import { CompletionReqSchema, CompletionResSchema } from '../../schemas/completions.js'
import { chatProject } from './request.js'

/**
 * The contracts of the chat routes, served by chatRoutes or, on a server without a model, declared
 * with a `pending` text by specRoutes (501). The completion routes read their bodies themselves
 * (`rawBody`, see body.ts) so that integers are range-checked on the digits the client sent.
 */
type Serve = { handler: (ctx: Ctx) => Promise<Reply> } | { pending: string }

const openai = { family: 'openai' as const, auth: 'key' as const, tags: ['Chat'] }

// The project a completion is recorded in must be one the key may write (403): the one OpenAI-Project names,
// or the default `<user id>/inference`, whose entity a key limited to other entities does not reach either.
const projectHeader = (ctx: Ctx) => chatProject(ctx.headers, ctx.principal)

export function chatCompletionsRoute(serve: Serve): RouteDef {
  return route({
    ...openai,
    method: 'POST',
    path: '/v1/chat/completions',
    summary: 'Create a chat completion',
    description: 'vLLM-compatible: sampling extensions at the top level, SSE streaming with `stream`.',
    body: ChatCompletionReqSchema,
    rawBody: true,
    response: { description: 'A completion, or an SSE stream of chunks when `stream` is true', schema: ChatCompletionResSchema },
    project: projectHeader,
    ...serve,
  })
}

export function completionsRoute(serve: Serve): RouteDef {
  return route({
    ...openai,
    method: 'POST',
    path: '/v1/completions',
    summary: 'Create a (legacy) text completion',
    description: 'vLLM-compatible: prompts as text or token ids, integer `logprobs`, `echo`; SSE streaming with `stream`.',
    body: CompletionReqSchema,
    rawBody: true,
    response: {
      description: 'A completion, or an SSE stream of `text_completion` chunks when `stream` is true',
      schema: CompletionResSchema,
    },
    project: projectHeader,
    ...serve,
  })
}

export function modelsRoute(serve: { handler: () => Reply } | { pending: string }): RouteDef {
  return route({ ...openai, method: 'GET', path: '/v1/models', summary: 'List served models', ...serve })
}

export function modelRoute(serve: { handler: (ctx: Ctx) => Reply } | { pending: string }): RouteDef {
  return route({
    ...openai,
    method: 'GET',
    path: '/v1/models/{id}',
    summary: 'One served model',
    description: 'Unknown names are 404.',
    response: { description: 'The model card', schema: ModelCardSchema },
    ...serve,
  })
}
