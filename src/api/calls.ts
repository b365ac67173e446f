import { DomainError } from '../core/errors.js'
import type { Static } from '@sinclair/typebox'
import { bodyProject, route, type Ctx, type Reply, type RouteDef } from './route.js'
import type { CallRecord } from '../calls/model.js'
import { keptColumns } from '../calls/arrow/calls.js'
import { ARROW_STREAM, acceptsArrow } from '../calls/arrow/media.js'
import type { BackendName, CallBackend } from '../calls/backend.js'
import type { IngestPool } from '../calls/ingest/pool.js'
import type { IngestTask } from '../calls/ingest/prepare.js'
import { withCosts, type Prices } from '../catalog/prices.js'
import type { CallStats } from '../stats/engine.js'
import type { FeedbackBackend } from '../catalog/backends.js'
import { bindFeedback, feedbackFieldsOf } from '../query/feedback-fields.js'
// expand_columns and include_feedback (calls-expand.ts):
import type { RefResolver } from '../catalog/refs.js'
import { finisher, withExpand, type ExpandDeps } from './calls-expand.js'
import { CallsQueryStatsReqSchema, CallsQueryStatsResSchema } from '../schemas/calls.js'
import {
  CallCreateBatchReqSchema,
  CallCreateBatchResSchema,
  CallEndReqSchema,
  CallReadReqSchema,
  CallStartReqSchema,
  CallStartResSchema,
  CallUpdateReqSchema,
  CallsDeleteReqSchema,
  CallsDeleteResSchema,
  CallsQueryReqSchema,
} from '../schemas/calls-write.js'

function pickColumns(call: CallRecord, columns: string[] | null | undefined): CallRecord {
  const keep = keptColumns(columns)
  if (!keep) return call
  return Object.fromEntries(Object.entries(call).filter(([k]) => keep.has(k)))
}

/** What the call routes work with. */
export interface CallsDeps {
  store: CallBackend
  /** Named in the 501 of a feature the backend does not serve (default embedded). */
  backend?: BackendName
  pool: IngestPool
  /** Most calls /calls/query returns at once (413 past it). */
  maxQueryRows: number
  /** Without: include_costs answers 501. */
  prices?: Prices
  /** Rollups that answer plain counts fast; without: every count is a query. */
  stats?: Pick<CallStats, 'count'>
  /** Feedback, for queries and sorts on `feedback.[<type>].payload.<path>` fields. */
  feedback?: FeedbackBackend
  /** Resolves refs for expand_columns. */
  refs?: RefResolver
}

type Queried = { project_id: string; query?: { $expr: unknown } | null; sort_by?: { field: string }[] | null }

/**
 * Feedback fields named in the query or sort are read from the catalog first (one query) and bound
 * to copies of the query and sort list, which the call store's compiler finds them by.
 */
async function withFeedback<T extends Queried>(d: CallsDeps, body: T): Promise<T> {
  const fields = feedbackFieldsOf(body.query, body.sort_by)
  if (fields.length === 0) return body
  if (!d.feedback) throw new DomainError(400, 'Feedback fields cannot be queried on this server')
  const values = await d.feedback.callValues(body.project_id, fields)
  const query = body.query && { ...body.query }
  const sort_by = body.sort_by && [...body.sort_by]
  bindFeedback([query, sort_by], values)
  return { ...body, query, sort_by }
}

/** 501 for a feature this backend does not serve yet (rather than an answer from another store). */
function notServed(d: CallsDeps, what: string): DomainError {
  return new DomainError(501, `${what} is not served on the ${d.backend ?? 'embedded'} storage backend yet`)
}

/** include_feedback needs a feedback store; without one, another backend answers 501 (checked once per request). */
function checkServed(d: CallsDeps, b: { include_feedback?: boolean | null }): void {
  if (d.backend === undefined || d.backend === 'embedded') return
  if (b.include_feedback && !d.feedback) throw notServed(d, 'include_feedback')
}

/** What calls-expand.ts reads: the backend's distinct refs and the ref resolver. */
function expandDeps(d: CallsDeps): ExpandDeps {
  return { distinctRefs: d.store.distinctRefs?.bind(d.store), refs: d.refs, feedback: d.feedback }
}

/** With include_costs, each call gains summary.weave.costs from the project's prices. */
async function costed(d: CallsDeps, project: string, include: boolean | null | undefined): Promise<(c: CallRecord) => CallRecord> {
  if (!include) return (c) => c
  if (!d.prices) throw notServed(d, 'include_costs')
  const rows = await d.prices.forProject(project)
  return (c) => withCosts(c, rows)
}

/** The body is parsed, validated and encoded in the worker pool; here it is only logged and added. */
const ingest =
  (d: CallsDeps, route: IngestTask['route']) =>
  async (ctx: Ctx): Promise<Reply> => {
    const p = ctx.principal!
    const { record, count, replyJson } = await d.pool.prepare({
      route,
      body: ctx.rawBody ?? Buffer.alloc(0),
      userId: p.userId,
      entities: p.entities,
    })
    await d.store.ingestRecord(record, count)
    return { raw: replyJson!, contentType: 'application/json' }
  }

async function readCall(d: CallsDeps, ctx: Ctx<Static<typeof CallReadReqSchema>>): Promise<Reply> {
  const call = await d.store.read(ctx.body.project_id, ctx.body.id)
  const cost = await costed(d, ctx.body.project_id, ctx.body.include_costs)
  return { body: { call: call && cost(call) } }
}

async function updateCall(d: CallsDeps, ctx: Ctx<Static<typeof CallUpdateReqSchema>>): Promise<Reply> {
  const b = ctx.body
  if (b.display_name === undefined || b.display_name === null)
    throw new DomainError(400, 'One of [display_name] is required for call update')
  const id = b.call_id
  if (!(await d.store.read(b.project_id, id))) throw new DomainError(404, `Call ${JSON.stringify(id)} not found`)
  await d.store.ingest([{ kind: 'update', project_id: b.project_id, id, display_name: b.display_name }])
  return { body: {} }
}

async function deleteCalls(d: CallsDeps, ctx: Ctx<Static<typeof CallsDeleteReqSchema>>): Promise<Reply> {
  const { project_id, call_ids } = ctx.body
  if (call_ids.length > 1000) throw new DomainError(413, 'Request too large: at most 1000 call ids per delete')
  // Nothing to delete; DuckDB also cannot bind an empty list (its item type is unknown).
  if (call_ids.length === 0) return { body: { num_deleted: 0 } }
  const ids = await d.store.withDescendants(project_id, call_ids)
  const now = (BigInt(Date.now()) * 1000n).toString()
  await d.store.ingest(ids.map((id) => ({ kind: 'delete' as const, project_id, id, deleted_us: now })))
  return { body: { num_deleted: ids.length } }
}

/**
 * The same query as an Arrow IPC stream, a record batch per DuckDB chunk. Costs, expanded refs and
 * feedback are added to call objects in JS, so they are not offered as Arrow: 406 says so.
 */
async function streamArrow(d: CallsDeps, ctx: Ctx<Static<typeof CallsQueryReqSchema>>): Promise<Reply> {
  const b = ctx.body
  if (b.include_costs || b.include_feedback || (b.expand_columns && b.expand_columns.length))
    throw new DomainError(
      406,
      'include_costs, include_feedback and expand_columns are answered as JSON lines only: ask for application/jsonl',
    )
  if (!d.store.streamArrow) throw notServed(d, 'Arrow output')
  const { schema, batches } = await d.store.streamArrow(b.project_id, await withFeedback(d, b))
  const { ipcStream } = await import('../calls/arrow/ipc.js')
  return { contentType: ARROW_STREAM, stream: ipcStream(schema, batches) }
}

async function streamQuery(d: Deps, ctx: Ctx<Static<typeof CallsQueryReqSchema>>): Promise<Reply> {
  checkServed(d, ctx.body)
  if (acceptsArrow(ctx.headers.accept)) return streamArrow(d, ctx)
  const finish = finisher(d.x, ctx.body)
  const chunks = await d.store.stream(ctx.body.project_id, await withExpand(d.x, await withFeedback(d, ctx.body)))
  const columns = ctx.body.columns
  const cost = await costed(d, ctx.body.project_id, ctx.body.include_costs)
  async function* lines() {
    for await (const calls of chunks) {
      const page = calls.map((c) => pickColumns(cost(c), columns))
      yield (finish ? await finish(page) : page).map((c) => JSON.stringify(c) + '\n').join('')
    }
  }
  return { contentType: 'application/jsonl', stream: lines() }
}

async function queryCalls(d: Deps, ctx: Ctx<Static<typeof CallsQueryReqSchema>>): Promise<Reply> {
  checkServed(d, ctx.body)
  // All at once means all in memory: bounded. /calls/stream_query has no such bound.
  const limit = Math.min(ctx.body.limit ?? Infinity, d.maxQueryRows + 1)
  const finish = finisher(d.x, ctx.body)
  const calls = await d.store.query(ctx.body.project_id, { ...(await withExpand(d.x, await withFeedback(d, ctx.body))), limit })
  if (calls.length > d.maxQueryRows) {
    throw new DomainError(413, `More than ${d.maxQueryRows} calls match: page with limit and offset, or use /calls/stream_query`)
  }
  const cost = await costed(d, ctx.body.project_id, ctx.body.include_costs)
  const page = calls.map((c) => pickColumns(cost(c), ctx.body.columns))
  return { body: { calls: finish ? await finish(page) : page } }
}

async function queryStats(d: Deps, ctx: Ctx<Static<typeof CallsQueryStatsReqSchema>>): Promise<Reply> {
  const b = await withExpand(d.x, await withFeedback(d, ctx.body))
  if (b.limit !== undefined && b.limit !== null && b.limit < 1) throw new DomainError(400, 'limit must be at least 1')
  const query = b.query
  // Counts the rollups can answer (no query, filter on op, root, user, run) are read from them.
  const fast = query || !d.stats ? null : await d.stats.count(b.project_id, b.filter)
  const count =
    fast !== null ? Math.min(fast, b.limit ?? Infinity) : await d.store.count(b.project_id, { filter: b.filter, query, limit: b.limit })
  const body: Record<string, unknown> = { count, has_more: false }
  if (b.include_total_storage_size) {
    if (!d.store.traceStorageBytes) throw notServed(d, 'include_total_storage_size')
    body.total_storage_size_bytes = await d.store.traceStorageBytes(b.project_id, { filter: b.filter, query, limit: b.limit })
  }
  return { body }
}

const tags = ['Calls']
const trace = { family: 'trace', auth: 'key', tags } as const

/** The deps with what calls-expand.ts reads (made once, not per request). */
type Deps = CallsDeps & { x: ExpandDeps }

export function callRoutes(deps: CallsDeps): RouteDef[] {
  const d: Deps = { ...deps, x: expandDeps(deps) }
  return [...callWriteRoutes(d), ...queryRoutes(d)]
}

/** Writing and reading single calls. */
function callWriteRoutes(d: CallsDeps): RouteDef[] {
  const rawBody = true
  const project = bodyProject
  return [
    route({
      ...trace,
      method: 'POST',
      path: '/call/start',
      summary: 'Start a call',
      body: CallStartReqSchema,
      response: { description: 'The call and trace ids (generated when not sent)', schema: CallStartResSchema },
      rawBody,
      handler: ingest(d, 'start'),
    }),
    route({
      ...trace,
      method: 'POST',
      path: '/call/end',
      summary: 'End a call',
      body: CallEndReqSchema,
      rawBody,
      handler: ingest(d, 'end'),
    }),
    route({
      ...trace,
      method: 'POST',
      path: '/call/upsert_batch',
      summary: 'Starts and ends in one batch (the TypeScript SDK write path); bad items are reported in place',
      body: CallCreateBatchReqSchema,
      response: { description: 'One result per item, in order', schema: CallCreateBatchResSchema },
      rawBody,
      handler: ingest(d, 'batch'),
    }),
    route({
      ...trace,
      method: 'POST',
      path: '/call/read',
      summary: 'Read one call (null when unknown or deleted)',
      body: CallReadReqSchema,
      project,
      handler: (ctx) => readCall(d, ctx),
    }),
    route({
      ...trace,
      method: 'POST',
      path: '/call/update',
      summary: "Update a call's display name (an empty string removes it)",
      body: CallUpdateReqSchema,
      project,
      handler: (ctx) => updateCall(d, ctx),
    }),
  ]
}

/** Deleting and querying calls. */
function queryRoutes(d: Deps): RouteDef[] {
  const project = bodyProject
  return [
    route({
      ...trace,
      method: 'POST',
      path: '/calls/delete',
      summary: 'Delete calls and all their descendants',
      body: CallsDeleteReqSchema,
      response: { description: 'How many calls were deleted', schema: CallsDeleteResSchema },
      project,
      handler: (ctx) => deleteCalls(d, ctx),
    }),
    route({
      ...trace,
      method: 'POST',
      path: '/calls/stream_query',
      summary: 'Query calls; one JSON call per line (or Arrow IPC with `Accept: application/vnd.apache.arrow.stream`)',
      body: CallsQueryReqSchema,
      response: { description: 'JSON lines', contentType: 'application/jsonl' },
      project,
      handler: (ctx) => streamQuery(d, ctx),
    }),
    route({
      ...trace,
      method: 'POST',
      path: '/calls/query',
      summary: 'Query calls; all at once',
      body: CallsQueryReqSchema,
      project,
      handler: (ctx) => queryCalls(d, ctx),
    }),
    route({
      ...trace,
      method: 'POST',
      path: '/calls/query_stats',
      summary: 'Count calls matching a filter and query',
      body: CallsQueryStatsReqSchema,
      response: { description: 'Count', schema: CallsQueryStatsResSchema },
      project,
      handler: (ctx) => queryStats(d, ctx),
    }),
  ]
}
