import t from 'tap'
import { gzipSync } from 'node:zlib'
import { context, diag, trace, DiagLogLevel, SpanStatusCode } from '@opentelemetry/api'
import { BasicTracerProvider, InMemorySpanExporter, SimpleSpanProcessor, type ReadableSpan } from '@opentelemetry/sdk-trace-base'
import { resourceFromAttributes } from '@opentelemetry/resources'
import { OTLPTraceExporter as ProtoExporter } from '@opentelemetry/exporter-trace-otlp-proto'
import { OTLPTraceExporter as JsonExporter } from '@opentelemetry/exporter-trace-otlp-http'
import { startServer, type TestServer } from './helpers/server.js'

// No chat in this file: its servers start without the built-in model (about 1 s of CPU less per start).
process.env.WEFT_MODEL ??= 'none'

let s: TestServer
t.before(async () => {
  s = await startServer()
})
t.teardown(() => s.stop())

async function calls(project: string): Promise<any[]> {
  const r = await fetch(s.url + '/calls/stream_query', {
    method: 'POST',
    headers: { ...s.basic(), 'content-type': 'application/json' },
    body: JSON.stringify({ project_id: project }),
  })
  return (await r.text())
    .split('\n')
    .filter(Boolean)
    .map((l) => JSON.parse(l))
}

/** An instrumented "agent": a root span, an LLM child with GenAI attributes, and a failing tool call. */
async function runAgent(exporter: ProtoExporter | JsonExporter, project: string) {
  const [entity, name] = project.split('/')
  const provider = new BasicTracerProvider({
    resource: resourceFromAttributes({ 'service.name': 'agent', 'wandb.entity': entity!, 'wandb.project': name! }),
    spanProcessors: [new SimpleSpanProcessor(exporter)],
  })
  const tracer = provider.getTracer('weft-test')
  const root = tracer.startSpan('agent.run', { attributes: { 'input.value': '{"question":"2+2?"}' } })
  const ctx = trace.setSpan(context.active(), root)
  const llm = tracer.startSpan(
    'chat gpt-x',
    {
      attributes: {
        'gen_ai.system': 'openai',
        'gen_ai.request.model': 'gpt-x',
        'gen_ai.usage.input_tokens': 12,
        'gen_ai.usage.output_tokens': 5,
        'gen_ai.completion': 'four',
      },
    },
    ctx,
  )
  llm.end()
  const tool = tracer.startSpan('tool.calc', {}, ctx)
  tool.setStatus({ code: SpanStatusCode.ERROR, message: 'division by zero' })
  tool.end()
  root.setAttribute('output.value', '4')
  root.end()
  await provider.forceFlush()
  await provider.shutdown()
  return {
    traceId: root.spanContext().traceId,
    rootId: root.spanContext().spanId,
    llmId: llm.spanContext().spanId,
    toolId: tool.spanContext().spanId,
  }
}

for (const [label, Exporter] of [
  ['protobuf', ProtoExporter],
  ['json', JsonExporter],
] as const) {
  t.test(`OTLP/HTTP ${label} exporter: spans become calls`, async (t) => {
    const project = `acme/otel-${label}`
    const exporter = new Exporter({ url: s.url + '/otel/v1/traces', headers: s.basic() })
    const ids = await runAgent(exporter, project)
    const got = await calls(project)
    t.equal(got.length, 3)
    const byId = new Map(got.map((c) => [c.id, c]))
    const root = byId.get(ids.rootId)
    const llm = byId.get(ids.llmId)
    const tool = byId.get(ids.toolId)
    t.match(root, {
      op_name: 'agent.run',
      trace_id: ids.traceId,
      parent_id: null,
      inputs: { input: { question: '2+2?' } },
      output: 4,
      svc_user_id: 'admin',
    })
    t.equal(root.summary.weave.status, 'success')
    t.type(root.summary.weave.latency_ms, 'number')
    t.match(llm, { parent_id: ids.rootId, trace_id: ids.traceId, output: 'four' })
    t.same(llm.summary.usage, {
      'gpt-x': { input_tokens: 12, output_tokens: 5, prompt_tokens: 12, completion_tokens: 5, total_tokens: 17, requests: 1 },
    })
    t.equal(llm.attributes.gen_ai.system, 'openai', 'dotted attributes are nested')
    t.equal(llm.attributes.otel_span.attributes['gen_ai.request.model'], 'gpt-x', 'the span is kept whole')
    t.equal(llm.attributes.otel_span.resource.attributes['service.name'], 'agent')
    t.match(tool, { exception: 'division by zero', parent_id: ids.rootId })
    t.equal(tool.summary.weave.status, 'error')
    const q = await fetch(s.url + '/calls/query_stats', {
      method: 'POST',
      headers: { ...s.basic(), 'content-type': 'application/json' },
      body: JSON.stringify({
        project_id: project,
        query: { $expr: { $eq: [{ $getField: 'attributes.gen_ai.system' }, { $literal: 'openai' }] } },
      }),
    })
    t.same(await q.json(), { count: 1, has_more: false }, 'span attributes are queryable')
  })
}

t.test('OTLP bad input and partial success', async (t) => {
  const post = (body: Buffer | string, headers: Record<string, string>) =>
    fetch(s.url + '/otel/v1/traces', { method: 'POST', headers: { ...s.basic(), ...headers }, body })
  const garbage = await post(Buffer.from([0x0a, 0xff, 0xff, 0xff, 0xff, 0x0f, 1, 2]), { 'content-type': 'application/x-protobuf' })
  t.equal(garbage.status, 400)
  t.match(await garbage.json(), { reason: /not a valid OTLP/ })
  const wrongType = await post('x', { 'content-type': 'text/plain' })
  t.equal(wrongType.status, 415)
  const badJson = await post('{"resourceSpans": 5}', { 'content-type': 'application/json' })
  t.equal(badJson.status, 400)
  const noAuth = await fetch(s.url + '/otel/v1/traces', { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{}' })
  t.equal(noAuth.status, 401)

  const span = (traceId: string, spanId: string) => ({
    traceId,
    spanId,
    name: 'x',
    startTimeUnixNano: '1767225600000000000',
    endTimeUnixNano: '1767225601000000000',
  })
  const body = {
    resourceSpans: [
      { resource: { attributes: [] }, scopeSpans: [{ spans: [span('0123456789abcdef0123456789abcdef', '0123456789abcdef')] }] },
      {
        resource: {
          attributes: [
            { key: 'wandb.entity', value: { stringValue: 'acme' } },
            { key: 'wandb.project', value: { stringValue: 'partial' } },
          ],
        },
        scopeSpans: [{ spans: [span('0123456789abcdef0123456789abcdef', '1123456789abcdef'), span('short', '2123456789abcdef')] }],
      },
    ],
  }
  const partial = await post(JSON.stringify(body), { 'content-type': 'application/json' })
  t.equal(partial.status, 200)
  const pj = (await partial.json()) as { partialSuccess: { rejectedSpans: number; errorMessage: string } }
  t.same(Object.keys(pj), ['partialSuccess'], 'OTLP/JSON keys are lowerCamelCase')
  t.equal(pj.partialSuccess.rejectedSpans, 2)
  t.match(pj.partialSuccess.errorMessage, /no project.*trace id must be 16 bytes/s)
  t.equal((await calls('acme/partial')).length, 1, 'the good span is stored')

  const viaHeader = await post(gzipSync(JSON.stringify({ resourceSpans: [body.resourceSpans[0]] })), {
    'content-type': 'application/json',
    'content-encoding': 'gzip',
    'project-id': 'acme/by-header',
  })
  t.equal(viaHeader.status, 200)
  t.same(await viaHeader.json(), {})
  t.equal((await calls('acme/by-header')).length, 1, 'gzip body, project from the project-id header')

  const bomb = await post(gzipSync(Buffer.alloc(40 * 1024 * 1024)), { 'content-type': 'application/json', 'content-encoding': 'gzip' })
  t.equal(bomb.status, 413, 'a gzip bomb is bounded by the body limit')
})

/** Finished spans of one provider whose resource has these attributes. */
async function spansOf(attrs: Record<string, string>, names: string[]): Promise<ReadableSpan[]> {
  const memory = new InMemorySpanExporter()
  const provider = new BasicTracerProvider({ resource: resourceFromAttributes(attrs), spanProcessors: [new SimpleSpanProcessor(memory)] })
  for (const n of names) provider.getTracer('weft-test').startSpan(n).end()
  await provider.forceFlush()
  const spans = memory.getFinishedSpans()
  await provider.shutdown()
  return spans
}

t.test('the OTLP/JSON exporter sees a partly rejected export', async (t) => {
  // One export with spans of two resources: one names a project, the other names none and is refused.
  const good = await spansOf({ 'wandb.entity': 'acme', 'wandb.project': 'otel-partial' }, ['kept'])
  const bad = await spansOf({ 'service.name': 'no-project' }, ['refused-1', 'refused-2'])
  const warnings: string[] = []
  const write = (...args: unknown[]) => warnings.push(args.map(String).join(' '))
  diag.setLogger({ error: write, warn: write, info: () => {}, debug: () => {}, verbose: () => {} }, DiagLogLevel.WARN)
  t.teardown(() => diag.disable())
  const exporter = new JsonExporter({ url: s.url + '/otel/v1/traces', headers: s.basic() })
  const result = await new Promise<{ code: number; error?: Error }>((r) => exporter.export([...good, ...bad], r))
  await exporter.shutdown()
  t.equal(result.code, 0, 'a partial success is still a success (ExportResultCode.SUCCESS)')
  const seen = warnings.find((w) => w.includes('Partial Success'))
  t.ok(seen, 'the exporter warns about the partial success')
  const reported = JSON.parse(seen!.slice(seen!.indexOf('{')))
  t.equal(Number(reported.rejectedSpans), 2, 'with the number of refused spans')
  t.match(reported.errorMessage, /refused-1.*no project/s, 'and why')
  t.equal((await calls('acme/otel-partial')).length, 1, 'the accepted span is stored')
})
