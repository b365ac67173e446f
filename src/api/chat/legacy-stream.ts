import type { StreamReply } from '../route.js'
import type { WorkerEvent } from '../../inference/protocol.js'
import type { StreamOptions } from '../../schemas/chat.js'
import { FINGERPRINT } from './completion.js'
import type { Legacy, PromptRun } from './legacy-completion.js'
import { generatedEntries, legacyLogprobs, promptEntries, type LegacyEntry } from './legacy-logprobs.js'
import { errorFrame } from './stream.js'

type Step = Extract<WorkerEvent, { type: 'delta' | 'finish' }>

/** Every prompt's events as they come, tagged with the prompt's index. */
async function* merged(runs: PromptRun[]): AsyncGenerator<[number, WorkerEvent]> {
  const pending = new Map<number, Promise<[number, WorkerEvent | undefined]>>()
  const pull = (i: number) =>
    pending.set(
      i,
      runs[i]!.events.next().then((e) => [i, e]),
    )
  runs.forEach((_, i) => pull(i))
  while (pending.size) {
    const [i, e] = await Promise.race(pending.values())
    if (e === undefined) {
      pending.delete(i)
      continue
    }
    pull(i)
    yield [i, e]
  }
}

const codePoints = (s: string) => [...s].length

/** What the stream has sent, per choice (index `prompt × n + j`), and the totals. */
class Tally {
  readonly texts: string[]
  readonly sent: number[]
  readonly started: boolean[]
  readonly finishes: { finish_reason: string | null; stop_reason: string | number | null }[]
  prompt = 0
  completion = 0
  cached = 0
  timings: Record<string, number> | null = null
  done = 0
  failure: string | null = null

  constructor(size: number) {
    this.texts = Array.from({ length: size }, () => '')
    this.sent = Array.from({ length: size }, () => 0)
    this.started = Array.from({ length: size }, () => false)
    this.finishes = Array.from({ length: size }, () => ({ finish_reason: null, stop_reason: null }))
  }

  usage() {
    return { prompt_tokens: this.prompt, completion_tokens: this.completion, total_tokens: this.prompt + this.completion }
  }
}

/** A choice's first chunk carries the echoed prompt: its text, and with logprobs its tokens' (side request, see legacy.ts). */
async function echoed(c: Legacy, run: PromptRun): Promise<{ text: string; entries: LegacyEntry[] }> {
  const ids = run.accepted.promptIds
  const plp = c.logprobs !== null && run.promptLogprobs ? await run.promptLogprobs : null
  const entries = plp && ids.length ? promptEntries(ids, plp, await c.piece(ids[0]!), c.asIds) : []
  return { text: run.text, entries }
}

async function stepChunk(c: Legacy, t: Tally, p: number, e: Step, continuous: boolean): Promise<string> {
  const run = c.runs[p]!
  const index = p * c.n + e.choice
  const first = !t.started[index]
  t.started[index] = true
  const head = c.echo && first ? await echoed(c, run) : { text: '', entries: [] }
  const text = head.text + e.text
  const entries = [...head.entries, ...(e.logprobs ? generatedEntries(e.logprobs) : [])]
  const finished = e.type === 'finish'
  const choice: Record<string, unknown> = {
    index,
    text,
    logprobs: c.logprobs !== null ? legacyLogprobs(entries, t.sent[index]!) : null,
    finish_reason: finished ? e.finishReason : null,
    stop_reason: finished ? e.stopReason : null,
  }
  if (c.withIds) [choice.prompt_token_ids, choice.token_ids] = [first ? run.accepted.promptIds : null, e.tokenIds]
  t.texts[index] += text
  t.sent[index]! += codePoints(text)
  if (finished) t.finishes[index] = { finish_reason: e.finishReason, stop_reason: e.stopReason }
  const extra: Record<string, unknown> = {}
  if (continuous) {
    const promptTokens = run.accepted.promptTokens
    extra.usage = { prompt_tokens: promptTokens, completion_tokens: e.completionTokens, total_tokens: promptTokens + e.completionTokens }
  }
  return frame(c, [choice], extra)
}

const frame = (c: Legacy, choices: unknown[], extra: Record<string, unknown> = {}) =>
  `data: ${JSON.stringify({ id: c.id, object: 'text_completion', created: c.created, model: c.model, choices, ...extra })}\n\n`

/** The SSE body; whatever way it ends (done, engine error, client gone), the completion is recorded. */
async function* sse(c: Legacy, options: StreamOptions | null | undefined): AsyncGenerator<string> {
  const includeUsage = options?.include_usage === true
  const continuous = includeUsage && options?.continuous_usage_stats === true
  const t = new Tally(c.runs.length * c.n)
  try {
    for await (const [p, e] of merged(c.runs)) {
      if (e.type === 'error') {
        t.failure = e.message
        yield errorFrame(e)
        break
      }
      if (e.type === 'delta' || e.type === 'finish') yield await stepChunk(c, t, p, e, continuous)
      if (e.type === 'done') {
        t.done++
        t.prompt += e.promptTokens
        t.completion += e.completionTokens
        t.cached += e.cachedTokens ?? 0
        if (c.runs.length === 1) t.timings = { ...e.timings }
      }
    }
    if (t.done === c.runs.length && includeUsage)
      yield frame(c, [], { usage: { ...t.usage(), prompt_tokens_details: { cached_tokens: t.cached } }, system_fingerprint: FINGERPRINT })
    yield 'data: [DONE]\n\n'
  } finally {
    const finished = t.done === c.runs.length
    if (!finished) c.runs.forEach((r) => r.events.cancel())
    await c.record({
      choices: t.texts.map((text, index) => ({ index, text, ...t.finishes[index]! })),
      usage: t.usage(),
      timings: t.timings,
      error: t.failure ?? (finished ? null : 'Client disconnected'),
    })
  }
}

/** A streamed legacy completion: `text_completion` chunks as SSE events, pulled as fast as the client reads. */
export function legacyStream(c: Legacy, options: StreamOptions | null | undefined): StreamReply {
  return { contentType: 'text/event-stream; charset=utf-8', headers: { 'cache-control': 'no-cache' }, stream: sse(c, options) }
}
