import type { RequestEvents } from '../../inference/client.js'
import type { PromptLogprobs } from '../../inference/protocol.js'
import type { Accepted } from './completion.js'
import type { Outcome } from './record.js'

/** One prompt of the request, accepted by the engine. */
export interface PromptRun {
  /** The prompt as text (what `echo` repeats). */
  text: string
  events: RequestEvents
  accepted: Accepted
  /** With streamed echo and logprobs: the prompt's logprobs, from a side request (legacy.ts). */
  promptLogprobs: Promise<PromptLogprobs | null> | null
}

/** A legacy completion the engine accepted: what its reply, streamed or whole, is made of. */
export interface Legacy {
  /** `cmpl-…` */
  id: string
  created: number
  model: string
  n: number
  echo: boolean
  /** Alternatives per token; null: no logprobs. */
  logprobs: number | null
  /** `return_token_ids`. */
  withIds: boolean
  /** `return_tokens_as_token_ids`. */
  asIds: boolean
  runs: PromptRun[]
  /** The text of one token (the first prompt token's, for echoed logprobs). */
  piece(id: number): Promise<string>
  record(out: Outcome): Promise<void>
}
