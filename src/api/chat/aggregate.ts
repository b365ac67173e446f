import { DomainError } from '../../core/errors.js'
import type { Reply } from '../route.js'
import type { WorkerEvent } from '../../inference/protocol.js'
import { FINGERPRINT, type Completion, type Usage } from './completion.js'
import { recordedMessage, type RecordedMessage } from './record.js'
import { finishReasonOf, isPlain, shapeWhole } from './tools-output.js'

type Finish = Extract<WorkerEvent, { type: 'finish' }>

function choiceOf(c: Completion, e: Finish): Record<string, unknown> {
  const m = isPlain(c.spec)
    ? { content: (c.echo ?? '') + e.text, reasoning: null, tool_calls: [] }
    : shapeWhole(c.spec, (c.echo ?? '') + e.text)
  return {
    index: e.choice,
    message: {
      role: c.role,
      content: m.content,
      refusal: null,
      annotations: null,
      audio: null,
      function_call: null,
      tool_calls: m.tool_calls,
      reasoning: m.reasoning,
      reasoning_content: m.reasoning,
    },
    logprobs: e.logprobs ? { content: e.logprobs } : null,
    finish_reason: finishReasonOf(c.spec, e.finishReason, m.tool_calls.length),
    stop_reason: e.stopReason,
    token_ids: c.withIds ? e.tokenIds : null,
  }
}

/** With a reasoning parser: the reasoning tokens of every choice, added up. */
async function reasoningDetails(c: Completion, finishes: (Finish | undefined)[], choices: Collected['choices']) {
  if (!c.reasoningTokens) return {}
  let n = 0
  for (const [i, f] of finishes.entries()) {
    const reasoning = (choices[i]?.message as { reasoning?: string | null } | undefined)?.reasoning ?? ''
    if (f) n += await c.reasoningTokens(f.tokenIds, reasoning)
  }
  return { completion_tokens_details: { reasoning_tokens: n } }
}

interface Collected {
  choices: (Record<string, unknown> | undefined)[]
  finishes: (Finish | undefined)[]
  usage: Usage
  timings: Record<string, number> | null
  promptLogprobs: unknown
  /** Prompt tokens the engine took from its prefix cache. */
  cachedTokens: number
}

/** Every event of a non-streamed completion, folded into its choices and usage; an engine error is recorded and thrown. */
async function collect(c: Completion): Promise<Collected> {
  // Filled, not sparse: `.some()` skips holes, so a choice that never finished would go unnoticed.
  const choices: (Record<string, unknown> | undefined)[] = Array.from({ length: c.n }, () => undefined)
  const finishes: (Finish | undefined)[] = Array.from({ length: c.n }, () => undefined)
  const promptTokens = c.accepted.promptTokens
  let usage = { prompt_tokens: promptTokens, completion_tokens: 0, total_tokens: promptTokens }
  let timings: Record<string, number> | null = null
  let promptLogprobs: unknown = null
  let cachedTokens = 0
  for await (const e of c.events) {
    if (e.type === 'error') {
      await c.record({ choices: [], usage, timings: null, error: e.message })
      throw new DomainError(e.status, e.message, { param: e.param ?? null })
    }
    if (e.type === 'finish') [choices[e.choice], finishes[e.choice]] = [choiceOf(c, e), e]
    if (e.type === 'done') {
      usage = {
        prompt_tokens: e.promptTokens,
        completion_tokens: e.completionTokens,
        total_tokens: e.promptTokens + e.completionTokens,
      }
      timings = { ...e.timings }
      promptLogprobs = e.promptLogprobs
      cachedTokens = e.cachedTokens ?? 0
    }
  }
  return { choices, finishes, usage, timings, promptLogprobs, cachedTokens }
}

/** A non-streamed completion: one `chat.completion` body once every choice has finished. */
export async function completionReply(c: Completion): Promise<Reply> {
  const { choices, finishes, usage: counts, timings, promptLogprobs, cachedTokens } = await collect(c)
  const usage = { ...counts, ...(await reasoningDetails(c, finishes, choices)) }
  const complete = !choices.some((ch) => ch === undefined) && choices.length === c.n
  await c.record({
    choices: choices
      .filter((ch) => ch !== undefined)
      .map((ch) => ({
        index: ch.index as number,
        message: recordedMessage(ch.message as RecordedMessage),
        finish_reason: ch.finish_reason as string,
        stop_reason: ch.stop_reason as string | number | null,
      })),
    usage,
    timings,
    error: complete ? null : 'Client disconnected',
  })
  if (!complete) throw new DomainError(400, 'Client disconnected')
  return {
    body: {
      id: c.id,
      object: 'chat.completion',
      created: c.created,
      model: c.model,
      choices,
      service_tier: null,
      system_fingerprint: FINGERPRINT,
      usage: { ...usage, prompt_tokens_details: { cached_tokens: cachedTokens } },
      prompt_logprobs: promptLogprobs,
      prompt_token_ids: c.withIds ? c.accepted.promptIds : null,
      kv_transfer_params: null,
    },
  }
}
