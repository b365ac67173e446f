import type { Logger } from 'pino'
import type { CallPart } from '../../calls/model.js'
import { startPart, endPart } from '../../calls/ingest/parts.js'
import { uuidv7 } from '../../calls/ids.js'
import type { ChatCompletionReq } from '../../schemas/chat.js'
import type { CompletionReq } from '../../schemas/completions.js'

/**
 * Where finished completions go, as the parts of one call. The chat routes never see the calls
 * store: server.ts injects a recorder backed by it (or none, and nothing is recorded).
 */
export interface CompletionRecorder {
  record(parts: CallPart[]): Promise<void>
}

/** The op names of recorded completions: the ones Weave's OpenAI integration gives them. */
export const CHAT_OP = 'openai.chat.completions.create'
export const TEXT_OP = 'openai.completions.create'

/** What kind of completion a call records: its op name and the `object` of its output. */
export interface CallKind {
  op: string
  object: 'chat.completion' | 'text_completion'
}

export const CHAT_KIND: CallKind = { op: CHAT_OP, object: 'chat.completion' }
export const TEXT_KIND: CallKind = { op: TEXT_OP, object: 'text_completion' }

/** A choice's message as recorded: its text, and the reasoning and tool calls when there are any. */
export interface RecordedMessage {
  role: string
  content: string | null
  reasoning?: string | null
  tool_calls?: { id: string; type: 'function'; function: { name: string; arguments: string } }[]
}

/** The message without the members that say nothing (no reasoning, no tool calls), so plain completions record as before. */
export function recordedMessage(m: RecordedMessage): RecordedMessage {
  const out: RecordedMessage = { role: m.role, content: m.content }
  if (m.reasoning !== undefined && m.reasoning !== null) out.reasoning = m.reasoning
  if (m.tool_calls && m.tool_calls.length) out.tool_calls = m.tool_calls
  return out
}

/** How a completion ended: what its call's output, summary and exception are made of. */
export interface Outcome {
  /** A chat choice has its message; a legacy completion's its text. */
  choices: {
    index: number
    message?: RecordedMessage
    text?: string
    finish_reason: string | null
    stop_reason?: string | number | null
  }[]
  usage: {
    prompt_tokens: number
    completion_tokens: number
    total_tokens: number
    completion_tokens_details?: { reasoning_tokens: number }
  }
  timings: Record<string, number> | null
  error: string | null
}

/** What a completion's call says besides its outcome. */
export interface CompletionCall {
  project: string
  /** The served model's name. */
  model: string
  backend: string
  /** The completion's id (`chatcmpl-…`). */
  id: string
  /** Milliseconds since the epoch. */
  started: number
  request: ChatCompletionReq | CompletionReq
  userId: string
  /** Chat unless said otherwise. */
  kind?: CallKind
}

/**
 * A completion as a call (start and end together, once it is over): the request as inputs, the
 * choices as output, usage keyed by the model, the engine's timings in attributes.
 */
export function completionParts(c: CompletionCall, out: Outcome): CallPart[] {
  const { project, model, backend, id, started } = c
  const kind = c.kind ?? CHAT_KIND
  const callId = uuidv7(started)
  const { prompt_tokens, completion_tokens, total_tokens } = out.usage
  return [
    startPart(
      {
        project_id: project,
        id: callId,
        trace_id: uuidv7(started),
        op_name: kind.op,
        started_at: new Date(started).toISOString(),
        attributes: {
          weft: { kind: kind.object, completion_id: id, model, backend, ...(out.timings ? { timings: out.timings } : {}) },
        },
        inputs: c.request as Record<string, unknown>,
      },
      c.userId,
    ),
    endPart({
      project_id: project,
      id: callId,
      ended_at: new Date().toISOString(),
      output: { id, object: kind.object, model, choices: out.choices, usage: out.usage },
      // The summary keeps the flat counts statistics add up; the details stay in the output.
      summary: { usage: { [model]: { requests: 1, prompt_tokens, completion_tokens, total_tokens } } },
      exception: out.error,
    }),
  ]
}

/**
 * Records a completion. Awaited before the response ends, so a completion answered is a completion
 * recorded; a failure to record is logged, not the client's error.
 */
export async function recordCompletion(
  recorder: CompletionRecorder | undefined,
  log: Logger,
  c: CompletionCall,
  out: Outcome,
): Promise<void> {
  if (!recorder) return
  try {
    await recorder.record(completionParts(c, out))
  } catch (err) {
    log.error({ err }, 'recording a completion as a call failed')
  }
}
