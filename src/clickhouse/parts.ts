import { USAGE_FIELDS, type CallPart } from '../calls/model.js'
import { RawJson } from '../calls/ingest/raw-json.js'
import { isoFromMicros } from '../core/time.js'
import type { Row } from './executor.js'

/** Microseconds since the epoch → `YYYY-MM-DD hh:mm:ss.ffffff`, DateTime64(6)'s plain text form (UTC). */
function ts(us: string | number | null | undefined): string | null {
  if (us === null || us === undefined) return null
  return isoFromMicros(BigInt(us))!.replace('T', ' ').slice(0, -1)
}

function json(v: string | RawJson | null | undefined): string | null {
  if (v === null || v === undefined) return null
  return v instanceof RawJson ? Buffer.from(v.bytes).toString('utf8') : v
}

/** A part as produced by calls/ingest (parts.ts) → a call_parts row (JSONEachRow), with its arrival `seq`. */
export function partRow(p: CallPart, seq: bigint): Row {
  return {
    project_id: p.project_id,
    id: p.id,
    seq: seq.toString(),
    kind: p.kind,
    trace_id: p.trace_id ?? null,
    parent_id: p.parent_id ?? null,
    thread_id: p.thread_id ?? null,
    turn_id: p.turn_id ?? null,
    op_name: p.op_name ?? null,
    display_name: p.display_name ?? null,
    started_at: ts(p.started_us),
    ended_at: ts(p.ended_us),
    deleted_at: ts(p.deleted_us),
    attributes: json(p.attributes),
    inputs: json(p.inputs),
    output: json(p.output),
    summary: p.summary ?? null,
    exception: p.exception ?? null,
    user_id: p.user_id ?? null,
    run_id: p.run_id ?? null,
    run_step: p.run_step ?? null,
    run_step_end: p.run_step_end ?? null,
    input_refs: p.input_refs ?? [],
    output_refs: p.output_refs ?? [],
    usage: (p.usage ?? []).map((u) => ({ model: u.model, ...Object.fromEntries(USAGE_FIELDS.map((f) => [f, u[f] ?? null])) })),
  }
}

/**
 * Arrival order for parts: microseconds of the wall clock, never going back within this process
 * (one more than the last when the clock stalls or steps back). Several servers writing one call's
 * parts rely on their clocks agreeing to the microsecond only for parts that race each other.
 */
export class SeqClock {
  private last = 0n
  next(): bigint {
    const now = BigInt(Date.now()) * 1000n
    this.last = now > this.last ? now : this.last + 1n
    return this.last
  }
}
