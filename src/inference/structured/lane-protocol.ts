/**
 * Messages between a model's engine and one of its grammar lanes (a worker thread with its own
 * xgrammar instance, see lanes.ts). Messages on a port arrive in order, so a token accepted before
 * a mask is asked for is always taken into account.
 */
import type { Constraint } from './constraint.js'
import type { GrammarVocab } from './vocab.js'

export interface LaneConfig {
  vocab: GrammarVocab
}

export type LaneCommand =
  /** Compile (or find in the cache) and make `n` matchers; stopIds adds the request's stop token ids. */
  | { op: 'open'; id: number; constraint: Constraint; stopIds: number[] | null; n: number }
  | { op: 'mask'; id: number; matcher: number }
  | { op: 'accept'; matcher: number; token: number }
  | { op: 'dispose'; matcher: number }

export type LaneReply =
  | {
      op: 'opened'
      id: number
      matchers: number[]
      /** Cache keys the lane's grammar cache let go of while answering (LRU eviction or a retired instance). */
      evicted: string[]
      cleared: boolean
    }
  /** null: the grammar is complete, only end-of-sequence may follow. */
  | { op: 'mask'; id: number; mask: Int32Array | null }
  /** Sent once, unasked, when the lane's xgrammar instance is loaded: compile time limits count from then. */
  | { op: 'ready' }
  /** `grammar`: xgrammar rejected the constraint (a 400); otherwise an internal failure. */
  | { op: 'error'; id: number; message: string; grammar: boolean }
