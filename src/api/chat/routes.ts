import { DomainError } from '../../core/errors.js'
import { route, type RouteDef } from '../route.js'
import { DetokenizeReqSchema, TokenizeReqSchema } from '../../schemas/chat.js'
import type { ModelPool as ModelServer } from '../../inference/client.js'
import { chatCompletionsRoute, completionsRoute, modelRoute, modelsRoute } from './contract.js'
import { completeHandler, type CompleteOptions } from './complete.js'
import { legacyHandler } from './legacy.js'
import { detokenize, getModel, listModels, tokenize } from './models.js'
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
  const complete: CompleteOptions = {
    priorityScheduling: o.priorityScheduling,
    recorder: o.recorder,
    pick,
    toolCallParser: o.toolCallParser,
    reasoningParser: o.reasoningParser,
  }
  return [
    chatCompletionsRoute({ handler: completeHandler(complete) }),
    completionsRoute({ handler: legacyHandler(complete) }),
    modelsRoute({ handler: listModels(o.models) }),
    modelRoute({ handler: getModel(o.models) }),
    ...tokenizerRoutes(pick),
  ]
}

/**
 * /tokenize and /detokenize, also under /inference/v1: they live outside /v1, so the prefix's
 * mapping onto /v1 routes does not reach them.
 */
function tokenizerRoutes(pick: (name: string | null | undefined) => ModelServer): RouteDef[] {
  const chat = { family: 'openai' as const, auth: 'key' as const, tags: ['Chat'] }
  return ['', '/inference/v1'].flatMap((prefix) => [
    route({
      ...chat,
      method: 'POST',
      path: `${prefix}/tokenize`,
      summary: 'Tokenize a prompt or a chat',
      body: TokenizeReqSchema,
      handler: tokenize(pick),
    }),
    route({
      ...chat,
      method: 'POST',
      path: `${prefix}/detokenize`,
      summary: 'Turn token ids back into text',
      body: DetokenizeReqSchema,
      handler: detokenize(pick),
    }),
  ])
}
