import { randomUUID } from 'node:crypto'
import { Type } from '@sinclair/typebox'
import { DomainError } from '../core/errors.js'
import { route, type Ctx, type Reply, type RouteDef } from './route.js'
import { ChatCompletionReqSchema, ChatCompletionResSchema, type ChatCompletionReq, type ChatMessage } from '../schemas/chat.js'
import type { ModelPool as ModelServer, RequestEvents } from '../inference/client.js'
import type { GenerateRequest, TokenLogprob, WorkerEvent } from '../inference/protocol.js'
import type { TemplateMessage } from '../inference/tokenizer.js'
import { VERSION } from '../core/version.js'
import { ProjectIdSchema } from '../schemas/common.js'
import { startPart, endPart } from '../calls/parts.js'
import { uuidv7 } from '../calls/ids.js'
import type { CallStore } from '../calls/store.js'
import type { Principal } from '../catalog/keys.js'

export interface ChatOptions {
  models: ModelServer[]
  priorityScheduling: boolean
  /** Where each completion is recorded as a call; none: not recorded. */
  calls?: CallStore
}

/** The op name of recorded completions: the one Weave's OpenAI integration gives them. */
export const CHAT_OP = 'openai.chat.completions.create'
const PROJECT_RE = new RegExp(ProjectIdSchema.pattern!)

/** The project a completion is recorded in: the `OpenAI-Project` header, else the caller's `<user>/inference`. */
function chatProject(headers: Ctx['headers'], principal: Principal | null): string {
  const h = headers['openai-project']
  if (h) {
    if (!PROJECT_RE.test(h)) throw bad('The OpenAI-Project header must name a project as <entity>/<project>.')
    return h
  }
  return `${principal?.userId ?? 'anonymous'}/inference`
}

interface Outcome {
  choices: {
    index: number
    message: { role: string; content: string }
    finish_reason: string | null
    stop_reason?: string | number | null
  }[]
  usage: { prompt_tokens: number; completion_tokens: number; total_tokens: number }
  timings: Record<string, number> | null
  error: string | null
}

/**
 * Records a completion as a call (start and end together, once it is over): the request as
 * inputs, the choices as output, usage keyed by the model, the engine's timings in attributes.
 * Awaited before the response ends, so a completion answered is a completion recorded; a failure
 * to record is logged, not the client's error.
 */
async function record(
  o: ChatOptions,
  ctx: Ctx<ChatCompletionReq>,
  project: string,
  model: string,
  backend: string,
  id: string,
  started: number,
  out: Outcome,
): Promise<void> {
  if (!o.calls) return
  const callId = uuidv7(started)
  try {
    const parts = [
      startPart(
        {
          project_id: project,
          id: callId,
          trace_id: uuidv7(started),
          op_name: CHAT_OP,
          started_at: new Date(started).toISOString(),
          attributes: {
            weft: { kind: 'chat.completion', completion_id: id, model, backend, ...(out.timings ? { timings: out.timings } : {}) },
          },
          inputs: ctx.body as Record<string, unknown>,
        },
        ctx.principal?.userId ?? 'anonymous',
      ),
      endPart({
        project_id: project,
        id: callId,
        ended_at: new Date().toISOString(),
        output: { id, object: 'chat.completion', model, choices: out.choices, usage: out.usage },
        summary: { usage: { [model]: { requests: 1, ...out.usage } } },
        exception: out.error,
      }),
    ]
    await o.calls.ingest(parts)
  } catch (err) {
    ctx.log.error({ err }, 'recording a completion as a call failed')
  }
}

const bad = (message: string, param: string | null = null) => new DomainError(400, message, { param })

/** Fields whose feature comes with a later piece of work: refused clearly rather than ignored. */
function refuseNotYet(b: ChatCompletionReq): void {
  const later = 'is not supported by this server yet'
  if (b.tools && b.tools.length) throw bad(`Tool calling (\`tools\`) ${later}.`, 'tools')
  if (b.tool_choice && b.tool_choice !== 'none') throw bad(`\`tool_choice\` other than "none" ${later}.`, 'tool_choice')
  if (b.response_format && b.response_format.type && b.response_format.type !== 'text')
    throw bad(`Structured outputs (\`response_format\` ${b.response_format.type}) ${later}.`, 'response_format')
  if (b.structured_outputs) throw bad(`Structured outputs (\`structured_outputs\`) ${later}.`, 'structured_outputs')
  if (b.reasoning_effort) throw bad(`Reasoning (\`reasoning_effort\`) ${later}.`, 'reasoning_effort')
  if (b.use_beam_search) throw bad(`Beam search (\`use_beam_search\`) ${later}.`, 'use_beam_search')
  if (b.cache_salt !== undefined && b.cache_salt !== null) throw bad(`Prefix caching (\`cache_salt\`) ${later}.`, 'cache_salt')
  if (b.logits_processors && b.logits_processors.length)
    throw bad('The `logits_processors` argument is not supported by this server.', 'logits_processors')
}

/** vLLM's request-level checks that the schema cannot express (reference §1.2–1.6). */
function checkRequest(b: ChatCompletionReq, priorityScheduling: boolean): void {
  if (b.stream_options && !b.stream) throw bad('Stream options can only be defined when `stream=True`.', 'stream_options')
  if (b.stream && b.prompt_logprobs !== undefined && b.prompt_logprobs !== null && b.prompt_logprobs !== 0)
    throw bad('`prompt_logprobs` are not available when `stream=True`.', 'prompt_logprobs')
  if ((b.top_logprobs ?? 0) > 0 && !b.logprobs) throw bad('when using `top_logprobs`, `logprobs` must be set to true.', 'top_logprobs')
  if (b.add_generation_prompt !== false && b.continue_final_message)
    throw bad('Cannot set both `continue_final_message` and `add_generation_prompt` to True.', 'continue_final_message')
  if (b.priority && !priorityScheduling) throw bad(`Got priority ${b.priority} but Priority scheduling is not enabled.`, 'priority')
  if (b.temperature !== undefined && b.temperature !== null && b.temperature > 2)
    throw bad(`temperature must be in [0, 2], got ${b.temperature}.`, 'temperature')
  if (b.top_k !== undefined && b.top_k !== null && b.top_k < -1)
    throw bad(`top_k must be 0 (disable), or at least 1, got ${b.top_k}.`, 'top_k')
  refuseNotYet(b)
}

/** Messages as the chat template takes them: text parts joined with newlines, tool-call arguments parsed. */
export function templateMessages(messages: ChatMessage[]): TemplateMessage[] {
  return messages.map((m, i) => {
    let content: string | null
    if (m.content === undefined || m.content === null) content = null
    else if (typeof m.content === 'string') content = m.content
    else {
      const texts: string[] = []
      for (const [j, p] of m.content.entries()) {
        const type = p.type ?? (typeof p.text === 'string' ? 'text' : Object.keys(p).find((k) => k !== 'type'))
        if (type !== 'text' || typeof p.text !== 'string')
          throw bad(`messages[${i}].content[${j}]: ${type} content needs a multimodal model; this model takes text`, 'messages')
        texts.push(p.text)
      }
      content = texts.join('\n')
    }
    const { tool_calls: _calls, ...rest } = m
    const out: TemplateMessage = { ...rest, content }
    if (m.tool_calls && m.tool_calls.length) {
      out.tool_calls = m.tool_calls.map((c) => {
        let args: unknown = {}
        if (c.function.arguments) {
          try {
            args = JSON.parse(c.function.arguments)
          } catch {
            throw bad(`messages[${i}].tool_calls: arguments of ${c.function.name} are not JSON`, 'messages')
          }
        }
        return { ...c, function: { ...c.function, arguments: args } }
      })
    }
    if (m.reasoning_content !== undefined && m.reasoning === undefined) out.reasoning = m.reasoning_content
    return out
  })
}

function toGenerate(b: ChatCompletionReq, id: string): GenerateRequest {
  const logitBias = b.logit_bias
    ? Object.entries(b.logit_bias).map(([k, v]) => [Number.parseInt(k.trim(), 10), v] as [number, number])
    : null
  return {
    id,
    messages: templateMessages(b.messages),
    addGenerationPrompt: b.add_generation_prompt !== false,
    continueFinalMessage: b.continue_final_message === true,
    addSpecialTokens: b.add_special_tokens === true,
    tools: null,
    documents: b.documents ?? null,
    chatTemplate: b.chat_template ?? null,
    chatTemplateKwargs: b.chat_template_kwargs ?? null,
    truncatePromptTokens: b.truncate_prompt_tokens ?? null,
    n: b.n ?? 1,
    maxTokens: b.max_completion_tokens ?? b.max_tokens ?? null,
    temperature: b.temperature ?? null,
    topP: b.top_p ?? null,
    topK: b.top_k ?? null,
    minP: b.min_p ?? null,
    repetitionPenalty: b.repetition_penalty ?? null,
    frequencyPenalty: b.frequency_penalty ?? null,
    presencePenalty: b.presence_penalty ?? null,
    logitBias,
    minTokens: b.min_tokens ?? 0,
    allowedTokenIds: b.allowed_token_ids ?? null,
    badWords: b.bad_words ?? [],
    stop: b.stop === undefined || b.stop === null ? [] : typeof b.stop === 'string' ? [b.stop] : b.stop,
    stopTokenIds: [...new Set(b.stop_token_ids ?? [])],
    includeStopStrInOutput: b.include_stop_str_in_output === true,
    ignoreEos: b.ignore_eos === true,
    skipSpecialTokens: b.skip_special_tokens !== false,
    spacesBetweenSpecialTokens: b.spaces_between_special_tokens !== false,
    logprobs: b.logprobs ? (b.top_logprobs ?? 0) : null,
    returnTokensAsTokenIds: b.return_tokens_as_token_ids === true,
    seed: b.seed ?? null,
    priority: b.priority ?? 0,
    stream: b.stream === true,
    // With echo and no prompt_logprobs, vLLM reports the prompt's at top_logprobs.
    promptLogprobs: b.prompt_logprobs ?? (b.echo && b.logprobs && !b.stream ? (b.top_logprobs ?? 0) : null),
  }
}

/** The first event decides the HTTP status: accepted, or an error answered in the envelope. */
async function accepted(events: RequestEvents): Promise<Extract<WorkerEvent, { type: 'accepted' }>> {
  const first = await events.next()
  if (!first) throw new DomainError(400, 'Client disconnected')
  if (first.type === 'error')
    throw new DomainError(first.status, first.message, {
      param: first.param ?? null,
      retryAfterS: first.status === 429 ? 1 : undefined,
    })
  if (first.type !== 'accepted') throw new DomainError(500, 'Internal server error')
  return first
}

const FINGERPRINT = `weft-${VERSION}`

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

export function chatRoutes(o: ChatOptions): RouteDef[] {
  const byName = new Map(o.models.map((m) => [m.info.name, m]))
  const pick = (name: string | null | undefined): ModelServer => {
    if (!name) return o.models[0]!
    const m = byName.get(name)
    if (!m) throw new DomainError(404, `The model \`${name}\` does not exist.`, { param: 'model' })
    return m
  }

  async function complete(ctx: Ctx<ChatCompletionReq>): Promise<Reply> {
    const b = ctx.body
    checkRequest(b, o.priorityScheduling)
    const model = pick(b.model)
    const project = chatProject(ctx.headers, ctx.principal)
    const started = Date.now()
    const requestId = b.request_id || ctx.headers['x-request-id'] || randomUUID().replaceAll('-', '')
    const id = `chatcmpl-${requestId}`
    const gen = toGenerate(b, `${id}-${randomUUID()}`)
    const events = model.generate(gen)
    ctx.signal.addEventListener('abort', () => events.cancel())
    const acc = await accepted(events).catch((e) => {
      events.cancel()
      throw e
    })
    const created = Math.floor(Date.now() / 1000)
    const name = model.info.name
    const n = gen.n
    const lastMessage = b.messages[b.messages.length - 1]!
    const role = gen.addGenerationPrompt ? 'assistant' : lastMessage.role
    const echo = b.echo && lastMessage.role === role ? (templateMessages([lastMessage])[0]!.content ?? '') : null
    const withIds = b.return_token_ids === true

    if (!gen.stream) {
      const choices: Record<string, unknown>[] = new Array(n)
      let usage = { prompt_tokens: acc.promptTokens, completion_tokens: 0, total_tokens: acc.promptTokens }
      let timings: Record<string, number> | null = null
      let promptLogprobs: unknown = null
      for await (const e of events) {
        if (e.type === 'error') {
          await record(o, ctx, project, name, model.info.backend, id, started, { choices: [], usage, timings: null, error: e.message })
          throw new DomainError(e.status, e.message, { param: e.param ?? null })
        }
        if (e.type === 'finish') {
          choices[e.choice] = {
            index: e.choice,
            message: {
              role,
              content: (echo ?? '') + e.text,
              refusal: null,
              annotations: null,
              audio: null,
              function_call: null,
              tool_calls: [],
              reasoning_content: null,
            },
            logprobs: e.logprobs ? { content: e.logprobs } : null,
            finish_reason: e.finishReason,
            stop_reason: e.stopReason,
            token_ids: withIds ? e.tokenIds : null,
          }
        }
        if (e.type === 'done') {
          usage = {
            prompt_tokens: e.promptTokens,
            completion_tokens: e.completionTokens,
            total_tokens: e.promptTokens + e.completionTokens,
          }
          timings = { ...e.timings }
          promptLogprobs = e.promptLogprobs
        }
      }
      const complete = !choices.some((c) => c === undefined) && choices.length === n
      await record(o, ctx, project, name, model.info.backend, id, started, {
        choices: choices.filter(Boolean).map((c) => ({
          index: c.index as number,
          message: c.message as { role: string; content: string },
          finish_reason: c.finish_reason as string,
          stop_reason: c.stop_reason as string | number | null,
        })),
        usage,
        timings,
        error: complete ? null : 'Client disconnected',
      })
      if (!complete) throw new DomainError(400, 'Client disconnected')
      return {
        body: {
          id,
          object: 'chat.completion',
          created,
          model: name,
          choices,
          service_tier: null,
          system_fingerprint: FINGERPRINT,
          usage: { ...usage, prompt_tokens_details: null },
          prompt_logprobs: promptLogprobs,
          prompt_token_ids: withIds ? acc.promptIds : null,
          kv_transfer_params: null,
        },
      }
    }

    const includeUsage = b.stream_options?.include_usage === true
    const continuous = includeUsage && b.stream_options?.continuous_usage_stats === true
    const chunk = (choice: Record<string, unknown> | null, extra: Record<string, unknown> = {}) =>
      `data: ${JSON.stringify({ id, object: 'chat.completion.chunk', created, model: name, choices: choice ? [choice] : [], ...extra })}\n\n`
    const usageOf = (completion: number) => ({
      prompt_tokens: acc.promptTokens,
      completion_tokens: completion,
      total_tokens: acc.promptTokens + completion,
    })
    const texts: string[] = Array.from({ length: n }, () => echo ?? '')
    const finishes: { finish_reason: string | null; stop_reason: string | number | null }[] = Array.from({ length: n }, () => ({
      finish_reason: null,
      stop_reason: null,
    }))
    let outcomeUsage = usageOf(0)
    let timings: Record<string, number> | null = null
    let failure: string | null = null
    async function* sse(): AsyncGenerator<string> {
      let finished = false
      try {
        for (let i = 0; i < n; i++) {
          const first: Record<string, unknown> = { index: i, delta: { role, content: '' }, logprobs: null, finish_reason: null }
          const extra: Record<string, unknown> = {}
          if (withIds && i === 0) extra.prompt_token_ids = acc.promptIds
          if (continuous) extra.usage = usageOf(0)
          yield chunk(first, extra)
          if (echo)
            yield chunk(
              { index: i, delta: { content: echo }, logprobs: null, finish_reason: null },
              continuous ? { usage: usageOf(0) } : {},
            )
        }
        for await (const e of events) {
          if (e.type === 'error') {
            failure = e.message
            yield `data: ${JSON.stringify({ error: { message: e.message, type: e.status === 500 ? 'InternalServerError' : 'BadRequestError', param: e.param ?? null, code: e.status } })}\n\n`
            break
          }
          if (e.type === 'delta' || e.type === 'finish') {
            texts[e.choice] += e.text
            if (e.type === 'finish') finishes[e.choice] = { finish_reason: e.finishReason, stop_reason: e.stopReason }
            const c: Record<string, unknown> = {
              index: e.choice,
              delta: { content: e.text },
              logprobs: e.logprobs ? { content: e.logprobs as TokenLogprob[] } : null,
              finish_reason: e.type === 'finish' ? e.finishReason : null,
            }
            if (e.type === 'finish') c.stop_reason = e.stopReason
            if (withIds) c.token_ids = e.tokenIds
            yield chunk(c, continuous ? { usage: usageOf(e.completionTokens) } : {})
          }
          if (e.type === 'done') {
            finished = true
            outcomeUsage = usageOf(e.completionTokens)
            timings = { ...e.timings }
            if (includeUsage) yield chunk(null, { usage: usageOf(e.completionTokens), system_fingerprint: FINGERPRINT })
          }
        }
        yield 'data: [DONE]\n\n'
      } finally {
        if (!finished) events.cancel()
        await record(o, ctx, project, name, model.info.backend, id, started, {
          choices: texts.map((content, index) => ({ index, message: { role, content }, ...finishes[index]! })),
          usage: outcomeUsage,
          timings,
          error: failure ?? (finished ? null : 'Client disconnected'),
        })
      }
    }
    return { contentType: 'text/event-stream; charset=utf-8', headers: { 'cache-control': 'no-cache' }, stream: sse() }
  }

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

  const TokenizeReq = Type.Object(
    {
      model: Type.Optional(Type.Union([Type.String(), Type.Null()])),
      prompt: Type.Optional(Type.String()),
      messages: Type.Optional(Type.Array(Type.Object({ role: Type.String() }, { additionalProperties: true }), { minItems: 1 })),
      add_special_tokens: Type.Optional(Type.Boolean()),
      add_generation_prompt: Type.Optional(Type.Boolean()),
      continue_final_message: Type.Optional(Type.Boolean()),
      chat_template: Type.Optional(Type.Union([Type.String(), Type.Null()])),
      chat_template_kwargs: Type.Optional(Type.Union([Type.Record(Type.String(), Type.Unknown()), Type.Null()])),
      return_token_strs: Type.Optional(Type.Union([Type.Boolean(), Type.Null()])),
    },
    { description: 'A prompt, or messages rendered with the chat template' },
  )
  const DetokenizeReq = Type.Object({
    model: Type.Optional(Type.Union([Type.String(), Type.Null()])),
    tokens: Type.Array(Type.Integer({ minimum: 0 })),
  })

  return [
    chatCompletionsRoute({ handler: complete }),
    modelsRoute({
      handler: () => {
        const created = Math.floor(Date.now() / 1000)
        return { body: { object: 'list', data: o.models.map((m) => modelCard(m, created)) } }
      },
    }),
    route({
      method: 'POST',
      path: '/tokenize',
      family: 'openai',
      auth: 'key',
      tags: ['Chat'],
      summary: 'Tokenize a prompt or a chat',
      body: TokenizeReq,
      handler: async (ctx) => {
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
            returnTokenStrs: b.return_token_strs === true,
          })
          .catch((e: Error & { status?: number }) => {
            throw new DomainError(e.status ?? 500, e.message)
          })
        if (r.ids.length > model.info.maxModelLen)
          throw bad(
            `This model's maximum context length is ${model.info.maxModelLen} tokens. However, your prompt has ${r.ids.length} tokens.`,
            'prompt',
          )
        return { body: { count: r.ids.length, max_model_len: model.info.maxModelLen, tokens: r.ids, token_strs: r.strs } }
      },
    }),
    route({
      method: 'POST',
      path: '/detokenize',
      family: 'openai',
      auth: 'key',
      tags: ['Chat'],
      summary: 'Turn token ids back into text',
      body: DetokenizeReq,
      handler: async (ctx) => {
        const model = pick(ctx.body.model)
        const prompt = await model.detokenize(ctx.body.tokens).catch((e: Error & { status?: number }) => {
          throw new DomainError(e.status ?? 500, e.message)
        })
        return { body: { prompt } }
      },
    }),
  ]
}
