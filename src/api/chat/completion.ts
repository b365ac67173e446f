import { DomainError } from '../../core/errors.js'
import { VERSION } from '../../core/version.js'
import type { RequestEvents } from '../../inference/client.js'
import type { WorkerEvent } from '../../inference/protocol.js'
import type { Outcome } from './record.js'
import type { OutputSpec } from './tools-output.js'

export type Accepted = Extract<WorkerEvent, { type: 'accepted' }>

/** A completion the engine accepted: what its reply, streamed or whole, is made of. */
export interface Completion {
  /** `chatcmpl-…` */
  id: string
  /** Unix seconds. */
  created: number
  /** The served model's name. */
  model: string
  /** Choices asked for. */
  n: number
  /** The role of the generated message: the assistant's, or the last message's when it is continued. */
  role: string
  /** The last message's text, repeated before the generated text (`echo`); null: no echo. */
  echo: string | null
  /** `return_token_ids`: the prompt's and each choice's token ids go in the reply. */
  withIds: boolean
  accepted: Accepted
  events: RequestEvents
  /** How the text becomes the message: reasoning and tool-call parsing, the tool choice. */
  spec: OutputSpec
  /** Reasoning tokens among a choice's generated ids; null: no reasoning parser. */
  reasoningTokens: ((ids: number[], reasoning: string) => Promise<number>) | null
  /** Records the completion as a call once it is over (see record.ts). */
  record(out: Outcome): Promise<void>
}

export type Usage = Outcome['usage']

export const FINGERPRINT = `weft-${VERSION}`

/** The first event decides the HTTP status: accepted, or an error answered in the envelope. */
export async function accepted(events: RequestEvents): Promise<Accepted> {
  const first = await events.next()
  if (!first) throw new DomainError(400, 'Client disconnected')
  if (first.type === 'error')
    throw new DomainError(first.status, first.message, {
      param: first.param ?? null,
      retryAfterS: first.status === 429 ? 1 : undefined,
    })
  if (first.type !== 'accepted') throw new DomainError(500, 'Internal server error')
  return first
}
