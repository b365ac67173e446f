import { randomUUID } from 'node:crypto'
import type { Ctx, Reply } from '../route.js'
import { ChatCompletionReqSchema, type ChatCompletionReq } from '../../schemas/chat.js'
import type { ModelPool as ModelServer } from '../../inference/client.js'
import { checkRequest, templateMessages, toGenerate } from './request.js'
import { recordCompletion, type CompletionRecorder } from './record.js'
import { accepted, type Completion } from './completion.js'
import { completionReply } from './aggregate.js'
import { streamReply } from './stream.js'
import { beginCompletion } from './begin.js'
import { jsonBody, SEED_RANGE } from './body.js'
import { toolMode, withToolConstraint } from './tools.js'
import type { OutputSpec } from './tools-output.js'
import { reasoningCounter } from './reasoning.js'
import type { ToolParserName } from '../../inference/parsers/tool-parsers.js'
import type { ReasoningParserName } from '../../inference/parsers/reasoning.js'

export interface CompleteOptions {
  priorityScheduling: boolean
  /** Where each completion is recorded as a call; none: not recorded. */
  recorder?: CompletionRecorder
  /** The served model a request names (the first when it names none); 404 for an unknown name. */
  pick(name: string | null | undefined): ModelServer
  /** `--tool-call-parser`; absent: the one the model's template calls for, if any. */
  toolCallParser?: ToolParserName | null
  /** `--reasoning-parser`. */
  reasoningParser?: ReasoningParserName | null
}

/** POST /v1/chat/completions: checks the request, hands it to the engine, and answers whole or as a stream. */
export function completeHandler(o: CompleteOptions) {
  const read = jsonBody<ChatCompletionReq>(ChatCompletionReqSchema, SEED_RANGE)
  return async function complete(ctx: Ctx): Promise<Reply> {
    const b = read(ctx)
    checkRequest(b, o.priorityScheduling)
    const { model, id, call } = beginCompletion(ctx, o.pick, b, 'chatcmpl')
    const mode = toolMode(b, o.toolCallParser ?? model.info.toolCallParser ?? null)
    const gen = toGenerate(withToolConstraint(b, mode), `${id}-${randomUUID()}`)
    const spec: OutputSpec = {
      mode,
      // A constrained tool choice shapes the reply from its first token: there is no reasoning section to split off.
      reasoning: mode.kind === 'required' || mode.kind === 'named' ? null : (o.reasoningParser ?? null),
      includeReasoning: b.include_reasoning !== false,
      parallel: b.parallel_tool_calls !== false,
    }
    const events = model.generate(gen)
    ctx.signal.addEventListener('abort', () => events.cancel())
    const acc = await accepted(events).catch((e) => {
      events.cancel()
      throw e
    })
    const name = model.info.name
    const lastMessage = b.messages[b.messages.length - 1]!
    const role = gen.addGenerationPrompt ? 'assistant' : lastMessage.role
    const c: Completion = {
      id,
      created: Math.floor(Date.now() / 1000),
      model: name,
      n: gen.n,
      role,
      echo: b.echo && lastMessage.role === role ? (templateMessages([lastMessage])[0]!.content ?? '') : null,
      withIds: b.return_token_ids === true,
      accepted: acc,
      events,
      spec,
      reasoningTokens: spec.reasoning ? reasoningCounter(model, spec.reasoning) : null,
      record: (out) => recordCompletion(o.recorder, ctx.log, call, out),
    }
    return gen.stream ? streamReply(c, b.stream_options) : completionReply(c)
  }
}
