import type { StreamReply } from '../route.js'
import type { TokenLogprob, WorkerEvent } from '../../inference/protocol.js'
import type { StreamOptions } from '../../schemas/chat.js'
import { FINGERPRINT, type Completion, type Usage } from './completion.js'
import { recordedMessage } from './record.js'
import { ChoiceStream, finishReasonOf, isEmptyDelta, isPlain, type DeltaOut } from './tools-output.js'

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
  /** Per choice, with parsers or a tool choice: what turns its text into deltas. */
  shapers: ChoiceStream[] | null
  /** Per choice, the generated ids (reasoning tokens are counted on them). */
  ids: number[][]
  finishes: { finish_reason: string | null; stop_reason: string | number | null }[]
  usage: Usage
  /** Per choice, the tokens generated so far: a stream cut short is recorded with what it produced. */
  generated: number[]
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

/** A parsed step's delta on the wire: reasoning under both its names. */
function wireDelta(d: DeltaOut): Record<string, unknown> {
  const out: Record<string, unknown> = {}
  if (d.reasoning !== undefined) [out.reasoning, out.reasoning_content] = [d.reasoning, d.reasoning]
  if (d.content !== undefined) out.content = d.content
  if (d.tool_calls !== undefined) out.tool_calls = d.tool_calls
  return out
}

const mergeDeltas = (a: DeltaOut, b: DeltaOut): DeltaOut => {
  const out: DeltaOut = { ...a }
  if (b.reasoning !== undefined) out.reasoning = (a.reasoning ?? '') + b.reasoning
  if (b.content !== undefined) out.content = (a.content ?? '') + b.content
  if (b.tool_calls !== undefined) out.tool_calls = [...(a.tool_calls ?? []), ...b.tool_calls]
  return out
}

/** A step's chunk; null when parsers swallowed the step and nothing else (finish, logprobs, ids) must go out. */
function textChunk(c: Completion, f: Framing, t: Tally, e: Extract<WorkerEvent, { type: 'delta' | 'finish' }>): string | null {
  t.texts[e.choice] += e.text
  t.ids[e.choice]!.push(...e.tokenIds)
  const finished = e.type === 'finish'
  let delta: Record<string, unknown> = { content: e.text }
  let finishReason: string | null = finished ? e.finishReason : null
  const shaper = t.shapers?.[e.choice]
  if (shaper) {
    let d = shaper.push(e.text)
    if (finished) d = mergeDeltas(d, shaper.end())
    if (!finished && isEmptyDelta(d) && !e.logprobs && !c.withIds) return null
    delta = wireDelta(d)
    if (finished) finishReason = finishReasonOf(c.spec, e.finishReason, shaper.message.tool_calls.length)
  }
  if (finished) t.finishes[e.choice] = { finish_reason: finishReason, stop_reason: e.stopReason }
  const ch: Record<string, unknown> = {
    index: e.choice,
    delta,
    logprobs: e.logprobs ? { content: e.logprobs as TokenLogprob[] } : null,
    finish_reason: finishReason,
  }
  if (finished) ch.stop_reason = e.stopReason
  if (c.withIds) ch.token_ids = e.tokenIds
  return f.chunk(ch, f.continuous ? { usage: f.usageOf(e.completionTokens) } : {})
}

/** The final usage, with the reasoning tokens when a reasoning parser runs. */
async function finalUsage(c: Completion, t: Tally, usage: Usage): Promise<Usage> {
  if (!c.reasoningTokens) return usage
  let n = 0
  for (let i = 0; i < c.n; i++) n += await c.reasoningTokens(t.ids[i]!, t.shapers?.[i]?.message.reasoning ?? '')
  return { ...usage, completion_tokens_details: { reasoning_tokens: n } }
}

/** The choices as recorded: the text, or what the parsers made of it. */
function recordedChoices(c: Completion, t: Tally) {
  return t.texts.map((content, index) => {
    const m = t.shapers?.[index]?.message
    const message = m ? recordedMessage({ role: c.role, ...m }) : { role: c.role, content }
    return { index, message, ...t.finishes[index]! }
  })
}

export const errorFrame = (e: Extract<WorkerEvent, { type: 'error' }>) =>
  `data: ${JSON.stringify({ error: { message: e.message, type: e.status === 500 ? 'InternalServerError' : 'BadRequestError', param: e.param ?? null, code: e.status } })}\n\n`

/** The SSE body; whatever way it ends (done, engine error, client gone), the completion is recorded. */
async function* sse(c: Completion, f: Framing): AsyncGenerator<string> {
  const t: Tally = {
    texts: Array.from({ length: c.n }, () => c.echo ?? ''),
    shapers: isPlain(c.spec) ? null : Array.from({ length: c.n }, () => new ChoiceStream(c.spec)),
    ids: Array.from({ length: c.n }, () => [] as number[]),
    finishes: Array.from({ length: c.n }, () => ({ finish_reason: null, stop_reason: null })),
    usage: f.usageOf(0),
    generated: new Array<number>(c.n).fill(0),
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
      if (e.type === 'delta' || e.type === 'finish') {
        t.generated[e.choice] = e.completionTokens
        t.usage = f.usageOf(t.generated.reduce((x, y) => x + y, 0))
        const chunk = textChunk(c, f, t, e)
        if (chunk !== null) yield chunk
      }
      if (e.type === 'done') {
        t.finished = true
        t.usage = await finalUsage(c, t, f.usageOf(e.completionTokens))
        t.timings = { ...e.timings }
        const usage = { ...t.usage, prompt_tokens_details: { cached_tokens: e.cachedTokens ?? 0 } }
        if (f.includeUsage) yield f.chunk(null, { usage, system_fingerprint: FINGERPRINT })
      }
    }
    yield 'data: [DONE]\n\n'
  } finally {
    if (!t.finished) c.events.cancel()
    await c.record({
      choices: recordedChoices(c, t),
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
