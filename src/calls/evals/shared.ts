import { DomainError } from '../../core/errors.js'
import type { Query } from '../../schemas/calls.js'
import type { RunItemsListQuery } from '../../schemas/v2-runs.js'
import type { FeedbackBackend, ObjectsBackend } from '../../catalog/backends.js'
import { createOp, opRef, PLACEHOLDER_OP_SOURCE } from '../../catalog/ops.js'
import { endPart, foldParts, startPart } from '../ingest/parts.js'
import type { CallPart, CallRecord } from '../model.js'
import type { CallBackend } from '../backend.js'

/**
 * What evaluation runs, predictions and scores are made of: calls in the calls store (written as
 * the HTTP call API writes them: durable once acknowledged, visible to the next read), the ops they
 * name in the catalog, and the runnable feedback a score leaves on its prediction. Only the backend
 * interfaces are used, so the same code serves the embedded store and ClickHouse.
 */
export interface EvalDeps {
  calls: CallBackend
  objects: ObjectsBackend
  feedback: FeedbackBackend
}

/** Who is writing, and in which project. */
export interface Scope {
  project: string
  userId: string
}

/** The keys Weave puts under `attributes.weave` to mark what a call stands for. */
export const KIND = { run: 'evaluation_run', prediction: 'prediction', score: 'score' } as const
export type Kind = keyof typeof KIND
const KIND_NAMES: Record<Kind, string> = { run: 'Evaluation run', prediction: 'Prediction', score: 'Score' }

/** Op names Weave gives the calls of an evaluation. */
export const RUN_OP = 'Evaluation.evaluate'
export const PREDICT_AND_SCORE_OP = 'Evaluation.predict_and_score'

/** Most ids one delete or one list filter may name (as /calls/delete). */
export const MAX_IDS = 1000

export function checkIds(ids: readonly unknown[], what: string, max = MAX_IDS): void {
  if (ids.length > max) throw new DomainError(413, `Request too large: at most ${max} ${what} at a time`)
}

/** `attributes.weave` of a call, or an empty object. */
export function weaveAttrs(call: CallRecord): Record<string, unknown> {
  const attrs = call.attributes as Record<string, unknown> | null | undefined
  const w = attrs && typeof attrs === 'object' ? attrs.weave : undefined
  return w && typeof w === 'object' && !Array.isArray(w) ? (w as Record<string, unknown>) : {}
}

export const isKind = (call: CallRecord, kind: Kind): boolean => weaveAttrs(call)[KIND[kind]] === 'true'

export const str = (v: unknown): string | null => (typeof v === 'string' ? v : null)

/** The live call `id` when it is a run, prediction or score (as `kind` says); otherwise 404. */
export async function readKind(d: EvalDeps, project: string, id: string, kind: Kind): Promise<CallRecord> {
  const call = await d.calls.read(project, id)
  if (!call || !isKind(call, kind)) throw new DomainError(404, `${KIND_NAMES[kind]} ${JSON.stringify(id)} not found`)
  return call
}

/** A Weave ref to an op or object: `weave:///<entity>/<project>/<object|op>/<name>:<digest>[/<path>]`. */
export interface ParsedRef {
  project: string
  kind: 'object' | 'op'
  name: string
  digest: string
}

const REF = /^weave:\/\/\/([^/]+\/[^/]+)\/(object|op)\/([^/:]+):([^/:]+)(?:\/.*)?$/s

export function parseRef(ref: string): ParsedRef | null {
  const m = REF.exec(ref)
  return m ? { project: m[1]!, kind: m[2] as 'object' | 'op', name: m[3]!, digest: m[4]! } : null
}

/** The names an object id may take here, leaving room for the `.predict`/`.score` the ops add. */
export const NAME = /^[A-Za-z0-9_.-]{1,120}$/

/** Whether a call's op (a plain name or an op ref) is the op `name`, whatever its version. */
export function opNameIs(opName: unknown, name: string): boolean {
  if (typeof opName !== 'string') return false
  return opName === name || parseRef(opName)?.name === name
}

/**
 * Saves the op `name` (placeholder source: these calls have no code of their own) and returns its
 * ref. The same content is the same version, so every run, prediction and score names one op version.
 */
export async function ensureOp(d: EvalDeps, s: Scope, name: string): Promise<string> {
  const { digest } = await createOp(d.objects, s.project, name, PLACEHOLDER_OP_SOURCE, s.userId)
  return opRef(s.project, name, digest)
}

/** What a call starts with (the rest is Weave's defaults). */
export interface Start {
  id: string
  trace_id: string
  parent_id?: string | null
  op_name: string
  attributes: Record<string, unknown>
  inputs: Record<string, unknown>
}

export const nowIso = (): string => new Date().toISOString()

export const startOf = (s: Scope, c: Start): CallPart => startPart({ project_id: s.project, ...c, started_at: nowIso() }, s.userId)

export const endOf = (s: Scope, id: string, output: unknown, summary: Record<string, unknown> = {}): CallPart =>
  endPart({ project_id: s.project, id, ended_at: nowIso(), output, summary })

/** Writes parts as one acknowledged batch (a call's start and end folded into one part). */
export function write(d: EvalDeps, parts: CallPart[]): Promise<void> {
  return d.calls.ingest(foldParts(parts))
}

/** `attributes.weave.<key> == value`, in Weave's query language. */
export const attrIs = (key: string, value: string) => ({
  $eq: [{ $getField: `attributes.weave.${key}` }, { $literal: value }],
})

/** `attributes.weave.<key>` is one of `values`. */
export const attrIn = (key: string, values: string[]) => ({
  $in: [{ $getField: `attributes.weave.${key}` }, values.map((v) => ({ $literal: v }))],
})

export const allOf = (conds: object[]): Query => ({ $expr: conds.length === 1 ? conds[0]! : { $and: conds } }) as Query

/** The calls of one kind a query matches, oldest first, a chunk at a time, each shaped by `shape`. */
export async function listKind<T>(
  d: EvalDeps,
  project: string,
  opts: { query: Query; callIds?: string[]; limit?: number; offset?: number },
  shape: (c: CallRecord) => T,
): Promise<AsyncGenerator<T[]>> {
  const filter = opts.callIds?.length ? { call_ids: opts.callIds } : undefined
  const chunks = await d.calls.stream(project, { query: opts.query, filter, limit: opts.limit, offset: opts.offset })
  return (async function* () {
    for await (const calls of chunks) yield calls.map(shape)
  })()
}

/** Predictions or scores, optionally only those of one run, oldest first. */
export function listRunItems<T>(
  d: EvalDeps,
  project: string,
  kind: 'prediction' | 'score',
  q: RunItemsListQuery,
  shape: (c: CallRecord) => T,
): Promise<AsyncGenerator<T[]>> {
  const conds = [attrIs(KIND[kind], 'true')]
  if (q.evaluation_run_id) conds.push(attrIs('evaluation_run_id', q.evaluation_run_id))
  return listKind(d, project, { query: allOf(conds), limit: q.limit, offset: q.offset }, shape)
}

/**
 * Deletes the calls among `ids` that are of `kind`, and everything under them (as /calls/delete
 * does); ids of other calls, unknown or deleted ones are left alone. Answers how many calls it deleted.
 */
export async function deleteKind(d: EvalDeps, project: string, ids: string[], kind: Kind): Promise<{ num_deleted: number }> {
  checkIds(ids, 'ids')
  const unique = [...new Set(ids)]
  const found = await d.calls.query(project, { filter: { call_ids: unique }, query: allOf([attrIs(KIND[kind], 'true')]) })
  if (found.length === 0) return { num_deleted: 0 }
  const all = await d.calls.withDescendants(
    project,
    found.map((c) => String(c.id)),
  )
  const now = (BigInt(Date.now()) * 1000n).toString()
  await d.calls.ingest(all.map((id) => ({ kind: 'delete' as const, project_id: project, id, deleted_us: now })))
  return { num_deleted: all.length }
}
