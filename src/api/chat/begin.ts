import { randomUUID } from 'node:crypto'
import type { Ctx } from '../route.js'
import type { ModelPool as ModelServer } from '../../inference/client.js'
import type { ChatCompletionReq } from '../../schemas/chat.js'
import type { CompletionReq } from '../../schemas/completions.js'
import { chatProject } from './request.js'
import type { CallKind, CompletionCall } from './record.js'

/** What a completion route settles before generating: the served model, the completion's id and how its call will read. */
export interface Begun {
  model: ModelServer
  id: string
  call: CompletionCall
}

/**
 * The start both completion routes share (chat and legacy): pick the model (404 for an unknown name), the
 * project the call is recorded in (checked against the key's entities), and the id — the request's own
 * `request_id` or `X-Request-Id` when given, as vLLM does — prefixed as OpenAI does (`chatcmpl-`, `cmpl-`).
 */
export function beginCompletion(
  ctx: Ctx,
  pick: (name: string | null | undefined) => ModelServer,
  b: ChatCompletionReq | CompletionReq,
  prefix: string,
  kind?: CallKind,
): Begun {
  const model = pick(b.model)
  const project = chatProject(ctx.headers, ctx.principal)
  const started = Date.now()
  const id = `${prefix}-${b.request_id || ctx.headers['x-request-id'] || randomUUID().replaceAll('-', '')}`
  const call: CompletionCall = {
    project,
    model: model.info.name,
    backend: model.info.backend,
    id,
    started,
    request: b,
    userId: ctx.principal?.userId ?? 'anonymous',
    ...(kind ? { kind } : {}),
  }
  return { model, id, call }
}
