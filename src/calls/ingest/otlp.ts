import { createHash } from 'node:crypto'
import protobuf from 'protobufjs'
import { DomainError } from '../../core/errors.js'
import { refsIn } from './parts.js'
import type { CallPart } from '../model.js'

/**
 * OTLP/HTTP trace ingest: `ExportTraceServiceRequest` as protobuf or JSON. Only the messages and
 * fields weft reads are described; protobufjs skips every other field on the wire. protobufjs
 * names fields in lowerCamelCase, which is also OTLP/JSON's spelling, so both decode to one shape.
 */
const DESCRIPTOR = {
  nested: {
    ExportTraceServiceRequest: { fields: { resourceSpans: { rule: 'repeated', type: 'ResourceSpans', id: 1 } } },
    ResourceSpans: { fields: { resource: { type: 'Resource', id: 1 }, scopeSpans: { rule: 'repeated', type: 'ScopeSpans', id: 2 } } },
    Resource: { fields: { attributes: { rule: 'repeated', type: 'KeyValue', id: 1 } } },
    ScopeSpans: { fields: { scope: { type: 'InstrumentationScope', id: 1 }, spans: { rule: 'repeated', type: 'Span', id: 2 } } },
    InstrumentationScope: { fields: { name: { type: 'string', id: 1 }, version: { type: 'string', id: 2 } } },
    Span: {
      fields: {
        traceId: { type: 'bytes', id: 1 },
        spanId: { type: 'bytes', id: 2 },
        parentSpanId: { type: 'bytes', id: 4 },
        name: { type: 'string', id: 5 },
        kind: { type: 'int32', id: 6 },
        startTimeUnixNano: { type: 'fixed64', id: 7 },
        endTimeUnixNano: { type: 'fixed64', id: 8 },
        attributes: { rule: 'repeated', type: 'KeyValue', id: 9 },
        events: { rule: 'repeated', type: 'Event', id: 11 },
        status: { type: 'Status', id: 15 },
      },
    },
    Event: {
      fields: {
        timeUnixNano: { type: 'fixed64', id: 1 },
        name: { type: 'string', id: 2 },
        attributes: { rule: 'repeated', type: 'KeyValue', id: 3 },
      },
    },
    Status: { fields: { message: { type: 'string', id: 2 }, code: { type: 'int32', id: 3 } } },
    KeyValue: { fields: { key: { type: 'string', id: 1 }, value: { type: 'AnyValue', id: 2 } } },
    AnyValue: {
      oneofs: { value: { oneof: ['stringValue', 'boolValue', 'intValue', 'doubleValue', 'arrayValue', 'kvlistValue', 'bytesValue'] } },
      fields: {
        stringValue: { type: 'string', id: 1 },
        boolValue: { type: 'bool', id: 2 },
        intValue: { type: 'int64', id: 3 },
        doubleValue: { type: 'double', id: 4 },
        arrayValue: { type: 'ArrayValue', id: 5 },
        kvlistValue: { type: 'KeyValueList', id: 6 },
        bytesValue: { type: 'bytes', id: 7 },
      },
    },
    ArrayValue: { fields: { values: { rule: 'repeated', type: 'AnyValue', id: 1 } } },
    KeyValueList: { fields: { values: { rule: 'repeated', type: 'KeyValue', id: 1 } } },
    ExportTraceServiceResponse: { fields: { partialSuccess: { type: 'ExportTracePartialSuccess', id: 1 } } },
    ExportTracePartialSuccess: { fields: { rejectedSpans: { type: 'int64', id: 1 }, errorMessage: { type: 'string', id: 2 } } },
  },
}

const root = protobuf.Root.fromJSON(DESCRIPTOR)
const RequestType = root.lookupType('ExportTraceServiceRequest')
const ResponseType = root.lookupType('ExportTraceServiceResponse')

type Bytes = Uint8Array | string
interface AnyValue {
  stringValue?: string
  boolValue?: boolean
  intValue?: string | number
  doubleValue?: number
  arrayValue?: { values?: AnyValue[] }
  kvlistValue?: { values?: KeyValue[] }
  bytesValue?: Bytes
}
interface KeyValue {
  key: string
  value?: AnyValue
}
interface Span {
  traceId?: Bytes
  spanId?: Bytes
  parentSpanId?: Bytes
  name?: string
  kind?: number | string
  startTimeUnixNano?: string | number
  endTimeUnixNano?: string | number
  attributes?: KeyValue[]
  events?: { timeUnixNano?: string | number; name?: string; attributes?: KeyValue[] }[]
  status?: { message?: string; code?: number | string }
}
export interface ExportRequest {
  resourceSpans?: {
    resource?: { attributes?: KeyValue[] }
    scopeSpans?: { scope?: { name?: string; version?: string }; spans?: Span[] }[]
  }[]
}

export function decodeProtobuf(buf: Uint8Array): ExportRequest {
  try {
    const msg = RequestType.decode(buf)
    return RequestType.toObject(msg, { longs: String, defaults: false, arrays: true }) as ExportRequest
  } catch (e) {
    throw new DomainError(400, `Body is not a valid OTLP ExportTraceServiceRequest protobuf: ${(e as Error).message}`)
  }
}

export function encodeResponse(rejected: number, message: string): Uint8Array {
  const body = rejected > 0 ? { partialSuccess: { rejectedSpans: rejected, errorMessage: message } } : {}
  return ResponseType.encode(ResponseType.fromObject(body)).finish()
}

/** Protobuf ids are bytes; OTLP/JSON writes them as hex (some exporters as base64). */
function idHex(v: Bytes | undefined, bytes: number): string | null {
  if (v === undefined || v === null || (typeof v !== 'string' && v.length === 0) || v === '') return null
  if (typeof v === 'string') {
    if (new RegExp(`^[0-9a-fA-F]{${bytes * 2}}$`).test(v)) return v.toLowerCase()
    const b = Buffer.from(v, 'base64')
    return b.length === bytes ? b.toString('hex') : 'invalid'
  }
  return v.length === bytes ? Buffer.from(v).toString('hex') : 'invalid'
}

function anyValue(v: AnyValue | undefined, depth = 0): unknown {
  if (!v || depth > 32) return null
  if (v.stringValue !== undefined) return v.stringValue
  if (v.boolValue !== undefined) return v.boolValue
  if (v.intValue !== undefined) {
    const n = Number(v.intValue)
    return Number.isSafeInteger(n) ? n : String(v.intValue)
  }
  if (v.doubleValue !== undefined) return v.doubleValue
  if (v.arrayValue) return (v.arrayValue.values ?? []).map((x) => anyValue(x, depth + 1))
  if (v.kvlistValue) return kvs(v.kvlistValue.values, depth + 1)
  if (v.bytesValue !== undefined) return typeof v.bytesValue === 'string' ? v.bytesValue : Buffer.from(v.bytesValue).toString('base64')
  return null
}

function kvs(list: KeyValue[] | undefined, depth = 0): Record<string, unknown> {
  const out: Record<string, unknown> = {}
  for (const kv of list ?? []) if (typeof kv.key === 'string') out[kv.key] = anyValue(kv.value, depth)
  return out
}

/** `{"gen_ai.usage.input_tokens": 3}` → `{gen_ai: {usage: {input_tokens: 3}}}`, so `attributes.gen_ai.usage...` paths resolve. */
function nest(flat: Record<string, unknown>): Record<string, unknown> {
  const out: Record<string, unknown> = {}
  for (const [key, value] of Object.entries(flat)) {
    const segs = key.split('.')
    let node = out
    let ok = true
    for (let i = 0; i < segs.length - 1; i++) {
      const s = segs[i]!
      const next = node[s]
      if (next === undefined) node = node[s] = {} as Record<string, unknown>
      else if (next && typeof next === 'object' && !Array.isArray(next)) node = next as Record<string, unknown>
      else {
        ok = false // a leaf already sits where this key needs an object; the flat copy in otel_span keeps it
        break
      }
    }
    const leaf = segs[segs.length - 1]!
    if (ok && !(leaf in node)) node[leaf] = value
  }
  return out
}

function maybeJson(v: unknown): unknown {
  if (typeof v !== 'string') return v
  const t = v.trim()
  if (!(t.startsWith('{') || t.startsWith('['))) return v
  try {
    return JSON.parse(t)
  } catch {
    return v
  }
}

const num = (v: unknown): number | undefined =>
  typeof v === 'number' ? v : typeof v === 'string' && v !== '' && !Number.isNaN(Number(v)) ? Number(v) : undefined

/** Inputs, output and usage from the GenAI, OpenInference and OpenLLMetry conventions. */
function semantics(a: Record<string, unknown>) {
  let inputs: Record<string, unknown> = {}
  if (a['input.value'] !== undefined) inputs = { input: maybeJson(a['input.value']) }
  else if (a['gen_ai.input.messages'] !== undefined) inputs = { messages: maybeJson(a['gen_ai.input.messages']) }
  else if (a['gen_ai.prompt'] !== undefined) inputs = { prompt: maybeJson(a['gen_ai.prompt']) }
  let output: unknown = null
  if (a['output.value'] !== undefined) output = maybeJson(a['output.value'])
  else if (a['gen_ai.output.messages'] !== undefined) output = maybeJson(a['gen_ai.output.messages'])
  else if (a['gen_ai.completion'] !== undefined) output = maybeJson(a['gen_ai.completion'])
  const input = num(a['gen_ai.usage.input_tokens']) ?? num(a['gen_ai.usage.prompt_tokens']) ?? num(a['llm.token_count.prompt'])
  const out = num(a['gen_ai.usage.output_tokens']) ?? num(a['gen_ai.usage.completion_tokens']) ?? num(a['llm.token_count.completion'])
  const total = num(a['llm.token_count.total']) ?? (input !== undefined || out !== undefined ? (input ?? 0) + (out ?? 0) : undefined)
  let usage: Record<string, unknown> | undefined
  if (total !== undefined) {
    const model = String(a['gen_ai.response.model'] ?? a['gen_ai.request.model'] ?? a['llm.model_name'] ?? 'usage')
    usage = {
      [model]: {
        input_tokens: input ?? 0,
        output_tokens: out ?? 0,
        prompt_tokens: input ?? 0,
        completion_tokens: out ?? 0,
        total_tokens: total,
        requests: 1,
      },
    }
  }
  return { inputs, output, usage }
}

function opName(name: string): string {
  if (name.length <= 128) return name
  return name.slice(0, 123) + '_' + createHash('sha256').update(name).digest('hex').slice(0, 4)
}

function micros(nanos: string | number | undefined): string | null {
  if (nanos === undefined || nanos === null || nanos === '' || nanos === 0 || nanos === '0') return null
  try {
    return (BigInt(String(nanos)) / 1000n).toString()
  } catch {
    return null
  }
}

export interface SpanConversion {
  parts: CallPart[]
  accepted: number
  rejected: number
  errors: string[]
}

/**
 * Spans → a start and an end part each (docs/calls-and-storage.md). The project comes from the resource's
 * `wandb.entity` + `wandb.project` attributes, else the `project-id` header. A span that cannot be
 * stored is counted as rejected with its reason; the rest go in.
 */
export function spansToParts(
  req: ExportRequest,
  headerProject: string,
  userId: string,
  mayWrite: (project: string) => boolean,
): SpanConversion {
  const out: SpanConversion = { parts: [], accepted: 0, rejected: 0, errors: [] }
  const reject = (why: string) => {
    out.rejected++
    if (out.errors.length < 20) out.errors.push(why)
  }
  for (const rs of req.resourceSpans ?? []) {
    const resource = kvs(rs.resource?.attributes)
    const entity = resource['wandb.entity']
    const projectName = resource['wandb.project']
    const project = typeof entity === 'string' && typeof projectName === 'string' ? `${entity}/${projectName}` : headerProject
    for (const ss of rs.scopeSpans ?? []) {
      for (const span of ss.spans ?? []) {
        const name = span.name || '(unnamed span)'
        if (!/^[^/\s]+\/[^/\s]+$/.test(project)) {
          reject(
            `span ${JSON.stringify(name)}: no project (set resource attributes wandb.entity and wandb.project, or a project-id header)`,
          )
          continue
        }
        if (!mayWrite(project)) {
          reject(`span ${JSON.stringify(name)}: this API key may not write to ${project}`)
          continue
        }
        const parts = spanParts(span, name, { project, userId, resource, scope: ss.scope ?? {} })
        if (typeof parts === 'string') {
          reject(`span ${JSON.stringify(name)}: ${parts}`)
          continue
        }
        out.parts.push(...parts)
        out.accepted++
      }
    }
  }
  return out
}

interface SpanContext {
  project: string
  userId: string
  resource: Record<string, unknown>
  scope: { name?: string; version?: string }
}

/** A span's start part and (when it has ended) its end part, or why it cannot be stored. */
function spanParts(span: Span, name: string, ctx: SpanContext): CallPart[] | string {
  const traceId = idHex(span.traceId, 16)
  const spanId = idHex(span.spanId, 8)
  const parentId = idHex(span.parentSpanId, 8)
  if (!traceId || traceId === 'invalid' || !spanId || spanId === 'invalid' || parentId === 'invalid') {
    return 'trace id must be 16 bytes and span ids 8 bytes'
  }
  const started = micros(span.startTimeUnixNano)
  if (!started) return 'no start time'
  const attrs = kvs(span.attributes)
  const { inputs, output, usage } = semantics(attrs)
  const statusCode = Number(span.status?.code ?? 0) || (span.status?.code === 'STATUS_CODE_ERROR' ? 2 : 0)
  const attributes = { ...nest(attrs), otel_span: otelSpan(span, name, { traceId, spanId, parentId }, attrs, ctx) }
  const displayName = typeof attrs['wandb.display_name'] === 'string' ? (attrs['wandb.display_name'] as string) : null
  const parts: CallPart[] = [
    {
      kind: 'start',
      project_id: ctx.project,
      id: spanId,
      trace_id: traceId,
      parent_id: parentId,
      op_name: opName(name),
      display_name: displayName,
      started_us: started,
      attributes: JSON.stringify(attributes),
      inputs: JSON.stringify(inputs),
      user_id: ctx.userId,
      thread_id: typeof attrs['wandb.thread_id'] === 'string' ? (attrs['wandb.thread_id'] as string) : null,
      input_refs: refsIn(inputs),
    },
  ]
  const ended = micros(span.endTimeUnixNano)
  if (ended) {
    parts.push({
      kind: 'end',
      project_id: ctx.project,
      id: spanId,
      ended_us: ended,
      output: JSON.stringify(output),
      summary: JSON.stringify(usage ? { usage } : {}),
      exception: statusCode === 2 ? span.status?.message || 'error' : null,
      output_refs: refsIn(output),
    })
  }
  return parts
}

/** The span as sent, kept whole under `attributes.otel_span`. */
function otelSpan(
  span: Span,
  name: string,
  ids: { traceId: string; spanId: string; parentId: string | null },
  attrs: Record<string, unknown>,
  ctx: SpanContext,
) {
  return {
    name,
    kind: span.kind ?? 0,
    trace_id: ids.traceId,
    span_id: ids.spanId,
    parent_id: ids.parentId,
    start_time_unix_nano: String(span.startTimeUnixNano),
    end_time_unix_nano: span.endTimeUnixNano === undefined ? null : String(span.endTimeUnixNano),
    attributes: attrs,
    resource: { attributes: ctx.resource },
    scope: ctx.scope,
    status: span.status ?? {},
    events: (span.events ?? []).map((e) => ({
      name: e.name,
      time_unix_nano: String(e.timeUnixNano ?? ''),
      attributes: kvs(e.attributes),
    })),
  }
}
