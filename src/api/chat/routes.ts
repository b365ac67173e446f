import { DomainError } from '../../core/errors.js'
import { route, type RouteDef } from '../route.js'
import { DetokenizeReqSchema, TokenizeReqSchema } from '../../schemas/chat.js'
import type { ModelPool as ModelServer } from '../../inference/client.js'
import { chatCompletionsRoute, modelsRoute } from './contract.js'
import { completeHandler } from './complete.js'
import { detokenize, listModels, tokenize } from './models.js'
import type { CompletionRecorder } from './record.js'
import type { ReasoningParserName, ToolParserName } from '../../core/config.js'

export interface ChatOptions {
  models: ModelServer[]
  priorityScheduling: boolean
  /** Where each completion is recorded as a call; none: not recorded. */
  recorder?: CompletionRecorder
  /** `--tool-call-parser`; null: the one each model's template calls for. */
  toolCallParser?: ToolParserName | null
  reasoningParser?: ReasoningParserName | null
}

/** The chat-completion API of the served models (OpenAI/vLLM-compatible). */
export function chatRoutes(o: ChatOptions): RouteDef[] {
  const byName = new Map(o.models.map((m) => [m.info.name, m]))
  const pick = (name: string | null | undefined): ModelServer => {
    if (!name) return o.models[0]!
    const m = byName.get(name)
    if (!m) throw new DomainError(404, `The model \`${name}\` does not exist.`, { param: 'model' })
    return m
  }
  const chat = { family: 'openai' as const, auth: 'key' as const, tags: ['Chat'] }
  return [
    chatCompletionsRoute({
      handler: completeHandler({
        priorityScheduling: o.priorityScheduling,
        recorder: o.recorder,
        pick,
        toolCallParser: o.toolCallParser,
        reasoningParser: o.reasoningParser,
      }),
    }),
    modelsRoute({ handler: listModels(o.models) }),
    route({
      ...chat,
      method: 'POST',
      path: '/tokenize',
      summary: 'Tokenize a prompt or a chat',
      body: TokenizeReqSchema,
      handler: tokenize(pick),
    }),
    route({
      ...chat,
      method: 'POST',
      path: '/detokenize',
      summary: 'Turn token ids back into text',
      body: DetokenizeReqSchema,
      handler: detokenize(pick),
    }),
  ]
}
