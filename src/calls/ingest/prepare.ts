import { promisify } from 'node:util'
import zlib from 'node:zlib'
import { canAccess } from '../../core/principal.js'
import { DomainError, validationError, type Detail } from '../../core/errors.js'
import { parseJson } from '../../core/json.js'
import { compileValidator } from '../../schemas/validate.js'
import type { ExportRequest } from './otlp.js'
import {
  CallCreateBatchReqSchema,
  CallEndReqSchema,
  CallStartReqSchema,
  EndedCallSchema,
  StartedCallSchema,
  type EndedCall,
  type StartedCall,
} from '../../schemas/calls-write.js'
import { encodeParts } from './encode.js'
import { ARROW_MAX_PARTS, ARROW_MIN_PARTS, partsBatch } from './parts-batch.js'
import { endPart, foldParts, startPart } from './parts.js'
import { parseWithRawValues } from './raw-json.js'
import { walRecord } from '../storage/wal.js'
import type { CallPart } from '../model.js'

/**
 * Ingest work that runs in the worker pool, never on the event loop: decompress, parse and validate
 * a request body, turn it into call parts and encode them as the log and DuckDB read them. The
 * answer is plain data (it crosses a thread boundary); errors come back as values, not throws.
 */
export interface IngestTask {
  route: 'start' | 'end' | 'batch' | 'otel'
  body: Uint8Array
  userId: string
  /** The key's entities; null: all. */
  entities: string[] | null
  /**
   * Whether the log record may be an Arrow batch (partsBatch) instead of JSON (encodeParts): the embedded store reads
   * both; the ClickHouse backend reads JSON (clickhouse/record.ts).
   */
  arrow?: boolean
  /** OTLP only. */
  otel?: { json: boolean; encoding: string; projectHeader: string; maxBytes: number }
}

export type IngestResult =
  /** record: the parts framed as a log record (see walRecord); replyJson: the reply, serialised here when it is large. */
  | { ok: true; record: Uint8Array; count: number; reply: unknown; replyJson?: Uint8Array }
  | { ok: false; status: number; message: string; details?: Detail[] }

const validStartReq = compileValidator(CallStartReqSchema, 'body')
const validEndReq = compileValidator(CallEndReqSchema, 'body')
const validBatchReq = compileValidator(CallCreateBatchReqSchema, 'body')
const validStart = compileValidator(StartedCallSchema, 'body')
const validEnd = compileValidator(EndedCallSchema, 'body')
const gunzip = promisify(zlib.gunzip)
const inflate = promisify(zlib.inflate)

/**
 * Fault injection for tests: with WEFT_FAILPOINTS=ingest-worker-exit, a body holding this marker
 * ends its worker thread, as a crash would.
 */
const EXIT_MARKER = Buffer.from('weft-failpoint:ingest-worker-exit')
const exitFailpoint = (process.env.WEFT_FAILPOINTS ?? '').split(',').includes('ingest-worker-exit')

export async function prepareIngest(task: IngestTask): Promise<IngestResult> {
  if (exitFailpoint && Buffer.from(task.body.buffer, task.body.byteOffset, task.body.byteLength).includes(EXIT_MARKER)) process.exit(70)
  try {
    const { parts: sent, reply } = await convert(task)
    const parts = foldParts(sent)
    // An Arrow batch when asked for and it can hold the parts as the JSON would reach the tail (see partsBatch); a
    // small batch stays JSON (see ARROW_MIN_PARTS), and so does a large one, whose tail insert then runs off the event
    // loop (an Arrow batch's append runs on it).
    const arrow = task.arrow && parts.length >= ARROW_MIN_PARTS && parts.length <= ARROW_MAX_PARTS ? partsBatch(parts) : null
    const record = walRecord(arrow ?? encodeParts(parts))
    if (task.route === 'otel') return { ok: true, record, count: parts.length, reply }
    return { ok: true, record, count: parts.length, reply: null, replyJson: ownBuffer(JSON.stringify(reply)) }
  } catch (e) {
    if (e instanceof DomainError) return { ok: false, status: e.status, message: e.message, ...(e.details ? { details: e.details } : {}) }
    return { ok: false, status: 400, message: `Malformed ${task.route === 'otel' ? 'OTLP ' : ''}request: ${(e as Error).message}` }
  }
}

function ownBuffer(text: string): Buffer {
  const b = Buffer.allocUnsafeSlow(Buffer.byteLength(text))
  b.write(text)
  return b
}

/** The DomainError a failed IngestResult stands for, on the main thread. */
export function ingestError(r: Extract<IngestResult, { ok: false }>): DomainError {
  return r.details ? validationError(r.details) : new DomainError(r.status, r.message)
}

/** The body, with large JSON values kept as bytes when the fast path takes it (see raw-json.ts). */
function parseBody(task: IngestTask): unknown {
  return (task.route !== 'otel' && parseWithRawValues(task.body, task.route)) || parseJson(task.body)
}

function checkProject(task: IngestTask, projectId: string): void {
  const entity = projectId.slice(0, projectId.indexOf('/'))
  if (!canAccess(task, entity)) throw new DomainError(403, `This API key may not access entity ${JSON.stringify(entity)}`)
}

function validated<T>(value: unknown, check: (v: unknown) => Detail[] | null): T {
  const problems = check(value)
  if (problems) throw validationError(problems)
  return value as T
}

async function convert(task: IngestTask): Promise<{ parts: CallPart[]; reply: unknown }> {
  switch (task.route) {
    case 'start': {
      const { start } = validated<{ start: StartedCall }>(parseBody(task), validStartReq)
      checkProject(task, start.project_id)
      const part = startPart(start, task.userId)
      return { parts: [part], reply: { id: part.id, trace_id: part.trace_id } }
    }
    case 'end': {
      const { end } = validated<{ end: EndedCall }>(parseBody(task), validEndReq)
      checkProject(task, end.project_id)
      return { parts: [endPart(end)], reply: {} }
    }
    case 'batch': {
      const { batch } = validated<{ batch: { mode?: string; req: Record<string, unknown> }[] }>(parseBody(task), validBatchReq)
      const parts: CallPart[] = []
      const res = batch.map((item, i) => {
        const r = batchItem(item, i, task)
        if ('error' in r) {
          const e = r.error
          return { error: e.message, status: e.details ? 422 : e.status, ...(e.details ? { detail: e.details } : {}) }
        }
        parts.push(r.part)
        return r.res
      })
      return { parts, reply: { res } }
    }
    case 'otel':
      return otel(task)
  }
}

/** One batch item: its part, or why it was rejected (a bad item never fails the batch). */
function batchItem(
  item: { mode?: string; req: Record<string, unknown> },
  index: number,
  task: IngestTask,
): { part: CallPart; res: unknown } | { error: DomainError } {
  const mode = item.mode ?? ('start' in item.req ? 'start' : 'end')
  const relocate = (problems: Detail[], key: string) =>
    problems.map((d) => ({ ...d, loc: ['body', 'batch', index, 'req', key, ...d.loc.slice(1)] }))
  try {
    if (mode === 'start') {
      const problems = validStart(item.req.start)
      if (problems) throw validationError(relocate(problems, 'start'))
      const start = item.req.start as StartedCall
      checkProject(task, start.project_id)
      const part = startPart(start, task.userId)
      return { part, res: { id: part.id, trace_id: part.trace_id } }
    }
    if (mode === 'end') {
      const problems = validEnd(item.req.end)
      if (problems) throw validationError(relocate(problems, 'end'))
      const end = item.req.end as EndedCall
      checkProject(task, end.project_id)
      return { part: endPart(end), res: {} }
    }
    throw new DomainError(400, `Invalid mode ${JSON.stringify(mode)}: expected "start" or "end"`)
  } catch (e) {
    if (e instanceof DomainError) return { error: e }
    throw e
  }
}

async function decompress(body: Uint8Array, encoding: string, limit: number): Promise<Uint8Array> {
  const enc = encoding.toLowerCase()
  if (!enc || enc === 'identity') return body
  // The inflated size is bounded like a body: a small gzip bomb must not become gigabytes.
  const opts = { maxOutputLength: limit }
  try {
    if (enc === 'gzip') return await gunzip(body, opts)
    if (enc === 'deflate') return await inflate(body, opts)
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'ERR_BUFFER_TOO_LARGE')
      throw new DomainError(413, `Decompressed body is larger than ${limit} bytes`)
    throw new DomainError(400, `Body is not valid ${enc} data`)
  }
  throw new DomainError(415, `Unsupported Content-Encoding ${JSON.stringify(enc)}: send gzip, deflate or none`)
}

async function otel(task: IngestTask): Promise<{ parts: CallPart[]; reply: unknown }> {
  // protobufjs and the OTLP types load at the first OTLP body, not in every process that imports this file (the
  // main thread imports it for ingestError; a worker may never see OTLP).
  const { decodeProtobuf, spansToParts } = await import('./otlp.js')
  const o = task.otel!
  const raw = await decompress(task.body, o.encoding, o.maxBytes)
  let req: ExportRequest
  if (o.json) {
    try {
      req = JSON.parse(Buffer.from(raw.buffer, raw.byteOffset, raw.byteLength).toString('utf8')) as ExportRequest
    } catch {
      throw new DomainError(400, 'Body is not valid JSON')
    }
    if (!req || typeof req !== 'object' || Array.isArray(req))
      throw new DomainError(400, 'Body must be an ExportTraceServiceRequest object')
    if (req.resourceSpans !== undefined && !Array.isArray(req.resourceSpans)) throw new DomainError(400, 'resourceSpans must be a list')
  } else req = decodeProtobuf(Buffer.from(raw.buffer, raw.byteOffset, raw.byteLength))
  const conv = spansToParts(req, o.projectHeader, task.userId, (project) => canAccess(task, project.slice(0, project.indexOf('/'))))
  return { parts: conv.parts, reply: { rejected: conv.rejected, message: conv.errors.join('; ') } }
}
