import { DomainError } from '../../core/errors.js'
import type { EndedCall, StartedCall } from '../../schemas/calls-write.js'
import { isCallId, isTraceId, uuidv7 } from '../ids.js'
import { USAGE_FIELDS, type CallPart, type UsageRow } from '../model.js'
import { RawJson } from './raw-json.js'

const ISO = /^(\d{4})-(\d{2})-(\d{2})[T ](\d{2}):(\d{2}):(\d{2})(?:[.,](\d{1,9}))?(Z|z|[+-]\d{2}(?::?\d{2})?)?$/

/** ISO 8601 → microseconds since the epoch, exactly (Date keeps only milliseconds). Naive times are UTC. */
export function microsOf(text: string, field: string): string {
  const m = ISO.exec(text)
  if (!m) throw new DomainError(400, `${field} is not an ISO 8601 timestamp: ${JSON.stringify(text.slice(0, 64))}`)
  const [, y, mo, d, h, mi, s, frac, tz] = m
  const ms = Date.UTC(+y!, +mo! - 1, +d!, +h!, +mi!, +s!)
  const check = new Date(ms)
  if (Number.isNaN(ms) || check.getUTCDate() !== +d! || check.getUTCHours() !== +h! || +s! > 59) {
    throw new DomainError(400, `${field} is not a valid date and time: ${JSON.stringify(text)}`)
  }
  let offsetMin = 0
  if (tz && tz !== 'Z' && tz !== 'z') {
    const sign = tz[0] === '-' ? -1 : 1
    const digits = tz.slice(1).replace(':', '')
    offsetMin = sign * (Number(digits.slice(0, 2)) * 60 + Number(digits.slice(2, 4) || '0'))
  }
  const micros = BigInt(ms - offsetMin * 60_000) * 1000n + BigInt((frac ?? '').padEnd(6, '0').slice(0, 6) || '0')
  return micros.toString()
}

function checkCallId(id: string, field: string): void {
  if (!isCallId(id))
    throw new DomainError(400, `Invalid ${field} ${JSON.stringify(id.slice(0, 80))}: expected 16 lowercase hex digits or a lowercase UUID`)
}

/** Every string inside a value that is a Weave ref URI, for the input_refs/output_refs filters. */
export function refsIn(value: unknown, out: Set<string> = new Set(), depth = 0): string[] {
  if (depth > 64) return [...out]
  if (typeof value === 'string') {
    if (value.startsWith('weave:///')) out.add(value)
  } else if (Array.isArray(value)) for (const v of value) refsIn(v, out, depth + 1)
  else if (value && typeof value === 'object') for (const v of Object.values(value)) refsIn(v, out, depth + 1)
  return [...out]
}

/** A JSON-valued field as stored: its text, or the bytes as sent when the fast path kept them. */
function jsonOf(v: unknown): string | RawJson {
  return v instanceof RawJson ? v : JSON.stringify(v)
}

export function startPart(s: StartedCall, userId: string): CallPart {
  const id = s.id ?? uuidv7()
  checkCallId(id, 'call id')
  const traceId = s.trace_id ?? uuidv7()
  if (!isTraceId(traceId))
    throw new DomainError(
      400,
      `Invalid trace_id ${JSON.stringify(traceId.slice(0, 80))}: expected 32 lowercase hex digits or a lowercase UUID`,
    )
  if (s.parent_id) checkCallId(s.parent_id, 'parent_id')
  if (!s.op_name.startsWith('weave:///') && s.op_name.length > 128)
    throw new DomainError(400, 'op_name must be at most 128 characters unless it is an op ref')
  return {
    kind: 'start',
    project_id: s.project_id,
    id,
    trace_id: traceId,
    parent_id: s.parent_id ?? null,
    thread_id: s.thread_id ?? null,
    turn_id: s.turn_id ?? null,
    op_name: s.op_name,
    display_name: s.display_name ?? null,
    started_us: microsOf(s.started_at, 'started_at'),
    attributes: jsonOf(s.attributes),
    inputs: jsonOf(s.inputs),
    // The server sets the user from the API key; a client-sent user id is ignored.
    user_id: userId,
    run_id: s.svc_run_id ?? s.wb_run_id ?? null,
    run_step: s.svc_run_step ?? s.wb_run_step ?? null,
    input_refs: s.inputs instanceof RawJson ? s.inputs.refs : refsIn(s.inputs),
  }
}

export function endPart(e: EndedCall): CallPart {
  checkCallId(e.id, 'call id')
  return {
    kind: 'end',
    project_id: e.project_id,
    id: e.id,
    ended_us: microsOf(e.ended_at, 'ended_at'),
    exception: e.exception ?? null,
    output: e.output === undefined ? 'null' : jsonOf(e.output),
    summary: JSON.stringify(e.summary),
    usage: usageRows(e.summary),
    display_name: e.display_name ?? null,
    run_step_end: e.svc_run_step_end ?? e.wb_run_step_end ?? null,
    output_refs: e.output instanceof RawJson ? e.output.refs : refsIn(e.output),
  }
}

/**
 * The parts of each call within one batch folded into one part, as the merged view reads them: the
 * latest non-null value of each field, ref lists united, the latest delete. An SDK's batch usually
 * holds a call's start and its end; folded, the tail and the segments take half the rows. A part
 * with no other part of its call is passed on as it is (the caller's parts are never changed).
 */
export function foldParts(parts: CallPart[]): CallPart[] {
  const byCall = new Map<string, Map<string, number>>()
  const out: CallPart[] = []
  for (const p of parts) {
    let ids = byCall.get(p.project_id)
    if (!ids) byCall.set(p.project_id, (ids = new Map()))
    const at = ids.get(p.id)
    if (at === undefined) {
      ids.set(p.id, out.length)
      out.push(p)
    } else out[at] = folded(out[at]!, p)
  }
  return out
}

/** b's value unless it has none. */
const pick = <T>(a: T, b: T): T => (b === undefined || b === null ? a : b)

const united = (a: string[] | undefined, b: string[] | undefined): string[] | undefined =>
  b === undefined || b === null ? a : [...new Set(a?.length ? [...a, ...b] : b)]

function laterDelete(a: CallPart['deleted_us'], b: CallPart['deleted_us']): CallPart['deleted_us'] {
  if (b === undefined || b === null) return a
  return a === undefined || a === null || BigInt(b) >= BigInt(a) ? b : a
}

/**
 * Part b folded onto part a (a new object). Written out field by field in one literal, so every folded part has one
 * shape: copying a part and storing b's fields into it by name (Object.entries, keyed stores that changed the copy's
 * shape field by field) was an eighth of an ingest worker's time (bench/README, 2026-12-06 night). A field CallPart
 * does not declare is not carried: test/fold-parts checks the fold against the field-by-field definition.
 */
function folded(a: CallPart, b: CallPart): CallPart {
  return {
    kind: 'merged',
    project_id: a.project_id,
    id: a.id,
    trace_id: pick(a.trace_id, b.trace_id),
    parent_id: pick(a.parent_id, b.parent_id),
    thread_id: pick(a.thread_id, b.thread_id),
    turn_id: pick(a.turn_id, b.turn_id),
    op_name: pick(a.op_name, b.op_name),
    display_name: pick(a.display_name, b.display_name),
    started_us: pick(a.started_us, b.started_us),
    ended_us: pick(a.ended_us, b.ended_us),
    deleted_us: laterDelete(a.deleted_us, b.deleted_us),
    attributes: pick(a.attributes, b.attributes),
    inputs: pick(a.inputs, b.inputs),
    output: pick(a.output, b.output),
    summary: pick(a.summary, b.summary),
    exception: pick(a.exception, b.exception),
    user_id: pick(a.user_id, b.user_id),
    run_id: pick(a.run_id, b.run_id),
    run_step: pick(a.run_step, b.run_step),
    run_step_end: pick(a.run_step_end, b.run_step_end),
    input_refs: united(a.input_refs, b.input_refs),
    output_refs: united(a.output_refs, b.output_refs),
    usage: pick(a.usage, b.usage),
  }
}

/**
 * `summary.usage` ({model: {prompt_tokens, …}}) as typed rows, so statistics never parse JSON.
 * Both provider spellings are kept as sent; a counter that is not a finite number is left out.
 */
export function usageRows(summary: unknown): UsageRow[] | undefined {
  const usage = summary && typeof summary === 'object' ? (summary as Record<string, unknown>).usage : undefined
  if (!usage || typeof usage !== 'object' || Array.isArray(usage)) return undefined
  const rows: UsageRow[] = []
  for (const [model, counts] of Object.entries(usage as Record<string, unknown>)) {
    if (!counts || typeof counts !== 'object' || Array.isArray(counts)) continue
    const row: UsageRow = { model }
    for (const f of USAGE_FIELDS) {
      const v = (counts as Record<string, unknown>)[f]
      if (typeof v === 'number' && Number.isFinite(v)) row[f] = Math.round(v)
    }
    rows.push(row)
  }
  return rows.length ? rows : undefined
}
