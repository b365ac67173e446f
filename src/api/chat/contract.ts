import { route, type Ctx, type Reply, type RouteDef } from '../route.js'
import { ChatCompletionReqSchema, ChatCompletionResSchema, type ChatCompletionReq } from '../../schemas/chat.js'

/**
 * The contracts of the chat routes, served by chatRoutes or, on a server without a model, declared
 * with a `pending` text by specRoutes (501).
 */
export function chatCompletionsRoute(serve: { handler: (ctx: Ctx<ChatCompletionReq>) => Promise<Reply> } | { pending: string }): RouteDef {
  return route({
    method: 'POST',
    path: '/v1/chat/completions',
    family: 'openai',
    auth: 'key',
    tags: ['Chat'],
    summary: 'Create a chat completion',
    description: 'vLLM-compatible: sampling extensions at the top level, SSE streaming with `stream`.',
    body: ChatCompletionReqSchema,
    response: { description: 'A completion, or an SSE stream of chunks when `stream` is true', schema: ChatCompletionResSchema },
    // A project named by OpenAI-Project must be one the key may write (403); the default is the caller's own.
    project: (ctx) => ctx.headers['openai-project'] || undefined,
    ...serve,
  })
}

export function modelsRoute(serve: { handler: () => Reply } | { pending: string }): RouteDef {
  return route({
    method: 'GET',
    path: '/v1/models',
    family: 'openai',
    auth: 'key',
    tags: ['Chat'],
    summary: 'List served models',
    ...serve,
  })
}
