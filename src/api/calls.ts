import { DomainError } from '../core/errors.js'
import { bodyProject, route, type Ctx, type RouteDef } from './route.js'
import type { CallRecord, CallStore } from '../calls/store.js'
import type { IngestPool } from '../calls/ingest-pool.js'
import type { IngestTask } from '../calls/prepare.js'
import { withCosts, type Prices } from '../catalog/prices.js'
import type { CallStats } from '../stats/engine.js'
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
  CallsQueryReqSchema,
} from '../schemas/calls-write.js'
import { Type } from '@sinclair/typebox'

/** Columns every returned call keeps, whatever `columns` asks for (reference §3.5). */
const REQUIRED_COLUMNS = ['id', 'trace_id', 'project_id', 'op_name', 'started_at']

function pickColumns(call: CallRecord, columns: string[] | null | undefined): CallRecord {
  if (!columns || columns.length === 0) return call
  const keep = new Set([...REQUIRED_COLUMNS, ...columns.map((c) => c.split('.')[0]!)])
  // The derived summary needs these (reference §3.5).
  if (keep.has('summary')) for (const c of ['ended_at', 'exception', 'display_name']) keep.add(c)
  return Object.fromEntries(Object.entries(call).filter(([k]) => keep.has(k)))
}

export function callRoutes(store: CallStore, pool: IngestPool, maxQueryRows: number, prices: Prices, stats: CallStats): RouteDef[] {
  const tags = ['Calls']
  /** With include_costs, each call gains summary.weave.costs from the project's prices. */
  const costed = async (project: string, include: boolean | null | undefined): Promise<(c: CallRecord) => CallRecord> => {
    if (!include) return (c) => c
    const rows = await prices.forProject(project)
    return (c) => withCosts(c, rows)
  }
  /** The body is parsed, validated and encoded in the worker pool; here it is only logged and added. */
  const ingest = (route: IngestTask['route']) => async (ctx: Ctx) => {
    const p = ctx.principal!
    const { record, count, replyJson } = await pool.prepare({
      route,
      body: ctx.rawBody ?? Buffer.alloc(0),
      userId: p.userId,
      entities: p.entities,
    })
    await store.ingestRecord(record, count)
    return { raw: replyJson!, contentType: 'application/json' }
  }
  return [
    route({
      method: 'POST',
      path: '/call/start',
      family: 'trace',
      auth: 'key',
      tags,
      summary: 'Start a call',
      body: CallStartReqSchema,
      response: { description: 'The call and trace ids (generated when not sent)', schema: CallStartResSchema },
      rawBody: true,
      handler: ingest('start'),
    }),
    route({
      method: 'POST',
      path: '/call/end',
      family: 'trace',
      auth: 'key',
      tags,
      summary: 'End a call',
      body: CallEndReqSchema,
      rawBody: true,
      handler: ingest('end'),
    }),
    route({
      method: 'POST',
      path: '/call/upsert_batch',
      family: 'trace',
      auth: 'key',
      tags,
      summary: 'Starts and ends in one batch (the TypeScript SDK write path); bad items are reported in place',
      body: CallCreateBatchReqSchema,
      response: { description: 'One result per item, in order', schema: CallCreateBatchResSchema },
      rawBody: true,
      handler: ingest('batch'),
    }),
    route({
      method: 'POST',
      path: '/call/read',
      family: 'trace',
      auth: 'key',
      tags,
      summary: 'Read one call (null when unknown or deleted)',
      body: CallReadReqSchema,
      project: bodyProject,
      handler: async (ctx) => {
        const call = await store.read(ctx.body.project_id, ctx.body.id)
        const cost = await costed(ctx.body.project_id, ctx.body.include_costs)
        return { body: { call: call && cost(call) } }
      },
    }),
    route({
      method: 'POST',
      path: '/call/update',
      family: 'trace',
      auth: 'key',
      tags,
      summary: "Update a call's display name (an empty string removes it)",
      body: CallUpdateReqSchema,
      project: bodyProject,
      handler: async (ctx) => {
        const b = ctx.body
        if (b.display_name === undefined || b.display_name === null)
          throw new DomainError(400, 'One of [display_name] is required for call update')
        const id = b.call_id
        if (!(await store.read(b.project_id, id))) throw new DomainError(404, `Call ${JSON.stringify(id)} not found`)
        await store.ingest([{ kind: 'update', project_id: b.project_id, id, display_name: b.display_name }])
        return { body: {} }
      },
    }),
    route({
      method: 'POST',
      path: '/calls/delete',
      family: 'trace',
      auth: 'key',
      tags,
      summary: 'Delete calls and all their descendants',
      body: CallsDeleteReqSchema,
      response: { description: 'How many calls were deleted', schema: Type.Object({ num_deleted: Type.Integer() }) },
      project: bodyProject,
      handler: async (ctx) => {
        const { project_id, call_ids } = ctx.body
        if (call_ids.length > 1000) throw new DomainError(413, 'Request too large: at most 1000 call ids per delete')
        const ids = await store.withDescendants(project_id, call_ids)
        const now = (BigInt(Date.now()) * 1000n).toString()
        await store.ingest(ids.map((id) => ({ kind: 'delete' as const, project_id, id, deleted_us: now })))
        return { body: { num_deleted: ids.length } }
      },
    }),
    route({
      method: 'POST',
      path: '/calls/stream_query',
      family: 'trace',
      auth: 'key',
      tags,
      summary: 'Query calls; one JSON call per line',
      body: CallsQueryReqSchema,
      response: { description: 'JSON lines', contentType: 'application/jsonl' },
      project: bodyProject,
      handler: async (ctx) => {
        const chunks = await store.stream(ctx.body.project_id, ctx.body)
        const columns = ctx.body.columns
        const cost = await costed(ctx.body.project_id, ctx.body.include_costs)
        async function* lines() {
          for await (const calls of chunks) yield calls.map((c) => JSON.stringify(pickColumns(cost(c), columns)) + '\n').join('')
        }
        return { contentType: 'application/jsonl', stream: lines() }
      },
    }),
    route({
      method: 'POST',
      path: '/calls/query',
      family: 'trace',
      auth: 'key',
      tags,
      summary: 'Query calls; all at once',
      body: CallsQueryReqSchema,
      project: bodyProject,
      handler: async (ctx) => {
        // All at once means all in memory: bounded. /calls/stream_query has no such bound.
        const limit = Math.min(ctx.body.limit ?? Infinity, maxQueryRows + 1)
        const calls = await store.query(ctx.body.project_id, { ...ctx.body, limit })
        if (calls.length > maxQueryRows) {
          throw new DomainError(413, `More than ${maxQueryRows} calls match: page with limit and offset, or use /calls/stream_query`)
        }
        const cost = await costed(ctx.body.project_id, ctx.body.include_costs)
        return { body: { calls: calls.map((c) => pickColumns(cost(c), ctx.body.columns)) } }
      },
    }),
    route({
      method: 'POST',
      path: '/calls/query_stats',
      family: 'trace',
      auth: 'key',
      tags,
      summary: 'Count calls matching a filter and query',
      body: CallsQueryStatsReqSchema,
      response: { description: 'Count', schema: CallsQueryStatsResSchema },
      project: bodyProject,
      handler: async (ctx) => {
        const b = ctx.body
        if (b.limit !== undefined && b.limit !== null && b.limit < 1) throw new DomainError(400, 'limit must be at least 1')
        const query = b.query as { $expr: unknown } | null | undefined
        // Counts the rollups can answer (no query, filter on op, root, user, run) are read from them.
        const fast = query ? null : await stats.count(b.project_id, b.filter)
        const count =
          fast !== null ? Math.min(fast, b.limit ?? Infinity) : await store.count(b.project_id, { filter: b.filter, query, limit: b.limit })
        const body: Record<string, unknown> = { count, has_more: false }
        if (b.include_total_storage_size)
          body.total_storage_size_bytes = await store.traceStorageBytes(b.project_id, { filter: b.filter, query, limit: b.limit })
        return { body }
      },
    }),
  ]
}
