import { DomainError } from '../../core/errors.js'
import type { Reply } from '../route.js'
import type { WorkerEvent } from '../../inference/protocol.js'
import { FINGERPRINT, type Completion, type Usage } from './completion.js'

type Finish = Extract<WorkerEvent, { type: 'finish' }>

function choiceOf(c: Completion, e: Finish): Record<string, unknown> {
  return {
    index: e.choice,
    message: {
      role: c.role,
      content: (c.echo ?? '') + e.text,
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
    token_ids: c.withIds ? e.tokenIds : null,
  }
}

interface Collected {
  choices: (Record<string, unknown> | undefined)[]
  usage: Usage
  timings: Record<string, number> | null
  promptLogprobs: unknown
}

/** Every event of a non-streamed completion, folded into its choices and usage; an engine error is recorded and thrown. */
async function collect(c: Completion): Promise<Collected> {
  // Filled, not sparse: `.some()` skips holes, so a choice that never finished would go unnoticed.
  const choices: (Record<string, unknown> | undefined)[] = Array.from({ length: c.n }, () => undefined)
  const promptTokens = c.accepted.promptTokens
  let usage = { prompt_tokens: promptTokens, completion_tokens: 0, total_tokens: promptTokens }
  let timings: Record<string, number> | null = null
  let promptLogprobs: unknown = null
  for await (const e of c.events) {
    if (e.type === 'error') {
      await c.record({ choices: [], usage, timings: null, error: e.message })
      throw new DomainError(e.status, e.message, { param: e.param ?? null })
    }
    if (e.type === 'finish') choices[e.choice] = choiceOf(c, e)
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
  return { choices, usage, timings, promptLogprobs }
}

/** A non-streamed completion: one `chat.completion` body once every choice has finished. */
export async function completionReply(c: Completion): Promise<Reply> {
  const { choices, usage, timings, promptLogprobs } = await collect(c)
  const complete = !choices.some((ch) => ch === undefined) && choices.length === c.n
  await c.record({
    choices: choices
      .filter((ch) => ch !== undefined)
      .map((ch) => ({
        index: ch.index as number,
        message: ch.message as { role: string; content: string },
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
      usage: { ...usage, prompt_tokens_details: null },
      prompt_logprobs: promptLogprobs,
      prompt_token_ids: c.withIds ? c.accepted.promptIds : null,
      kv_transfer_params: null,
    },
  }
}
