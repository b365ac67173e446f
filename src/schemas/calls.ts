import { Type, type Static } from '@sinclair/typebox'
import { CallFilterSchema, Nullable, ProjectIdSchema, StringEnum, timestamp, timestampIn, TimestampSchema } from './common.js'

/** Upstream's full list; `/calls/stats` implements only sum, avg, min, max and count (others: 400). */
export const AGGREGATIONS = ['sum', 'avg', 'min', 'max', 'count', 'count_true', 'count_false'] as const
export const USAGE_METRICS = [
  'input_tokens',
  'output_tokens',
  'total_tokens',
  'cache_read_input_tokens',
  'cache_creation_input_tokens',
  'input_cost',
  'output_cost',
  'total_cost',
] as const
export const CALL_METRICS = ['latency_ms', 'call_count', 'error_count'] as const

export const AggregationSchema = StringEnum(AGGREGATIONS)
export type Aggregation = Static<typeof AggregationSchema>

const metricSpec = <M extends typeof USAGE_METRICS | typeof CALL_METRICS>(metrics: M, what: string) =>
  Type.Object({
    metric: StringEnum(metrics, { description: what }),
    aggregations: Type.Optional(
      Type.Array(AggregationSchema, {
        default: ['sum'],
        description: 'Aggregations to apply; `[sum]` when this and percentiles are both empty',
      }),
    ),
    percentiles: Type.Optional(
      Type.Array(Type.Number(), {
        default: [],
        maxItems: 32,
        description: 'Percentiles (0-100) to compute, e.g. [50, 95, 99]; others answer 400',
      }),
    ),
  })

export const UsageMetricSpecSchema = metricSpec(USAGE_METRICS, 'Usage metric; token counts are normalised across providers')
export type UsageMetricSpec = Static<typeof UsageMetricSpecSchema>

export const CallMetricSpecSchema = metricSpec(CALL_METRICS, 'Call metric')
export type CallMetricSpec = Static<typeof CallMetricSpecSchema>

/** POST /calls/stats. The 31-day cap on `end - start` needs both values, so the handler checks it. */
export const CallStatsReqSchema = Type.Object(
  {
    project_id: ProjectIdSchema,
    start: timestampIn({ description: 'Inclusive start, ISO 8601 (UTC when no offset is given)' }),
    end: Type.Optional(Nullable(timestampIn(), { description: 'Exclusive end, ISO 8601; defaults to now' })),
    granularity: Type.Optional(
      Nullable(Type.Integer({ minimum: 1 }), {
        description:
          'Bucket size in seconds; auto-selected from the range when omitted, enlarged if it would give more than 10,000 buckets',
      }),
    ),
    usage_metrics: Type.Optional(
      Nullable(Type.Array(UsageMetricSpecSchema), { description: 'Usage metrics (tokens, cost); buckets grouped by timestamp and model' }),
    ),
    call_metrics: Type.Optional(
      Nullable(Type.Array(CallMetricSpecSchema), { description: 'Call metrics (latency, counts); buckets grouped by timestamp' }),
    ),
    filter: Type.Optional(Nullable(CallFilterSchema)),
    timezone: Type.Optional(
      Type.String({
        minLength: 1,
        maxLength: 64,
        default: 'UTC',
        description: 'IANA timezone for bucket alignment, e.g. `America/New_York`',
      }),
    ),
  },
  { additionalProperties: false, description: 'Aggregated call statistics over a time range' },
)
export type CallStatsReq = Static<typeof CallStatsReqSchema>

/** Metric columns are named `{agg}_{metric}` or `p{percentile}_{metric}`; min/max/percentiles of empty buckets are null. */
const metricColumns = Nullable(Type.Number())

export const UsageBucketSchema = Type.Object(
  {
    timestamp: TimestampSchema,
    model: Type.String(),
    count: Type.Integer({ description: 'Number of (call, model) pairs aggregated' }),
  },
  {
    additionalProperties: metricColumns,
    description: "One bucket per (timestamp, model) with the requested aggregates, e.g. 'sum_input_tokens'",
  },
)
export type UsageBucket = Static<typeof UsageBucketSchema>

export const CallBucketSchema = Type.Object(
  {
    timestamp: TimestampSchema,
    count: Type.Integer({ description: 'Number of calls aggregated' }),
  },
  { additionalProperties: metricColumns, description: "One bucket per timestamp with the requested aggregates, e.g. 'p95_latency_ms'" },
)
export type CallBucket = Static<typeof CallBucketSchema>

export const CallStatsResSchema = Type.Object({
  start: timestamp({ description: 'Resolved start (UTC)' }),
  end: timestamp({ description: 'Resolved end (UTC)' }),
  granularity: Type.Integer({ description: 'Bucket size used, in seconds' }),
  timezone: Type.String({ description: 'Timezone used for bucket alignment' }),
  usage_buckets: Type.Array(UsageBucketSchema, {
    description: 'Every bucket of the range times every model seen, ordered by (timestamp, model)',
  }),
  call_buckets: Type.Array(CallBucketSchema, { description: 'Every bucket of the range, ordered by timestamp' }),
})
export type CallStatsRes = Static<typeof CallStatsResSchema>

/** Operators allowed at the top of `$expr` (upstream `Query`); their operands are not checked here. */
export const QUERY_OPERATORS = ['$and', '$or', '$not', '$eq', '$gt', '$gte', '$lt', '$lte', '$in', '$contains'] as const

export const QueryOperationSchema = Type.Record(Type.String(), Type.Unknown(), {
  minProperties: 1,
  maxProperties: 1,
  propertyNames: { enum: [...QUERY_OPERATORS] },
  description: 'One operation, e.g. `{"$eq": [{"$getField": "op_name"}, {"$literal": "x"}]}`',
})
export type QueryOperation = Static<typeof QueryOperationSchema>

export const QuerySchema = Type.Object(
  { $expr: QueryOperationSchema },
  { additionalProperties: false, description: 'Filter expression (Mongo-style subset)' },
)
export type Query = Static<typeof QuerySchema>

/** POST /calls/query_stats */
export const CallsQueryStatsReqSchema = Type.Object(
  {
    project_id: ProjectIdSchema,
    filter: Type.Optional(Nullable(CallFilterSchema)),
    query: Type.Optional(Nullable(QuerySchema)),
    // Upstream rejects limit < 1 with a 400 (ValueError), checked by the handler.
    limit: Type.Optional(
      Nullable(Type.Integer({ maximum: Number.MAX_SAFE_INTEGER }), { description: 'Stop counting at this many calls (at least 1)' }),
    ),
    include_total_storage_size: Type.Optional(
      Nullable(Type.Boolean(), { default: false, description: 'Also sum the storage size of the matching traces' }),
    ),
    expand_columns: Type.Optional(
      Nullable(Type.Array(Type.String()), {
        description: 'Columns holding refs to expand during filtering, as dotted paths such as `inputs.<name>.<name>`',
      }),
    ),
  },
  { additionalProperties: false, description: 'Count calls matching a filter' },
)
export type CallsQueryStatsReq = Static<typeof CallsQueryStatsReqSchema>

export const CallsQueryStatsResSchema = Type.Object({
  count: Type.Integer({ minimum: 0 }),
  has_more: Type.Optional(Type.Boolean({ default: false })),
  total_storage_size_bytes: Type.Optional(Nullable(Type.Integer(), { description: 'With include_total_storage_size' })),
})
export type CallsQueryStatsRes = Static<typeof CallsQueryStatsResSchema>

/** POST /calls/usage */
export const CallsUsageReqSchema = Type.Object(
  {
    project_id: ProjectIdSchema,
    call_ids: Type.Array(Type.String({ maxLength: 128 }), {
      maxItems: 1000,
      description: 'Root call ids; each result key corresponds to one of them',
    }),
    include_costs: Type.Optional(Type.Boolean({ default: false, description: 'Add cost calculations' })),
    // limit < 1 answers 400 (upstream's InvalidRequest), checked by the handler.
    limit: Type.Optional(
      Type.Integer({
        default: 10000,
        maximum: Number.MAX_SAFE_INTEGER,
        description: 'Maximum number of calls processed across all traces (a memory safety limit); a single larger trace answers 413',
      }),
    ),
  },
  { additionalProperties: false, description: 'Usage of root calls, each including all its descendants' },
)
export type CallsUsageReq = Static<typeof CallsUsageReqSchema>

const cost = Type.Optional(Nullable(Type.Number()))

export const LLMAggregatedUsageSchema = Type.Object({
  requests: Type.Integer(),
  prompt_tokens: Type.Integer(),
  completion_tokens: Type.Integer(),
  total_tokens: Type.Integer(),
  cache_read_input_tokens: Type.Integer(),
  cache_creation_input_tokens: Type.Integer(),
  prompt_tokens_total_cost: cost,
  completion_tokens_total_cost: cost,
  cache_read_input_tokens_total_cost: cost,
  cache_creation_input_tokens_total_cost: cost,
})
export type LLMAggregatedUsage = Static<typeof LLMAggregatedUsageSchema>

export const CallsUsageResSchema = Type.Object({
  call_usage: Type.Record(Type.String(), Type.Record(Type.String(), LLMAggregatedUsageSchema), {
    description: 'Root call id → model name → usage; an unknown id maps to {}',
  }),
  unfinished_call_ids: Type.Optional(Type.Array(Type.String(), { description: 'Calls of the fetched traces that have not ended' })),
})
export type CallsUsageRes = Static<typeof CallsUsageResSchema>

/** POST /trace/usage */
export const TraceUsageReqSchema = Type.Object(
  {
    project_id: ProjectIdSchema,
    filter: Type.Optional(Nullable(CallFilterSchema)),
    query: Type.Optional(Nullable(QuerySchema)),
    include_costs: Type.Optional(Type.Boolean({ default: false, description: 'Add cost calculations' })),
    limit: Type.Optional(
      Type.Integer({ default: 10000, maximum: Number.MAX_SAFE_INTEGER, description: 'Most calls fetched (at least 1)' }),
    ),
  },
  { additionalProperties: false, description: 'Usage of every matching call, each including its fetched descendants' },
)
export type TraceUsageReq = Static<typeof TraceUsageReqSchema>
