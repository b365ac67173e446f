import { DomainError } from '../../core/errors.js'
import type { Reply } from '../route.js'
import type { WorkerEvent } from '../../inference/protocol.js'
import { FINGERPRINT } from './completion.js'
import type { Legacy, PromptRun } from './legacy-completion.js'
import { generatedEntries, legacyLogprobs, promptEntries } from './legacy-logprobs.js'
import type { Outcome } from './record.js'

type Finish = Extract<WorkerEvent, { type: 'finish' }>
type Done = Extract<WorkerEvent, { type: 'done' }>
type Failure = Extract<WorkerEvent, { type: 'error' }>

/** One prompt's events, folded: its finished choices, its totals, or what went wrong. */
interface RunResult {
  finishes: (Finish | undefined)[]
  done: Done | null
  error: Failure | null
}

async function drain(run: PromptRun, n: number): Promise<RunResult> {
  const r: RunResult = { finishes: Array.from({ length: n }, () => undefined), done: null, error: null }
  for await (const e of run.events) {
    if (e.type === 'finish') r.finishes[e.choice] = e
    else if (e.type === 'done') r.done = e
    else if (e.type === 'error') {
      r.error = e
      break
    }
  }
  return r
}

/** A choice of prompt `p`: its text (after the prompt with echo), its logprobs in the legacy shape. */
async function choiceOf(c: Legacy, p: number, f: Finish, done: Done): Promise<Record<string, unknown>> {
  const run = c.runs[p]!
  let logprobs = null
  if (c.logprobs !== null) {
    let entries = generatedEntries(f.logprobs ?? [])
    const ids = run.accepted.promptIds
    if (c.echo && done.promptLogprobs && ids.length)
      entries = [...promptEntries(ids, done.promptLogprobs, await c.piece(ids[0]!), c.asIds), ...entries]
    logprobs = legacyLogprobs(entries, 0)
  }
  return {
    index: p * c.n + f.choice,
    text: (c.echo ? run.text : '') + f.text,
    logprobs,
    finish_reason: f.finishReason,
    stop_reason: f.stopReason,
    prompt_logprobs: done.promptLogprobs,
    token_ids: c.withIds ? f.tokenIds : null,
    prompt_token_ids: c.withIds ? run.accepted.promptIds : null,
  }
}

/** Usage over every prompt: prompt tokens of each, every choice's generated tokens. */
function usageOf(results: RunResult[], c: Legacy) {
  const prompt = c.runs.reduce((s, r, i) => s + (results[i]!.done?.promptTokens ?? r.accepted.promptTokens), 0)
  const completion = results.reduce((s, r) => s + (r.done?.completionTokens ?? 0), 0)
  const cached = results.reduce((s, r) => s + (r.done?.cachedTokens ?? 0), 0)
  return { counts: { prompt_tokens: prompt, completion_tokens: completion, total_tokens: prompt + completion }, cached }
}

const recorded = (choices: Record<string, unknown>[]): Outcome['choices'] =>
  choices.map((ch) => ({
    index: ch.index as number,
    text: ch.text as string,
    finish_reason: ch.finish_reason as string,
    stop_reason: ch.stop_reason as string | number | null,
  }))

/** A non-streamed legacy completion: one `text_completion` body once every prompt's choices have finished. */
export async function legacyReply(c: Legacy): Promise<Reply> {
  const results = await Promise.all(c.runs.map((r) => drain(r, c.n)))
  const { counts, cached } = usageOf(results, c)
  const failed = results.find((r) => r.error)?.error
  if (failed) {
    c.runs.forEach((r) => r.events.cancel())
    await c.record({ choices: [], usage: counts, timings: null, error: failed.message })
    throw new DomainError(failed.status, failed.message, { param: failed.param ?? null })
  }
  const complete = results.every((r) => r.done && r.finishes.every((f) => f !== undefined))
  const choices: Record<string, unknown>[] = []
  if (complete) for (const [p, r] of results.entries()) for (const f of r.finishes) choices.push(await choiceOf(c, p, f!, r.done!))
  const timings = results.length === 1 && results[0]!.done ? { ...results[0]!.done.timings } : null
  await c.record({ choices: recorded(choices), usage: counts, timings, error: complete ? null : 'Client disconnected' })
  if (!complete) throw new DomainError(400, 'Client disconnected')
  return {
    body: {
      id: c.id,
      object: 'text_completion',
      created: c.created,
      model: c.model,
      choices,
      service_tier: null,
      system_fingerprint: FINGERPRINT,
      usage: { ...counts, prompt_tokens_details: { cached_tokens: cached } },
      kv_transfer_params: null,
    },
  }
}
