import { DomainError } from '../../core/errors.js'
import type { Ctx } from '../route.js'
import type { ChatCompletionReq, ChatMessage, SamplingReq } from '../../schemas/chat.js'
import { ProjectIdSchema } from '../../schemas/common.js'
import type { GenerateRequest } from '../../inference/protocol.js'
import type { PromptRequest } from '../../inference/request.js'
import type { TemplateMessage } from '../../inference/tokenizer.js'
import type { Principal } from '../../core/principal.js'
import { checkStructuredOutputs, constraintOf } from './structured.js'

const PROJECT_RE = new RegExp(ProjectIdSchema.pattern!)

export const bad = (message: string, param: string | null = null) => new DomainError(400, message, { param })

/** The project a completion is recorded in: the `OpenAI-Project` header, else the caller's `<user>/inference`. */
export function chatProject(headers: Ctx['headers'], principal: Principal | null): string {
  const h = headers['openai-project']
  if (h) {
    if (!PROJECT_RE.test(h)) throw bad('The OpenAI-Project header must name a project as <entity>/<project>.')
    return h
  }
  return `${principal?.userId ?? 'anonymous'}/inference`
}

/** Fields whose feature comes with a later piece of work: refused clearly rather than ignored. */
function refuseNotYet(b: SamplingReq): void {
  if (b.logits_processors && b.logits_processors.length)
    throw bad('The `logits_processors` argument is not supported by this server.', 'logits_processors')
}

/** vLLM's request-level checks that the schema cannot express (docs/chat.md). */
export function checkRequest(b: ChatCompletionReq, priorityScheduling: boolean): void {
  if ((b.top_logprobs ?? 0) > 0 && !b.logprobs) throw bad('when using `top_logprobs`, `logprobs` must be set to true.', 'top_logprobs')
  if (b.add_generation_prompt !== false && b.continue_final_message)
    throw bad('Cannot set both `continue_final_message` and `add_generation_prompt` to True.', 'continue_final_message')
  checkSampling(b, priorityScheduling)
}

/** The checks chat and legacy completions share. */
export function checkSampling(b: SamplingReq, priorityScheduling: boolean): void {
  // vLLM tests the object's truthiness: an empty `{}` is as good as none.
  if (b.stream_options && Object.keys(b.stream_options).length > 0 && !b.stream)
    throw bad('Stream options can only be defined when `stream=True`.', 'stream_options')
  if (b.stream && b.prompt_logprobs !== undefined && b.prompt_logprobs !== null && b.prompt_logprobs !== 0)
    throw bad('`prompt_logprobs` are not available when `stream=True`.', 'prompt_logprobs')
  if (b.priority && !priorityScheduling) throw bad(`Got priority ${b.priority} but Priority scheduling is not enabled.`, 'priority')
  if (b.temperature !== undefined && b.temperature !== null && b.temperature > 2)
    throw bad(`temperature must be in [0, 2], got ${b.temperature}.`, 'temperature')
  if (b.top_k !== undefined && b.top_k !== null && b.top_k < -1)
    throw bad(`top_k must be 0 (disable), or at least 1, got ${b.top_k}.`, 'top_k')
  refuseNotYet(b)
  // Structured outputs (structured.ts): the client's own constraint, before tool_choice adds one.
  checkStructuredOutputs(b)
}

/** Text parts joined with newlines; any other kind of part needs a multimodal model. */
function textContent(m: ChatMessage, i: number): string | null {
  if (m.content === undefined || m.content === null) return null
  if (typeof m.content === 'string') return m.content
  const texts: string[] = []
  for (const [j, p] of m.content.entries()) {
    const type = p.type ?? (typeof p.text === 'string' ? 'text' : Object.keys(p).find((k) => k !== 'type'))
    if (type !== 'text' || typeof p.text !== 'string')
      throw bad(`messages[${i}].content[${j}]: ${type} content needs a multimodal model; this model takes text`, 'messages')
    texts.push(p.text)
  }
  return texts.join('\n')
}

/** Messages as the chat template takes them: text parts joined with newlines, tool-call arguments parsed. */
export function templateMessages(messages: ChatMessage[]): TemplateMessage[] {
  return messages.map((m, i) => {
    const content = textContent(m, i)
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

/**
 * The template's extra variables: `reasoning_effort` as vLLM passes it, with `enable_thinking`
 * following from it (`none` turns thinking off); the request's own `chat_template_kwargs` win.
 */
export function templateKwargs(b: Pick<ChatCompletionReq, 'reasoning_effort' | 'chat_template_kwargs'>): Record<string, unknown> | null {
  if (!b.reasoning_effort) return b.chat_template_kwargs ?? null
  return { reasoning_effort: b.reasoning_effort, enable_thinking: b.reasoning_effort !== 'none', ...(b.chat_template_kwargs ?? {}) }
}

/** What the engine's request takes from the fields chat and legacy completions share. */
export type SamplingFields = Omit<GenerateRequest, keyof PromptRequest | 'id' | 'maxTokens' | 'logprobs' | 'promptLogprobs'>

/** The shared fields translated into the engine's: sampling, stopping, scheduling, the constraint. */
export function samplingOf(b: SamplingReq): SamplingFields {
  const logitBias = b.logit_bias
    ? Object.entries(b.logit_bias).map(([k, v]) => [Number.parseInt(k.trim(), 10), v] as [number, number])
    : null
  return {
    truncatePromptTokens: b.truncate_prompt_tokens ?? null,
    n: b.n ?? 1,
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
    returnTokensAsTokenIds: b.return_tokens_as_token_ids === true,
    seed: b.seed ?? null,
    priority: b.priority ?? 0,
    stream: b.stream === true,
    constraint: constraintOf(b),
    cacheSalt: b.cache_salt ?? null,
    beamSearch: b.use_beam_search ? { lengthPenalty: b.length_penalty ?? 1 } : null,
  }
}

/** The request translated into the engine's: prompt rendering, sampling, and what to report back. */
export function toGenerate(b: ChatCompletionReq, id: string): GenerateRequest {
  return {
    id,
    messages: templateMessages(b.messages),
    addGenerationPrompt: b.add_generation_prompt !== false,
    continueFinalMessage: b.continue_final_message === true,
    addSpecialTokens: b.add_special_tokens === true,
    tools: b.tools ?? null,
    documents: b.documents ?? null,
    chatTemplate: b.chat_template ?? null,
    chatTemplateKwargs: templateKwargs(b),
    ...samplingOf(b),
    maxTokens: b.max_completion_tokens ?? b.max_tokens ?? null,
    logprobs: b.logprobs ? (b.top_logprobs ?? 0) : null,
    // With echo and no prompt_logprobs, vLLM reports the prompt's at top_logprobs.
    promptLogprobs: b.prompt_logprobs ?? (b.echo && b.logprobs && !b.stream ? (b.top_logprobs ?? 0) : null),
  }
}
