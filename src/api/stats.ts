import { bodyProject, route, type RouteDef } from './route.js'
import { ARROW_STREAM, acceptsArrow } from '../calls/arrow/media.js'
import { CallStatsReqSchema, CallStatsResSchema, CallsUsageReqSchema, CallsUsageResSchema, TraceUsageReqSchema } from '../schemas/calls.js'
import { CostCreateReqSchema, CostCreateResSchema, CostPurgeReqSchema, CostQueryReqSchema, CostQueryResSchema } from '../schemas/costs.js'
import type { PriceBook, StatsEngine, UsageEngine } from '../stats/backend.js'

const base = { family: 'trace' as const, auth: 'key' as const, project: bodyProject }

/** Statistics, usage rollups and prices: the dashboard's read path over calls, on whichever storage backend. */
export function statsRoutes(stats: StatsEngine, usage: UsageEngine, prices: PriceBook): RouteDef[] {
  return [
    callStatsRoute(stats),
    callsUsageRoute(usage),
    traceUsageRoute(usage),
    costCreateRoute(prices),
    costQueryRoute(prices),
    costPurgeRoute(prices),
  ]
}

function callStatsRoute(stats: StatsEngine): RouteDef {
  return route({
    ...base,
    method: 'POST',
    path: '/calls/stats',
    tags: ['Calls'],
    summary: 'Time-bucketed usage and call statistics',
    description:
      'Buckets aligned in `timezone`; every bucket present; usage buckets for every model seen in the range. With `Accept: application/vnd.apache.arrow.stream`, one Arrow table (a row per bucket, `kind` call or usage).',
    body: CallStatsReqSchema,
    response: { description: 'Buckets', schema: CallStatsResSchema },
    handler: async (ctx) => {
      const { result, path } = await stats.run(ctx.body)
      const headers = { 'x-weft-stats-path': path }
      if (acceptsArrow(ctx.headers.accept)) {
        const [{ tableToIPC }, { statsTable }] = await Promise.all([import('apache-arrow'), import('../stats/arrow.js')])
        return { raw: Buffer.from(tableToIPC(statsTable(result), 'stream')), contentType: ARROW_STREAM, headers }
      }
      return { body: result, headers }
    },
  })
}

function callsUsageRoute(usage: UsageEngine): RouteDef {
  return route({
    ...base,
    method: 'POST',
    path: '/calls/usage',
    tags: ['Calls'],
    summary: 'Usage of root calls including all their descendants',
    body: CallsUsageReqSchema,
    response: { description: 'Usage per root call id', schema: CallsUsageResSchema },
    handler: async (ctx) => ({
      body: await usage.calls(ctx.body.project_id, ctx.body.call_ids, ctx.body.include_costs ?? false, ctx.body.limit ?? 10_000),
    }),
  })
}

function traceUsageRoute(usage: UsageEngine): RouteDef {
  return route({
    ...base,
    method: 'POST',
    path: '/trace/usage',
    tags: ['Calls'],
    summary: 'Usage of every matching call including its descendants',
    body: TraceUsageReqSchema,
    response: { description: 'Usage per call id', schema: CallsUsageResSchema },
    handler: async (ctx) => {
      const b = ctx.body
      return { body: await usage.traces(b.project_id, b.filter, b.query, b.include_costs ?? false, b.limit ?? 10_000) }
    },
  })
}

function costCreateRoute(prices: PriceBook): RouteDef {
  return route({
    ...base,
    method: 'POST',
    path: '/cost/create',
    tags: ['Costs'],
    summary: 'Add prices for models in a project (they win over the default price book from their effective date)',
    body: CostCreateReqSchema,
    response: { description: 'The new price ids', schema: CostCreateResSchema },
    handler: async (ctx) => ({ body: { ids: await prices.create(ctx.body.project_id, ctx.principal!.userId, ctx.body.costs) } }),
  })
}

function costQueryRoute(prices: PriceBook): RouteDef {
  return route({
    ...base,
    method: 'POST',
    path: '/cost/query',
    tags: ['Costs'],
    summary: "Query a project's prices",
    body: CostQueryReqSchema,
    response: { description: 'Prices', schema: CostQueryResSchema },
    handler: async (ctx) => ({ body: { results: await prices.query(ctx.body.project_id, ctx.body) } }),
  })
}

function costPurgeRoute(prices: PriceBook): RouteDef {
  return route({
    ...base,
    method: 'POST',
    path: '/cost/purge',
    tags: ['Costs'],
    summary: 'Remove project prices by id',
    body: CostPurgeReqSchema,
    handler: async (ctx) => {
      await prices.purge(ctx.body.project_id, ctx.body.query)
      return { body: {} }
    },
  })
}
