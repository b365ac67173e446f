import { randomUUID } from 'node:crypto'
import { DomainError } from '../../core/errors.js'
import type { Ctx, Reply } from '../route.js'
import type { ChatMessage, DetokenizeReq, TokenizeReq } from '../../schemas/chat.js'
import type { ModelPool as ModelServer } from '../../inference/client.js'
import { bad, templateMessages } from './request.js'

type Pick = (name: string | null | undefined) => ModelServer

const modelCard = (m: ModelServer, created: number) => ({
  id: m.info.name,
  object: 'model',
  created,
  owned_by: 'weft',
  root: m.info.root,
  parent: null,
  max_model_len: m.info.maxModelLen,
  permission: [
    {
      id: `modelperm-${randomUUID().replaceAll('-', '')}`,
      object: 'model_permission',
      created,
      allow_create_engine: false,
      allow_sampling: true,
      allow_logprobs: true,
      allow_search_indices: false,
      allow_view: true,
      allow_fine_tuning: false,
      organization: '*',
      group: null,
      is_blocking: false,
    },
  ],
})

/** GET /v1/models */
export function listModels(models: ModelServer[]) {
  return (): Reply => {
    const created = Math.floor(Date.now() / 1000)
    return { body: { object: 'list', data: models.map((m) => modelCard(m, created)) } }
  }
}

/** GET /v1/models/{id}: one card; a name no model is served under is 404. */
export function getModel(models: ModelServer[]) {
  return (ctx: Ctx): Reply => {
    const m = models.find((x) => x.info.name === ctx.params.id)
    if (!m) throw new DomainError(404, `The model \`${ctx.params.id}\` does not exist.`, { param: 'model' })
    return { body: modelCard(m, Math.floor(Date.now() / 1000)) }
  }
}

/** The engine's errors carry an HTTP status; anything else is ours (500). */
export const asDomainError = (e: Error & { status?: number }) => {
  throw new DomainError(e.status ?? 500, e.message)
}

/** POST /tokenize: a prompt, or messages rendered with the chat template. */
export function tokenize(pick: Pick) {
  return async (ctx: Ctx<TokenizeReq>): Promise<Reply> => {
    const b = ctx.body
    const model = pick(b.model)
    if ((b.prompt === undefined) === (b.messages === undefined)) throw bad('Give either `prompt` or `messages`.', 'prompt')
    if (b.messages && b.add_generation_prompt !== false && b.continue_final_message)
      throw bad('Cannot set both `continue_final_message` and `add_generation_prompt` to True.', 'continue_final_message')
    const r = await model
      .tokenize({
        prompt: b.prompt,
        messages: b.messages ? templateMessages(b.messages as ChatMessage[]) : undefined,
        addSpecialTokens: b.add_special_tokens ?? b.prompt !== undefined,
        addGenerationPrompt: b.add_generation_prompt ?? true,
        continueFinalMessage: b.continue_final_message ?? false,
        chatTemplate: b.chat_template ?? null,
        chatTemplateKwargs: b.chat_template_kwargs ?? null,
        tools: b.tools ?? null,
        returnTokenStrs: b.return_token_strs === true,
      })
      .catch(asDomainError)
    if (r.ids.length > model.info.maxModelLen)
      throw bad(
        `This model's maximum context length is ${model.info.maxModelLen} tokens. However, your prompt has ${r.ids.length} tokens.`,
        'prompt',
      )
    return { body: { count: r.ids.length, max_model_len: model.info.maxModelLen, tokens: r.ids, token_strs: r.strs } }
  }
}

/** POST /detokenize */
export function detokenize(pick: Pick) {
  return async (ctx: Ctx<DetokenizeReq>): Promise<Reply> => {
    const model = pick(ctx.body.model)
    const prompt = await model.detokenize(ctx.body.tokens).catch(asDomainError)
    return { body: { prompt } }
  }
}
