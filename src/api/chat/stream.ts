import type { StreamReply } from '../route.js'
import type { TokenLogprob, WorkerEvent } from '../../inference/protocol.js'
import type { StreamOptions } from '../../schemas/chat.js'
import { FINGERPRINT, type Completion, type Usage } from './completion.js'

/** How chunks are framed: SSE `data:` events of `chat.completion.chunk`, usage as `stream_options` asks. */
interface Framing {
  chunk(choice: Record<string, unknown> | null, extra?: Record<string, unknown>): string
  usageOf(completion: number): Usage
  includeUsage: boolean
  /** Usage on every chunk (vLLM's `continuous_usage_stats`). */
  continuous: boolean
}

/** What the stream has sent so far: the call recorded at its end is made of it. */
interface Tally {
  texts: string[]
  finishes: { finish_reason: string | null; stop_reason: string | number | null }[]
  usage: Usage
  timings: Record<string, number> | null
  failure: string | null
  finished: boolean
}

function framing(c: Completion, options: StreamOptions | null | undefined): Framing {
  const { id, created, model } = c
  const promptTokens = c.accepted.promptTokens
  const includeUsage = options?.include_usage === true
  return {
    chunk: (choice, extra = {}) =>
      `data: ${JSON.stringify({ id, object: 'chat.completion.chunk', created, model, choices: choice ? [choice] : [], ...extra })}\n\n`,
    usageOf: (completion) => ({
      prompt_tokens: promptTokens,
      completion_tokens: completion,
      total_tokens: promptTokens + completion,
    }),
    includeUsage,
    continuous: includeUsage && options?.continuous_usage_stats === true,
  }
}

/** Each choice opens with the role (and the echoed text); the first carries the prompt's token ids. */
function* opening(c: Completion, f: Framing): Generator<string> {
  for (let i = 0; i < c.n; i++) {
    const first: Record<string, unknown> = { index: i, delta: { role: c.role, content: '' }, logprobs: null, finish_reason: null }
    const extra: Record<string, unknown> = {}
    if (c.withIds && i === 0) extra.prompt_token_ids = c.accepted.promptIds
    if (f.continuous) extra.usage = f.usageOf(0)
    yield f.chunk(first, extra)
    if (c.echo)
      yield f.chunk(
        { index: i, delta: { content: c.echo }, logprobs: null, finish_reason: null },
        f.continuous ? { usage: f.usageOf(0) } : {},
      )
  }
}

function textChunk(c: Completion, f: Framing, t: Tally, e: Extract<WorkerEvent, { type: 'delta' | 'finish' }>): string {
  t.texts[e.choice] += e.text
  if (e.type === 'finish') t.finishes[e.choice] = { finish_reason: e.finishReason, stop_reason: e.stopReason }
  const ch: Record<string, unknown> = {
    index: e.choice,
    delta: { content: e.text },
    logprobs: e.logprobs ? { content: e.logprobs as TokenLogprob[] } : null,
    finish_reason: e.type === 'finish' ? e.finishReason : null,
  }
  if (e.type === 'finish') ch.stop_reason = e.stopReason
  if (c.withIds) ch.token_ids = e.tokenIds
  return f.chunk(ch, f.continuous ? { usage: f.usageOf(e.completionTokens) } : {})
}

const errorFrame = (e: Extract<WorkerEvent, { type: 'error' }>) =>
  `data: ${JSON.stringify({ error: { message: e.message, type: e.status === 500 ? 'InternalServerError' : 'BadRequestError', param: e.param ?? null, code: e.status } })}\n\n`

/** The SSE body; whatever way it ends (done, engine error, client gone), the completion is recorded. */
async function* sse(c: Completion, f: Framing): AsyncGenerator<string> {
  const t: Tally = {
    texts: Array.from({ length: c.n }, () => c.echo ?? ''),
    finishes: Array.from({ length: c.n }, () => ({ finish_reason: null, stop_reason: null })),
    usage: f.usageOf(0),
    timings: null,
    failure: null,
    finished: false,
  }
  try {
    yield* opening(c, f)
    for await (const e of c.events) {
      if (e.type === 'error') {
        t.failure = e.message
        yield errorFrame(e)
        break
      }
      if (e.type === 'delta' || e.type === 'finish') yield textChunk(c, f, t, e)
      if (e.type === 'done') {
        t.finished = true
        t.usage = f.usageOf(e.completionTokens)
        t.timings = { ...e.timings }
        if (f.includeUsage) yield f.chunk(null, { usage: f.usageOf(e.completionTokens), system_fingerprint: FINGERPRINT })
      }
    }
    yield 'data: [DONE]\n\n'
  } finally {
    if (!t.finished) c.events.cancel()
    await c.record({
      choices: t.texts.map((content, index) => ({ index, message: { role: c.role, content }, ...t.finishes[index]! })),
      usage: t.usage,
      timings: t.timings,
      error: t.failure ?? (t.finished ? null : 'Client disconnected'),
    })
  }
}

/** A streamed completion: the chunks as SSE events, pulled as fast as the client reads. */
export function streamReply(c: Completion, options: StreamOptions | null | undefined): StreamReply {
  return { contentType: 'text/event-stream; charset=utf-8', headers: { 'cache-control': 'no-cache' }, stream: sse(c, framing(c, options)) }
}
