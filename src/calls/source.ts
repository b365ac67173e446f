import type { Params } from '../query/params.js'
import type { CallFilter } from '../schemas/common.js'
import type { QueryOptions } from './model.js'

declare const made: unique symbol
/**
 * A relation over the calls, usable as a FROM item of a statement run on a CallSource, made only
 * by the store (read/facts.ts): statistics aggregate over it without knowing how the parts are stored,
 * which table holds them or how a call is merged from its parts.
 */
export type CallRelation = string & { readonly [made]: 'CallRelation' }

/** The columns a merged call has (model.ts FOLDED), as statistics name them. */
export type CallColumn =
  | 'trace_id'
  | 'parent_id'
  | 'thread_id'
  | 'turn_id'
  | 'op_name'
  | 'display_name'
  | 'started_at'
  | 'ended_at'
  | 'attributes'
  | 'inputs'
  | 'output'
  | 'summary'
  | 'exception'
  | 'user_id'
  | 'run_id'
  | 'run_step'
  | 'run_step_end'
  | 'usage'

/** What the live calls matched by a filter and query are read with (see CallSource.matching). */
export interface MatchView {
  /** The columns read (besides `id` and `project_id`); the merge takes only these and those the filter needs. */
  columns: readonly CallColumn[]
  /** Only calls started in [from, to), in epoch milliseconds. */
  started?: readonly [number, number]
  /** Only calls whose ids lie in [lo, hi]: every part of such a call does, so the bound prunes the merge's scan. */
  ids?: readonly [string, string]
  /** Only calls that have not ended. */
  open?: boolean
}

/**
 * A bound on parts' sequence numbers: a number, or a scalar SQL expression of the caller's own (for
 * statistics, their mark `x` read from their own table, so the bound and the tables agree in one statement).
 */
export type SeqBound = number | { sql: string }

/** Which calls `touched` lists: those with at least one part meeting every condition given. */
export interface TouchedSpec {
  project?: string
  /** Parts past this seq. */
  after?: SeqBound
  /** Parts at or below this seq. */
  upTo?: SeqBound
  /** Calls with ids in [from, before); a null end is open. */
  ids?: readonly [string | null, string | null]
}

/**
 * The least and greatest id of the calls a statement merges, known before it is built (bound as values): the segments'
 * row groups outside it are skipped. DuckDB's join filters did not prune them: a correction's merge of 40,000 calls in
 * the tail read every row of five segments (1.48M ids) to find none, 35-49 ms a scan.
 */
export type IdSpan = readonly [string, string]

/** Which calls mergedSince merges: a project's (or every project's) calls with a part past `after` (and at or below `upTo`). */
export interface SinceSpec {
  project?: string
  after: SeqBound
  /** Parts past this are left out of everything (as if not yet written); none: every part. */
  upTo?: SeqBound
  /** Every touched call's id lies in this span (see IdSpan). */
  span?: IdSpan | null
}

/**
 * The calls touched since a mark, merged now and as they were at the mark, as named items of a statement's WITH list
 * (see CallSource.mergedSince): `withs` go into the statement's WITH, in order; the relations name them.
 */
export interface SinceMerge {
  withs: string[]
  /** Those calls merged from all their parts (up to `upTo`), deleted ones too (`deleted_at`). */
  now: CallRelation
  /** Those calls merged from their parts up to `after`; a call with none then has no row. */
  atMark: CallRelation
}

/** A connection to the database the calls live in, for statements over CallRelations and the caller's own tables. */
export interface CallSession {
  run(sql: string, params?: Params): Promise<void>
  /** The rows, each as an array in the statement's column order. */
  read(sql: string, params?: Params): Promise<unknown[][]>
  /** Stops the statement running now (it fails). */
  interrupt(): void
  close(): void
}

/**
 * What statistics read of the calls store, and nothing more: typed relations over merged calls, the
 * window bounds a scan needs, reads and a session to run statements on, and the store's flush and
 * compaction events. Statistics keep their rollup tables beside the calls (in the same database, so
 * a correction joins merged calls without moving them), but never name the store's tables or columns
 * of parts: every relation over calls comes from here.
 */
export interface CallSource {
  /** The data directory the store lives in; statistics keep their files beside its `calls/`. */
  readonly dataDir: string
  /** The highest seq held in segments: every part at or below it is in Parquet and never changes. */
  readonly flushedSeq: number
  /** The highest seq given to a part so far. */
  readonly lastSeq: number
  /**
   * The highest seq derived data may cover now, tail included: every part at or below it is readable and comes back
   * with the same seq after a crash; null while that cannot be said (see Storage.stableSeq).
   */
  readonly stableSeq: number | null
  /** Log records the start's replay set aside (damaged with intact records after them, or refused by the tail). */
  readonly replayQuarantined: number
  /** Resolves once every batch acknowledged so far is readable. */
  visible(): Promise<void>
  /** Set once the store is closing: nothing new should be started on it. */
  readonly closed: boolean
  /** Parts held in segments. */
  readonly segmentRows: number
  /** The highest seq a compaction still listed has folded (0 for none): parts at or below it may now be merged into parts with a later seq. */
  compactedSeq(): Promise<number>
  /** The merged, live calls of a project matching a filter and query, as `m`, with `id`, `project_id` and the view's columns. */
  matching(
    project: string,
    opts: { filter?: CallFilter | null; query?: QueryOptions['query'] },
    params: Params,
    view: MatchView,
  ): CallRelation
  /** The (project_id, id) of every call with a part meeting the spec. */
  touched(spec: TouchedSpec, params: Params): CallRelation
  /**
   * A statement reading the least (`lo`) and greatest (`hi`) id of touched(spec), nulls for none: run before a
   * statement that merges those calls, to bound its merge (IdSpan). A part acknowledged after it may fall outside; that
   * statement then takes or leaves the call whole (a span holds calls with all their parts), as if the part came later.
   */
  touchedSpan(spec: TouchedSpec, params: Params): string
  /**
   * The calls of `ids` (a relation of project_id, id) merged from their parts up to `upTo` (all when null), deleted ones
   * too (`deleted_at`).
   */
  merged(ids: CallRelation, columns: readonly CallColumn[], upTo: SeqBound | null): CallRelation
  /**
   * The calls with a part past `spec.after` merged now and at `after`, in one pass over their parts (mergedSince's WITH
   * items, named from `prefix`): the same rows as merged() of touched() at both bounds, cheaper (see read/facts.ts).
   */
  mergedSince(spec: SinceSpec, columns: readonly CallColumn[], params: Params, prefix: string): SinceMerge
  /** For each window [from, to) in epoch ms, the least and greatest id of the project's parts started in it (null for none). */
  windowIds(project: string, windows: readonly (readonly [number, number])[]): Promise<({ lo: string; hi: string } | null)[]>
  /** Runs a read (after every acknowledged write is visible, with the store's query timeout). */
  rows(sql: string, params: Params): Promise<Record<string, unknown>[]>
  /** A new session on the store's database (the caller closes it), for tables kept beside the calls. */
  session(): Promise<CallSession>
  /** Up to n - 1 ids splitting the segments into n ranges of similar size. */
  idRanges(n: number): Promise<string[]>
  /** Runs `hook` after every flush and compaction, in turn with them. */
  onSegments(hook: (event: 'flush' | 'compact') => Promise<void>): void
  /** Runs fn in turn with flushes and compactions. */
  exclusive<T>(fn: () => Promise<T>): Promise<T>
}
