import t, { type Test } from 'tap'
import { Ajv } from 'ajv'
import formatsModule from 'ajv-formats'
import type { TSchema } from '@sinclair/typebox'
import * as common from '../src/schemas/common.js'
import * as calls from '../src/schemas/calls.js'
import * as objects from '../src/schemas/objects.js'
import * as v2 from '../src/schemas/v2.js'
import * as chat from '../src/schemas/chat.js'

// ajv-formats is CommonJS; under NodeNext its function is on `.default`.
const addFormats = (formatsModule as unknown as { default: (ajv: Ajv) => Ajv }).default

const plainAjv = addFormats(new Ajv({ allErrors: true, strict: false }))
// The server's settings: bodies get defaults filled in; query strings are also coerced.
const bodyAjv = addFormats(new Ajv({ allErrors: true, strict: false, useDefaults: true }))
const queryAjv = addFormats(new Ajv({ allErrors: true, strict: false, useDefaults: true, coerceTypes: 'array' }))

const modules = { common, calls, objects, v2, chat } as const

t.test('every exported schema compiles and is plain JSON Schema', async (t) => {
  let n = 0
  for (const [file, mod] of Object.entries(modules)) {
    for (const [name, value] of Object.entries(mod)) {
      if (!name.endsWith('Schema')) continue
      n++
      const schema = value as TSchema
      t.doesNotThrow(() => plainAjv.compile(schema), `${file}.${name} compiles`)
      // What the OpenAPI document serves: the JSON form must validate the same way.
      const json = JSON.parse(JSON.stringify(schema))
      t.doesNotThrow(() => plainAjv.compile(json), `${file}.${name} compiles from its JSON form`)
    }
  }
  t.ok(n >= 40, `${n} schemas`)
})

/** Validates a copy of `value`; returns the (possibly defaulted/coerced) copy and the error list. */
function check(schema: TSchema, value: unknown, ajv: Ajv = bodyAjv) {
  const data = structuredClone(value)
  const fn = ajv.compile(schema)
  const ok = fn(data) as boolean
  return { ok, data, errors: fn.errors ?? [] }
}

function passes(t: Tap, schema: TSchema, value: unknown, what: string, ajv?: Ajv) {
  const r = check(schema, value, ajv)
  t.ok(r.ok, what, r.ok ? {} : { errors: r.errors })
  return r.data as any
}
function fails(t: Tap, schema: TSchema, value: unknown, what: string, ajv?: Ajv) {
  const r = check(schema, value, ajv)
  t.notOk(r.ok, what)
  return r.errors
}
type Tap = Test

t.test('project ids', async (t) => {
  const s = common.ProjectIdSchema
  for (const ok of ['e/p', 'my-team/my_project.v2', 'ünï/cødé']) passes(t, s, ok, ok)
  for (const bad of ['', 'noslash', 'a/b/c', '/p', 'e/', 'a /b', 'a/b\n', 'a/\tb', 'a/b\u0085', 'x'.repeat(200) + '/' + 'y'.repeat(60)]) {
    fails(t, s, bad, JSON.stringify(bad))
  }
})

t.test('call filter', async (t) => {
  const s = common.CallFilterSchema
  passes(t, s, {}, 'empty')
  passes(t, s, { wb_user_ids: ['u1'], wb_run_ids: ['e/p:run'] }, 'upstream wb_* aliases')
  passes(t, s, { svc_user_ids: ['u1'], svc_run_ids: ['r'] }, 'spec svc_* names')
  passes(t, s, { op_names: null, trace_roots_only: null, call_ids: null }, 'nulls as the Python SDK sends them')
  passes(t, s, { op_names: ['weave:///e/p/op/x:*'], trace_roots_only: true, thread_ids: [], turn_ids: ['t'] }, 'spec members')
  fails(t, s, { user_ids: ['u'] }, 'unknown member')
  fails(t, s, { op_names: 'x' }, 'a string where a list belongs')
  fails(t, s, { trace_roots_only: 'yes' }, 'non-boolean')
})

t.test('POST /calls/stats', async (t) => {
  const s = calls.CallStatsReqSchema
  const full = {
    project_id: 'entity/project',
    start: '2025-06-01T00:00:00Z',
    end: '2025-06-02T00:00:00.123456+00:00',
    granularity: 3600,
    usage_metrics: [
      { metric: 'input_tokens', aggregations: ['sum', 'avg'], percentiles: [] },
      { metric: 'total_cost', aggregations: ['sum'] },
    ],
    call_metrics: [
      { metric: 'latency_ms', aggregations: ['avg', 'max'], percentiles: [50, 95, 99.9] },
      { metric: 'call_count' },
      { metric: 'error_count', aggregations: ['sum'] },
    ],
    filter: { op_names: ['weave:///entity/project/op/my_op:abc'], trace_roots_only: true, wb_user_ids: ['u'] },
    timezone: 'America/New_York',
  }
  passes(t, s, full, 'every member')
  const d = passes(t, s, { project_id: 'e/p', start: '2025-06-01T00:00:00Z' }, 'only the required members')
  t.equal(d.timezone, 'UTC', 'timezone defaults to UTC')
  passes(
    t,
    s,
    {
      project_id: 'e/p',
      start: '2025-06-01T00:00:00',
      end: null,
      granularity: null,
      usage_metrics: null,
      call_metrics: null,
      filter: null,
      timezone: 'UTC',
    },
    'Python SDK body: naive datetime and explicit nulls',
  )
  const m = passes(
    t,
    s,
    { project_id: 'e/p', start: '2025-06-01T00:00:00Z', call_metrics: [{ metric: 'latency_ms' }] },
    'metric spec without aggregations',
  )
  // ajv fills no defaults under anyOf (the nullable list), so the handler must apply `[sum]` itself.
  t.same(m.call_metrics[0], { metric: 'latency_ms' }, 'defaults inside nullable members are documentation only')
  passes(t, s, { ...full, call_metrics: [{ metric: 'latency_ms', note: 'x' }] }, 'nested metric spec ignores extra keys')

  const extra = fails(t, s, { ...full, color: 'red' }, 'unknown top-level key')
  t.match(extra, [{ keyword: 'additionalProperties', params: { additionalProperty: 'color' } }])
  fails(t, s, { project_id: 'e/p' }, 'start missing')
  fails(t, s, { start: '2025-06-01T00:00:00Z' }, 'project_id missing')
  fails(t, s, { ...full, start: 'yesterday' }, 'start not a timestamp')
  fails(t, s, { ...full, granularity: 0 }, 'granularity 0')
  fails(t, s, { ...full, granularity: 1.5 }, 'granularity not an integer')
  fails(t, s, { ...full, usage_metrics: [{ metric: 'latency_ms' }] }, 'call metric in usage_metrics')
  fails(t, s, { ...full, call_metrics: [{ metric: 'latency_ms', aggregations: ['median'] }] }, 'unknown aggregation')
  // Out-of-range percentiles pass the schema: the handler answers them 400, as upstream's ValueError (test/stats).
  passes(t, s, { ...full, call_metrics: [{ metric: 'latency_ms', percentiles: [101] }] }, "percentile above 100 is the handler's to refuse")
  fails(t, s, { ...full, filter: { wb_user_id: ['u'] } }, 'unknown filter member')
  fails(t, s, { ...full, project_id: 'project' }, 'project id without entity')
})

t.test('POST /calls/query_stats', async (t) => {
  const s = calls.CallsQueryStatsReqSchema
  const spec = {
    project_id: 'e/p',
    filter: { trace_roots_only: true },
    query: { $expr: { $and: [{ $literal: 'x' }] } },
    limit: 1,
    include_total_storage_size: true,
    expand_columns: ['inputs.self.message', 'inputs.model.prompt'],
  }
  passes(t, s, spec, 'the spec example')
  const d = passes(t, s, { project_id: 'e/p' }, 'only project_id')
  t.equal(d.include_total_storage_size, false, 'default')
  passes(
    t,
    s,
    {
      project_id: 'e/p',
      query: {
        $expr: {
          $and: [
            { $eq: [{ $getField: 'op_name' }, { $literal: 'weave:///e/p/op/x:1' }] },
            { $gt: [{ $convert: { input: { $getField: 'inputs.n' }, to: 'double' } }, { $literal: 2 }] },
          ],
        },
      },
      filter: null,
      limit: null,
      expand_columns: null,
    },
    'nested operations and nulls',
  )
  fails(t, s, { ...spec, query: { $expr: { $nope: [] } } }, 'unknown top-level operator')
  fails(t, s, { ...spec, query: { $expr: { $and: [], $or: [] } } }, 'two operators in one operation')
  fails(t, s, { ...spec, query: { $expr: {} } }, 'empty operation')
  fails(t, s, { ...spec, query: { $expr: { $and: [] }, extra: 1 } }, 'query with a second key')
  fails(t, s, { ...spec, query: { $and: [] } }, 'query without $expr')
  passes(t, s, { ...spec, limit: 0 }, "limit 0 is the handler's to refuse (400)")
  fails(t, s, { ...spec, sort_by: [] }, 'unknown top-level key')
})

t.test('POST /calls/usage', async (t) => {
  const s = calls.CallsUsageReqSchema
  const d = passes(t, s, { project_id: 'e/p', call_ids: ['019000000000-root'] }, 'minimal')
  t.equal(d.limit, 10000)
  t.equal(d.include_costs, false)
  passes(t, s, { project_id: 'e/p', call_ids: [], include_costs: true, limit: 1 }, 'every member')
  fails(t, s, { project_id: 'e/p' }, 'call_ids missing')
  passes(t, s, { project_id: 'e/p', call_ids: ['a'], limit: 0 }, "limit 0 is the handler's to refuse (400)")
  fails(t, s, { project_id: 'e/p', call_ids: ['a'], filter: {} }, 'unknown top-level key')
  passes(
    t,
    calls.CallsUsageResSchema,
    {
      call_usage: {
        root: {
          'gpt-4o': {
            requests: 2,
            prompt_tokens: 30,
            completion_tokens: 10,
            total_tokens: 40,
            cache_read_input_tokens: 0,
            cache_creation_input_tokens: 0,
          },
        },
        unknown: {},
      },
      unfinished_call_ids: [],
    },
    'a response',
  )
})

t.test('POST /objs/query', async (t) => {
  const s = objects.ObjQueryReqSchema
  const spec = {
    project_id: 'user/project',
    filter: { latest_only: true, object_ids: ['my_favorite_model'] },
    limit: 100,
    offset: 0,
    sort_by: [{ field: 'created_at', direction: 'desc' }],
    metadata_only: false,
    include_storage_size: true,
  }
  passes(t, s, spec, 'the spec example')
  passes(
    t,
    s,
    {
      project_id: 'e/p',
      filter: {
        base_object_classes: ['Dataset'],
        exclude_base_object_classes: null,
        leaf_object_classes: null,
        object_ids: null,
        is_op: false,
        latest_only: null,
        tags: null,
        aliases: null,
      },
      limit: null,
      offset: null,
      sort_by: null,
      metadata_only: false,
      include_storage_size: false,
      include_tags_and_aliases: false,
    },
    'newer Python SDK body',
  )
  fails(t, s, { ...spec, sort_by: [{ field: 'version_index', direction: 'asc' }] }, 'sort field outside the two')
  fails(t, s, { ...spec, sort_by: [{ field: 'created_at', direction: 'up' }] }, 'unknown direction')
  fails(t, s, { ...spec, sort_by: [{ field: 'created_at' }] }, 'direction missing')
  fails(t, s, { ...spec, offset: -1 }, 'negative offset')
  fails(t, s, { ...spec, limit: -1 }, 'negative limit')
  fails(t, s, { ...spec, digest: 'x' }, 'unknown top-level key')
  passes(
    t,
    objects.ObjQueryResSchema,
    {
      objs: [
        {
          project_id: 'e/p',
          object_id: 'ds',
          created_at: '2025-06-01T00:00:00.000Z',
          digest: 'abc',
          version_index: 0,
          is_latest: 1,
          kind: 'object',
          base_object_class: 'Dataset',
          leaf_object_class: 'Dataset',
          val: {},
          deleted_at: null,
          svc_user_id: null,
        },
      ],
    },
    'a response',
  )
})

t.test('POST /v2/{entity}/{project}/datasets', async (t) => {
  const s = v2.DatasetCreateReqSchema
  passes(
    t,
    s,
    {
      name: 'My Dataset',
      description: 'd',
      rows: [
        { q: 'a', a: 1 },
        { q: 'b', nested: { x: [1] } },
      ],
    },
    'full',
  )
  passes(t, s, { rows: [] }, 'name is optional upstream')
  passes(t, s, { name: null, description: null, rows: [{}] }, 'nulls')
  fails(t, s, { name: 'x' }, 'rows missing')
  fails(t, s, { name: 'x', rows: [1, 'two'] }, 'rows that are not objects')
  fails(t, s, { name: 'x', rows: [[]] }, 'a row that is an array')
  fails(t, s, { name: '', rows: [] }, 'empty name')
  fails(t, s, { name: 'x', rows: [], project_id: 'e/p' }, 'unknown top-level key')
})

t.test('v2 query strings (coerced like the server does)', async (t) => {
  const eager = passes(t, v2.OpVersionQuerySchema, { eager: 'true' }, 'eager=true', queryAjv)
  t.equal(eager.eager, true)
  t.equal(passes(t, v2.OpVersionQuerySchema, {}, 'eager omitted', queryAjv).eager, false)
  fails(t, v2.OpVersionQuerySchema, { eager: 'maybe' }, 'eager=maybe', queryAjv)

  t.same(passes(t, v2.ListQuerySchema, { limit: '10', offset: '0' }, 'limit/offset', queryAjv), { limit: 10, offset: 0 })
  fails(t, v2.ListQuerySchema, { limit: '-1' }, 'negative limit', queryAjv)
  fails(t, v2.ListQuerySchema, { offset: 'x' }, 'offset not a number', queryAjv)
  passes(t, v2.ListQuerySchema, { other: 'x' }, 'unknown parameters ignored', queryAjv)

  t.same(passes(t, v2.EvaluationDeleteQuerySchema, { digests: 'd1' }, 'one digest', queryAjv), { digests: ['d1'] })
  passes(t, v2.EvaluationDeleteQuerySchema, { digests: ['d1', 'd2'] }, 'repeated digests', queryAjv)
  passes(t, v2.EvaluationDeleteQuerySchema, {}, 'no digests: all versions', queryAjv)

  t.same(passes(t, v2.PredictionsDeleteQuerySchema, { prediction_ids: 'p1' }, 'one id', queryAjv), { prediction_ids: ['p1'] })
  passes(t, v2.PredictionsDeleteQuerySchema, { prediction_ids: ['p1', 'p2'] }, 'repeated ids', queryAjv)
  fails(t, v2.PredictionsDeleteQuerySchema, {}, 'ids missing', queryAjv)
  fails(t, v2.PredictionsDeleteQuerySchema, { prediction_ids: '' }, 'empty id', queryAjv)

  passes(t, v2.EntityProjectParamsSchema, { entity: 'acme', project: 'proj' }, 'path params')
  fails(t, v2.EntityProjectParamsSchema, { entity: 'a/b', project: 'p' }, 'slash in a decoded entity')
})

t.test('v2 records', async (t) => {
  passes(
    t,
    v2.PredictionSchema,
    { prediction_id: 'p', model: 'weave:///e/p/object/M:abc', inputs: { x: 1 }, output: null, evaluation_run_id: null, svc_user_id: 'u' },
    'prediction',
  )
  fails(t, v2.PredictionSchema, { prediction_id: 'p', model: 'm', inputs: { x: 1 } }, 'prediction without output')
  passes(
    t,
    v2.OpVersionSchema,
    { object_id: 'op', digest: 'd', version_index: 0, created_at: '2025-06-01T00:00:00Z', code: 'def f(): ...' },
    'op version',
  )
  passes(
    t,
    v2.EvaluationSchema,
    {
      object_id: 'ev',
      digest: 'd',
      version_index: 1,
      created_at: '2025-06-01T00:00:00Z',
      name: 'ev',
      description: null,
      dataset: 'weave:///e/p/object/ds:1',
      scorers: [],
      trials: 1,
    },
    'evaluation',
  )
  passes(
    t,
    v2.ScorerSchema,
    { object_id: 's', digest: 'd', version_index: 0, created_at: '2025-06-01T00:00:00Z', name: 's', score_op: 'weave:///e/p/op/s_score:1' },
    'scorer',
  )
  passes(t, common.NumDeletedSchema, { num_deleted: 2 }, 'num_deleted')
  passes(
    t,
    common.ValidationErrorSchema,
    { detail: [{ loc: ['body', 'rows', 0], msg: 'Field required', type: 'missing' }] },
    'validation error',
  )
  passes(t, common.ReasonErrorSchema, { reason: 'gone', deleted_at: '2025-06-01T00:00:00Z' }, 'reason with extras')
  passes(t, common.OpenAIErrorSchema, { error: { message: 'm', type: 'BadRequestError', param: null, code: 400 } }, 'openai error')
  fails(t, common.OpenAIErrorSchema, { error: { message: 'm', type: 'BadRequestError', param: null, code: '400' } }, 'string code')
})

t.test('POST /v1/chat/completions', async (t) => {
  const s = chat.ChatCompletionReqSchema
  const minimal = { messages: [{ role: 'user', content: 'hi' }] }
  const d = passes(t, s, minimal, 'minimal')
  t.match(
    d,
    {
      n: 1,
      stream: false,
      logprobs: false,
      top_logprobs: 0,
      add_generation_prompt: true,
      continue_final_message: false,
      skip_special_tokens: true,
      priority: 0,
    },
    'defaults filled in',
  )
  t.notOk('temperature' in d || 'seed' in d || 'top_k' in d || 'reasoning_effort' in d, 'no defaults that would hide "unset"')

  passes(t, s, { ...minimal, some_future_field: { a: 1 }, store: true, metadata: {} }, 'unknown top-level fields are allowed')
  passes(t, s, { messages: [{ role: 'user', content: 'hi', custom: 1 }] }, 'unknown message fields are allowed')
  passes(
    t,
    s,
    {
      model: 'm',
      messages: [
        { role: 'system', content: 'be brief' },
        { role: 'user', content: [{ type: 'text', text: 'hi' }, { image_url: { url: 'data:' } }], name: 'bob' },
        { role: 'assistant', content: null, tool_calls: [{ id: 'c1', type: 'function', function: { name: 'f', arguments: '{}' } }] },
        { role: 'tool', tool_call_id: 'c1', content: '42' },
        { role: 'narrator', content: 'custom role' },
      ],
      frequency_penalty: 0.5,
      presence_penalty: -2,
      logit_bias: { '50256': -100, '12': 5.5 },
      logprobs: true,
      top_logprobs: 5,
      max_tokens: 10,
      max_completion_tokens: 20,
      n: 2,
      response_format: { type: 'json_schema', json_schema: { name: 'x', description: 'd', schema: { type: 'object' }, strict: true } },
      seed: 42,
      stop: ['\n\n'],
      stream: true,
      stream_options: { include_usage: true, continuous_usage_stats: false },
      temperature: 0.7,
      top_p: 1,
      tools: [{ type: 'function', function: { name: 'f', description: 'd', parameters: { type: 'object', properties: {} } } }],
      tool_choice: 'none',
      reasoning_effort: 'low',
      include_reasoning: true,
      parallel_tool_calls: true,
      user: 'u',
      use_beam_search: false,
      top_k: -1,
      min_p: 0.05,
      repetition_penalty: 1.1,
      length_penalty: 1,
      stop_token_ids: [2],
      include_stop_str_in_output: false,
      ignore_eos: false,
      min_tokens: 0,
      skip_special_tokens: true,
      spaces_between_special_tokens: true,
      truncate_prompt_tokens: 100,
      prompt_logprobs: 1,
      allowed_token_ids: [1, 2, 3],
      bad_words: ['darn'],
      echo: false,
      add_generation_prompt: true,
      continue_final_message: false,
      add_special_tokens: false,
      documents: [{ title: 't', text: 'x' }],
      chat_template: '{{ messages }}',
      chat_template_kwargs: { enable_thinking: false },
      mm_processor_kwargs: {},
      structured_outputs: { choice: ['yes', 'no'], disable_any_whitespace: true },
      priority: 0,
      request_id: 'abc',
      logits_processors: ['pkg.Proc', { qualname: 'pkg.Other', args: [1], kwargs: { k: 'v' } }],
      return_tokens_as_token_ids: false,
      return_token_ids: true,
      cache_salt: 'salt',
      kv_transfer_params: null,
      svc_xargs: { a: 1, b: 'x', c: [1, 'y'] },
    },
    'every spec field',
  )
  passes(t, s, { ...minimal, seed: 9223372036854775807, top_k: 0 }, 'seed at the int64 maximum')
  passes(t, s, { ...minimal, seed: -9223372036854775808 }, 'seed at the int64 minimum')
  passes(t, s, { ...minimal, stop: 'END', tool_choice: { type: 'function', function: { name: 'f' } } }, 'stop string, named tool choice')
  passes(t, s, { ...minimal, vllm_xargs: { n: 2 } }, 'vllm_xargs alias')
  passes(t, s, { ...minimal, temperature: null, top_p: null, seed: null, model: null, stream_options: null }, 'nulls')

  fails(t, s, { ...minimal, top_k: -2 }, 'top_k -2')
  fails(t, s, { ...minimal, top_k: 1.5 }, 'top_k not an integer')
  fails(t, s, { ...minimal, seed: 1e19 }, 'seed beyond int64')
  fails(t, s, { ...minimal, seed: -1e19 }, 'seed below int64')
  fails(t, s, { ...minimal, n: 0 }, 'n 0')
  fails(t, s, { ...minimal, top_logprobs: -1 }, 'negative top_logprobs')
  fails(t, s, { ...minimal, temperature: -0.1 }, 'negative temperature')
  fails(t, s, { ...minimal, temperature: 'hot' }, 'temperature not a number')
  fails(t, s, { ...minimal, top_p: 0 }, 'top_p 0')
  fails(t, s, { ...minimal, top_p: 1.01 }, 'top_p above 1')
  fails(t, s, { ...minimal, min_p: 1.5 }, 'min_p above 1')
  fails(t, s, { ...minimal, min_p: -0.1 }, 'min_p below 0')
  fails(t, s, { ...minimal, frequency_penalty: 2.5 }, 'frequency_penalty above 2')
  fails(t, s, { ...minimal, repetition_penalty: 0 }, 'repetition_penalty 0')
  fails(t, s, { ...minimal, max_tokens: 0 }, 'max_tokens 0')
  fails(t, s, { ...minimal, logit_bias: { abc: 1 } }, 'logit_bias key not a token id')
  fails(t, s, { ...minimal, stop: [''] }, 'empty stop string')
  fails(t, s, { ...minimal, allowed_token_ids: [] }, 'empty allowed_token_ids')
  fails(t, s, { ...minimal, reasoning_effort: 'extreme' }, 'unknown reasoning_effort')
  fails(t, s, { ...minimal, structured_outputs: { choice: [] } }, 'empty choice list')
  fails(t, s, { ...minimal, response_format: { type: 'yaml' } }, 'unknown response_format type')
  fails(t, s, { ...minimal, response_format: { type: 'json_schema', json_schema: { schema: {} } } }, 'json_schema without name')
  fails(t, s, { ...minimal, svc_xargs: { a: { nested: true } } }, 'xargs with an object value')
  fails(t, s, { ...minimal, vllm_xargs: { a: [true] } }, 'xargs with a boolean list')
  fails(t, s, { ...minimal, logits_processors: [{ args: [] }] }, 'logits processor without qualname')
  fails(t, s, { ...minimal, cache_salt: '' }, 'empty cache_salt')
  fails(t, s, { messages: [] }, 'no messages')
  fails(t, s, {}, 'messages missing')
  fails(t, s, { messages: [{ content: 'hi' }] }, 'message without role')
  fails(t, s, { messages: [{ role: 'user', content: 5 }] }, 'content a number')
  fails(t, s, { messages: 'hi' }, 'messages a string')
})

t.test('chat responses', async (t) => {
  // vLLM's non-streaming response as the reference shows it (recent main).
  passes(
    t,
    chat.ChatCompletionResSchema,
    {
      id: 'chatcmpl-0123456789abcdef0123456789abcdef',
      object: 'chat.completion',
      created: 1750000000,
      model: 'tiny',
      choices: [
        {
          index: 0,
          message: {
            role: 'assistant',
            content: '2',
            refusal: null,
            annotations: null,
            audio: null,
            function_call: null,
            tool_calls: [],
            reasoning_content: null,
          },
          logprobs: {
            content: [{ token: '2', logprob: -0.012, bytes: [50], top_logprobs: [{ token: '2', logprob: -0.012, bytes: [50] }] }],
          },
          finish_reason: 'stop',
          stop_reason: null,
          token_ids: null,
        },
      ],
      service_tier: null,
      system_fingerprint: null,
      usage: { prompt_tokens: 37, total_tokens: 42, completion_tokens: 5, prompt_tokens_details: null },
      prompt_logprobs: [null, { '791': { logprob: -1.5, rank: 1, decoded_token: 'The' } }],
      prompt_token_ids: null,
      kv_transfer_params: null,
    },
    'completion',
  )
  fails(
    t,
    chat.ChatCompletionResSchema,
    {
      id: 'x',
      object: 'chat.completion.chunk',
      created: 1,
      model: 'm',
      choices: [],
      usage: { prompt_tokens: 1, total_tokens: 1, completion_tokens: 0 },
    },
    'wrong object',
  )
  passes(
    t,
    chat.ModelListResSchema,
    {
      object: 'list',
      data: [
        {
          id: 'tiny',
          object: 'model',
          created: 1750000000,
          owned_by: 'vllm',
          root: '/models/tiny',
          parent: null,
          max_model_len: 2048,
          permission: [
            {
              id: 'modelperm-0123456789abcdef0123456789abcdef',
              object: 'model_permission',
              created: 1750000000,
              allow_create_engine: false,
              allow_sampling: true,
              allow_logprobs: true,
              allow_search_indices: false,
              allow_view: true,
              allow_fine_tuning: false,
              organization: '*',
              group: null,
              is_blocking: false,
            },
          ],
        },
      ],
    },
    'model list',
  )
})

t.test('call stats response', async (t) => {
  passes(
    t,
    calls.CallStatsResSchema,
    {
      start: '2025-06-01T00:00:00Z',
      end: '2025-06-01T02:00:00Z',
      granularity: 3600,
      timezone: 'UTC',
      usage_buckets: [{ timestamp: '2025-06-01T00:00:00Z', model: 'gpt-4o', sum_input_tokens: 10, count: 1 }],
      call_buckets: [
        { timestamp: '2025-06-01T00:00:00Z', avg_latency_ms: 12.5, p95_latency_ms: null, count: 2 },
        { timestamp: '2025-06-01T01:00:00Z', avg_latency_ms: 0, p95_latency_ms: null, count: 0 },
      ],
    },
    'buckets',
  )
  fails(
    t,
    calls.CallStatsResSchema,
    {
      start: 'x',
      end: 'y',
      granularity: 1,
      timezone: 'UTC',
      usage_buckets: [],
      call_buckets: [{ timestamp: '2025-06-01T00:00:00Z', count: 1, label: 'text' }],
    },
    'bad timestamps and a non-numeric metric column',
  )
  passes(t, calls.CallsQueryStatsResSchema, { count: 3, total_storage_size_bytes: null }, 'query stats response')
})
