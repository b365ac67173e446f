import { DomainError } from '../core/errors.js'
import type { CallRecord } from '../calls/model.js'
import type { FeedbackBackend } from '../catalog/backends.js'
import type { FeedbackQueryReq } from '../schemas/feedback.js'

/** The fields of each attached row, in Weave's order (its calls query asks the feedback query for these). */
const FIELDS = [
  'id',
  'feedback_type',
  'weave_ref',
  'payload',
  'creator',
  'created_at',
  'wb_user_id',
  'runnable_ref',
  'call_ref',
  'trigger_ref',
  'annotation_ref',
]
/** Calls per feedback query: their refs are one `$in` list, and the query language bounds its nodes (2000). */
const CALLS_PER_QUERY = 1000
/** Feedback rows one query may bring for its calls; past it the request is too large (page with a smaller limit). */
const MAX_ROWS = 100_000

const refOf = (project: string, id: unknown) => `weave:///${project}/call/${String(id)}`

/** The feedback rows about the given calls (a few hundred at a time: one query per `CALLS_PER_QUERY`), by call ref. */
async function rowsFor(store: FeedbackBackend, project: string, calls: CallRecord[]): Promise<Map<string, Record<string, unknown>[]>> {
  const byRef = new Map<string, Record<string, unknown>[]>()
  for (let i = 0; i < calls.length; i += CALLS_PER_QUERY) {
    const refs = calls.slice(i, i + CALLS_PER_QUERY).map((c) => refOf(project, c.id))
    const query = { $expr: { $in: [{ $getField: 'weave_ref' }, refs.map((r) => ({ $literal: r }))] } } as FeedbackQueryReq['query']
    const { result } = await store.query({ project_id: project, fields: FIELDS, query, limit: MAX_ROWS + 1 })
    if (result.length > MAX_ROWS)
      throw new DomainError(413, `More than ${MAX_ROWS} feedback rows for one page of calls: page with a smaller limit`)
    for (const row of result) {
      const ref = String(row.weave_ref)
      const list = byRef.get(ref)
      if (list) list.push(row)
      else byRef.set(ref, [row])
    }
  }
  return byRef
}

/**
 * With include_feedback, each call gains `summary.weave.feedback`: the rows whose `weave_ref` is the
 * call's ref (an empty list when none), oldest first. The call's summary is created when the
 * requested columns left it out, as Weave does.
 */
export async function attachFeedback(store: FeedbackBackend, project: string, calls: CallRecord[]): Promise<void> {
  if (calls.length === 0) return
  const byRef = await rowsFor(store, project, calls)
  for (const c of calls) {
    const summary = isObject(c.summary) ? c.summary : {}
    const weave = isObject(summary.weave) ? summary.weave : {}
    c.summary = { ...summary, weave: { ...weave, feedback: byRef.get(refOf(project, c.id)) ?? [] } }
  }
}

function isObject(v: unknown): v is Record<string, unknown> {
  return v !== null && typeof v === 'object' && !Array.isArray(v)
}
