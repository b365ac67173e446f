/**
 * A generation request made ready to run: checked against the model and the server's limits (the
 * errors vLLM gives, with its wording), its prompt rendered, tokenized and truncated, and one
 * sampler and KV cache per choice.
 */
import { randomBytes } from 'node:crypto'
import type { KVCache } from './kv-cache.js'
import type { Block } from './prefix-cache.js'
import type { LlamaModel } from './llama.js'
import type { GenerateRequest, PromptLogprobs, TokenLogprob } from './protocol.js'
import { Rng } from './rng.js'
import { Sampler } from './sampler.js'
import { GREEDY_BELOW, type SamplingParams } from './sampling-params.js'
import type { ModelTokenizer } from './tokenizer.js'
import type { SequenceGrammar } from './structured/constraint.js'

export interface EngineOptions {
  /** Sequences (choices) decoded together at most. */
  maxNumSeqs: number
  /** Requests waiting to start at most; past it a request is refused (429). */
  maxWaiting: number
  /** KV-cache positions all running sequences may hold together. */
  kvTokens: number
  /** Prompt tokens prefilled per step, over all sequences: a long prompt goes in pieces between decode steps. */
  prefillChunk: number
  /** Priority scheduling (lower `priority` first); otherwise first come, first served. */
  priority: boolean
  maxLogprobs: number
  /** Automatic prefix caching (prefix-cache.ts); on unless false, as in vLLM. */
  prefixCaching?: boolean
}

/** Sampling defaults of the model's generation_config.json (vLLM's `--generation-config auto`). */
export interface GenerationDefaults {
  temperature?: number
  top_p?: number
  top_k?: number
  min_p?: number
  repetition_penalty?: number
  presence_penalty?: number
  frequency_penalty?: number
  max_new_tokens?: number
}

export class RequestError extends Error {
  constructor(
    readonly status: number,
    message: string,
    readonly param: string | null = null,
  ) {
    super(message)
  }
}

export interface Choice {
  index: number
  sampler: Sampler
  cache: KVCache
  /** Prompt tokens prefilled so far. */
  pos: number
  output: number[]
  /** Decoded visible text (stop string handling applied once finished). */
  text: string
  /** Characters, token ids and logprobs already sent. */
  sentChars: number
  sentIds: number
  pendingLogprobs: TokenLogprob[]
  finished: boolean
  firstAt: number
  lastAt: number
  gaps: number
  /** Its place in the structured-output grammar; null: unconstrained. */
  grammar: SequenceGrammar | null
}

export interface Active {
  req: GenerateRequest
  promptIds: number[]
  maxTokens: number
  choices: Choice[]
  arrived: number
  started: number
  prefillDone: number
  reserved: number
  holdBack: number
  cancelled: boolean
  /** One entry per prompt token (the first null), when prompt_logprobs were asked for. */
  promptLogprobs: PromptLogprobs | null
  /** The prefix-cache hashes of the prompt's full blocks (empty with prefix caching off). */
  blockHashes: string[]
  /** The cached blocks this request holds (its prompt's, from the cache or stored by it): pinned until it ends. */
  blocks: Block[]
  /** Prompt tokens started from cached blocks rather than computed. */
  cachedTokens: number
}

/** What preparing a request needs of the engine. */
export interface Preparer {
  model: Pick<LlamaModel, 'vocabSize' | 'maxPositions' | 'newCache'>
  tok: ModelTokenizer
  defaults: GenerationDefaults
  opts: EngineOptions
}

export const now = () => performance.now()

/** The request's fields a prompt is rendered from. */
export type PromptRequest = Pick<
  GenerateRequest,
  | 'messages'
  | 'addGenerationPrompt'
  | 'continueFinalMessage'
  | 'addSpecialTokens'
  | 'promptTokenIds'
  | 'tools'
  | 'documents'
  | 'chatTemplate'
  | 'chatTemplateKwargs'
>

/** The prompt token ids of a chat (for /tokenize and for submit). */
export function promptIds(tok: ModelTokenizer, req: PromptRequest): number[] {
  if (req.promptTokenIds) return [...req.promptTokenIds]
  const text = tok.render(req.messages, {
    addGenerationPrompt: req.addGenerationPrompt,
    continueFinalMessage: req.continueFinalMessage,
    tools: req.tools,
    documents: req.documents,
    template: req.chatTemplate,
    kwargs: req.chatTemplateKwargs,
  })
  return tok.encode(text, req.addSpecialTokens)
}

/** Checks, renders and tokenizes the request; throws RequestError with vLLM's message when it cannot run. */
export function prepare(x: Preparer, req: GenerateRequest): Active {
  checkLogprobsAndIds(x, req)
  const { ids, maxTokens, reserved } = fitContext(x, req, promptIds(x.tok, req))
  const params = samplingParams(x, req)
  const seedBase = req.seed !== null && req.seed !== -1 ? BigInt(req.seed) : randomBytes(8).readBigInt64LE()
  const choices: Choice[] = []
  for (let i = 0; i < req.n; i++) choices.push(newChoice(i, new Sampler(params, ids, new Rng(seedBase + BigInt(i))), x.model.newCache()))
  const holdBack = req.stream && req.stop.length && !req.includeStopStrInOutput ? Math.max(...req.stop.map((s) => s.length)) - 1 : 0
  const promptLogprobs = req.promptLogprobs === null ? null : new Array(ids.length).fill(null)
  return {
    req,
    promptIds: ids,
    maxTokens,
    choices,
    arrived: now(),
    started: 0,
    prefillDone: 0,
    reserved,
    holdBack,
    cancelled: false,
    promptLogprobs,
    blockHashes: [],
    blocks: [],
    cachedTokens: 0,
  }
}

/** The logprobs counts against the server's maximum, and every token id against the vocabulary. */
function checkLogprobsAndIds(x: Preparer, req: GenerateRequest): void {
  const V = x.model.vocabSize
  const outOfVocab = (ids: number[], what: string) => {
    const bad = ids.filter((i) => i >= V)
    if (bad.length)
      throw new RequestError(400, `token_id(s) [${bad.join(', ')}] in ${what} contain out-of-vocab token ids. Vocabulary size: ${V}`, what)
  }
  const ids = req.promptTokenIds ?? []
  const top = ids.reduce((m, i) => (i > m ? i : m), -1)
  // vLLM's own check and message for a token prompt (its processor validates the model input).
  if (top >= V) throw new RequestError(400, `Token id ${top} is out of vocabulary`, 'prompt')
  if (req.logprobs !== null && req.logprobs > x.opts.maxLogprobs)
    throw new RequestError(
      400,
      `Requested sample logprobs of ${req.logprobs}, which is greater than max allowed: ${x.opts.maxLogprobs}`,
      'top_logprobs',
    )
  if (req.promptLogprobs !== null && req.promptLogprobs > x.opts.maxLogprobs)
    throw new RequestError(
      400,
      `Requested prompt logprobs of ${req.promptLogprobs}, which is greater than max allowed: ${x.opts.maxLogprobs}`,
      'prompt_logprobs',
    )
  if (req.logitBias)
    outOfVocab(
      req.logitBias.map(([id]) => id),
      'logit_bias',
    )
  outOfVocab(req.stopTokenIds, 'stop_token_ids')
  if (req.allowedTokenIds) {
    if (req.allowedTokenIds.some((i) => i >= V))
      throw new RequestError(400, 'allowed_token_ids contains out-of-vocab token id!', 'allowed_token_ids')
  }
}

/** The prompt truncated as asked, checked against the context length; max_tokens and the KV positions the request reserves. */
function fitContext(x: Preparer, req: GenerateRequest, promptIds: number[]): { ids: number[]; maxTokens: number; reserved: number } {
  const L = x.model.maxPositions
  if (req.truncatePromptTokens !== null) {
    if (req.truncatePromptTokens > L)
      throw new RequestError(
        400,
        'truncate_prompt_tokens value is greater than max_model_len. Please, select a smaller truncation size.',
        'truncate_prompt_tokens',
      )
    const keep = req.truncatePromptTokens === -1 ? L - 1 : req.truncatePromptTokens
    if (promptIds.length > keep) promptIds = promptIds.slice(promptIds.length - keep)
  }
  const P = promptIds.length
  if (P >= L)
    throw new RequestError(
      400,
      `This model's maximum context length is ${L} tokens. However, your request has ${P} input tokens. Please reduce the length of the input messages.`,
      'input_tokens',
    )
  if (req.maxTokens !== null && P + req.maxTokens > L) {
    throw new RequestError(
      400,
      `This model's maximum context length is ${L} tokens. However, you requested ${req.maxTokens} output tokens and your prompt contains ${P} input tokens, for a total of ${P + req.maxTokens} tokens. Please reduce the length of the input prompt or the number of requested output tokens.`,
      'max_tokens',
    )
  }
  const maxTokens = Math.min(L - P, req.maxTokens ?? x.defaults.max_new_tokens ?? L - P)
  if (req.minTokens > maxTokens)
    throw new RequestError(400, `min_tokens must be less than or equal to max_tokens=${maxTokens}, got ${req.minTokens}.`, 'min_tokens')
  const reserved = req.n * (P + maxTokens)
  if (reserved > x.opts.kvTokens)
    throw new RequestError(
      400,
      `This request needs ${reserved} KV-cache positions (${req.n} × (${P} prompt + ${maxTokens} output)), more than the ${x.opts.kvTokens} the server holds. Lower n or max_tokens.`,
      'max_tokens',
    )
  return { ids: promptIds, maxTokens, reserved }
}

/** The request's sampling parameters over the model's defaults; greedy turns top_p, top_k and min_p off. */
function samplingParams(x: Preparer, req: GenerateRequest): SamplingParams {
  const d = x.defaults
  const temperature = req.temperature ?? d.temperature ?? 1
  const greedy = temperature < GREEDY_BELOW
  if (greedy && req.n > 1) throw new RequestError(400, `n must be 1 when using greedy sampling, got ${req.n}.`, 'n')
  return {
    temperature,
    topP: greedy ? 1 : (req.topP ?? d.top_p ?? 1),
    topK: greedy ? 0 : Math.max(0, req.topK ?? d.top_k ?? 0),
    minP: greedy ? 0 : (req.minP ?? d.min_p ?? 0),
    repetitionPenalty: req.repetitionPenalty ?? d.repetition_penalty ?? 1,
    frequencyPenalty: req.frequencyPenalty ?? d.frequency_penalty ?? 0,
    presencePenalty: req.presencePenalty ?? d.presence_penalty ?? 0,
    logitBias: req.logitBias ? new Map(req.logitBias.map(([id, b]) => [id, Math.max(-100, Math.min(100, b))])) : null,
    minTokens: req.minTokens,
    allowedTokenIds: req.allowedTokenIds ? new Set(req.allowedTokenIds) : null,
    badWords: badWordIds(x.tok, req.badWords),
    stopIds: [...new Set([...(req.ignoreEos ? [] : x.tok.eosIds), ...req.stopTokenIds])],
    logprobs: req.logprobs,
    seed: req.seed,
  }
}

/** bad_words as token sequences: each word as given and with a leading space (kept when it differs), as vLLM does. */
function badWordIds(tok: ModelTokenizer, words: string[]): number[][] {
  const out: number[][] = []
  for (const w of words) {
    const plain = tok.encode(w.trimStart(), false)
    if (plain.length) out.push(plain)
    const spaced = tok.encode(' ' + w.trimStart(), false)
    if (spaced.length && spaced.length === plain.length && spaced[0] !== plain[0]) out.push(spaced)
  }
  return out
}

function newChoice(index: number, sampler: Sampler, cache: KVCache): Choice {
  return {
    index,
    sampler,
    cache,
    pos: 0,
    output: [],
    text: '',
    sentChars: 0,
    sentIds: 0,
    pendingLogprobs: [],
    finished: false,
    firstAt: 0,
    lastAt: 0,
    gaps: 0,
    grammar: null,
  }
}
