/**
 * POST /v1/completions (vLLM's legacy completions): each prompt of the request becomes one engine
 * request with the chat path's sampling (samplingOf), its choices numbered `prompt × n + j`.
 *
 * The engine renders every prompt through a chat template, so a text prompt goes in through a
 * template that outputs the text as it is. A token-id prompt is decoded to text and re-encoded
 * the same way; the ids the engine reports back must be the client's (a suffix of them after
 * truncation), else the request is refused rather than run on other tokens.
 */
import { randomUUID } from 'node:crypto'
import type { Ctx, Reply } from '../route.js'
import { CompletionReqSchema, type CompletionReq } from '../../schemas/completions.js'
import type { GenerateRequest, PromptLogprobs } from '../../inference/protocol.js'
import type { ModelPool as ModelServer } from '../../inference/client.js'
import { bad, checkSampling, samplingOf } from './request.js'
import { jsonBody, SEED_RANGE } from './body.js'
import { accepted, type Accepted } from './completion.js'
import type { Legacy, PromptRun } from './legacy-completion.js'
import { recordCompletion, TEXT_KIND } from './record.js'
import { asDomainError } from './models.js'
import type { CompleteOptions } from './complete.js'
import { beginCompletion } from './begin.js'
import { legacyReply } from './legacy-reply.js'
import { legacyStream } from './legacy-stream.js'

/** A template that renders the one message's text untouched: the prompt is the text. */
const VERBATIM = "{{ messages[0]['content'] }}"

/** vLLM's checks particular to legacy completions, then the shared ones. */
function checkLegacy(b: CompletionReq, priorityScheduling: boolean): void {
  if (b.suffix !== undefined && b.suffix !== null) throw bad('suffix is not currently supported', 'suffix')
  const n = b.n ?? 1
  if (b.best_of !== undefined && b.best_of !== null) {
    if (b.best_of < n) throw bad(`best_of must be greater than or equal to n, got n=${n} and best_of=${b.best_of}.`, 'best_of')
    if (b.best_of > 1) throw bad('vLLM V1 does not yet support best_of.', 'best_of')
  }
  checkSampling(b, priorityScheduling)
}

/** The prompts as text (for echo) and, for token prompts, the ids the engine takes as they are. */
async function promptsOf(b: CompletionReq, model: ModelServer): Promise<{ text: string; ids: number[] | null }[]> {
  const p = b.prompt
  const list: (string | number[])[] =
    typeof p === 'string' ? [p] : typeof p[0] === 'number' ? [p as number[]] : (p as (string | number[])[])
  return Promise.all(
    list.map(async (x) =>
      // Ids the tokenizer cannot decode (past the vocabulary) are refused by the engine, with vLLM's message.
      typeof x === 'string' ? { text: x, ids: null } : { text: await model.detokenize(x).catch(() => ''), ids: x },
    ),
  )
}

function generateOf(b: CompletionReq, id: string, prompt: { text: string; ids: number[] | null }): GenerateRequest {
  return {
    id,
    messages: [{ role: 'user', content: prompt.text }],
    addGenerationPrompt: false,
    continueFinalMessage: false,
    // Token prompts already hold whatever special tokens the client wanted.
    addSpecialTokens: prompt.ids === null && b.add_special_tokens !== false,
    promptTokenIds: prompt.ids,
    tools: null,
    documents: null,
    chatTemplate: VERBATIM,
    chatTemplateKwargs: null,
    ...samplingOf(b),
    maxTokens: b.max_tokens ?? null,
    logprobs: b.logprobs ?? null,
    // With echo and no prompt_logprobs, vLLM reports the prompt's at `logprobs`.
    promptLogprobs: b.prompt_logprobs ?? (b.echo && b.logprobs !== undefined && b.logprobs !== null && !b.stream ? b.logprobs : null),
  }
}

/** An empty prompt (or one truncated to nothing) is refused as vLLM refuses it. */
function checkNotEmpty(got: number[]): void {
  if (!got.length) throw bad('The decoder prompt cannot be empty', 'prompt')
}

/**
 * Streamed echo with logprobs: the engine reports prompt logprobs only when a request ends, so a
 * one-token side request computes them while the stream runs (the cost is a second prefill).
 */
function promptLogprobsRun(model: ModelServer, gen: GenerateRequest, k: number): Promise<PromptLogprobs | null> {
  const side = model.generate({
    ...gen,
    id: `${gen.id}-echo`,
    n: 1,
    maxTokens: 1,
    minTokens: 0,
    stream: false,
    logprobs: null,
    promptLogprobs: k,
    constraint: null,
    seed: 0,
    beamSearch: null,
  })
  return (async () => {
    for await (const e of side) {
      if (e.type === 'done') return e.promptLogprobs
      if (e.type === 'error') return null
    }
    return null
  })()
}

/** Starts every prompt; when one is refused, the others are cancelled and its error is the answer. */
async function startRuns(b: CompletionReq, model: ModelServer, id: string, signal: AbortSignal): Promise<PromptRun[]> {
  const prompts = await promptsOf(b, model)
  const gens = prompts.map((p, i) => generateOf(b, `${id}-${i}-${randomUUID()}`, p))
  const all = gens.map((g) => model.generate(g))
  signal.addEventListener('abort', () => all.forEach((e) => e.cancel()))
  const settled = await Promise.allSettled(all.map((e) => accepted(e)))
  let acc: Accepted[]
  try {
    acc = settled.map((s) => {
      if (s.status === 'rejected') throw s.reason
      checkNotEmpty(s.value.promptIds)
      return s.value
    })
  } catch (e) {
    all.forEach((x) => x.cancel())
    throw e
  }
  const sideK = b.stream && b.echo && b.logprobs !== undefined && b.logprobs !== null ? b.logprobs : null
  return acc.map((a, i) => ({
    text: prompts[i]!.text,
    events: all[i]!,
    accepted: a,
    promptLogprobs: sideK === null ? null : promptLogprobsRun(model, gens[i]!, sideK),
  }))
}

/** POST /v1/completions */
export function legacyHandler(o: CompleteOptions) {
  const read = jsonBody<CompletionReq>(CompletionReqSchema, SEED_RANGE)
  return async function completions(ctx: Ctx): Promise<Reply> {
    const b = read(ctx)
    checkLegacy(b, o.priorityScheduling)
    const { model, id, call } = beginCompletion(ctx, o.pick, b, 'cmpl', TEXT_KIND)
    const runs = await startRuns(b, model, id, ctx.signal)
    const name = model.info.name
    const c: Legacy = {
      id,
      created: Math.floor(Date.now() / 1000),
      model: name,
      n: b.n ?? 1,
      echo: b.echo === true,
      logprobs: b.logprobs ?? null,
      withIds: b.return_token_ids === true,
      asIds: b.return_tokens_as_token_ids === true,
      runs,
      piece: (tokenId) => model.detokenize([tokenId]).catch(asDomainError),
      record: (out) => recordCompletion(o.recorder, ctx.log, call, out),
    }
    return b.stream ? legacyStream(c, b.stream_options) : legacyReply(c)
  }
}
