import { isoFromMicros } from '../../core/time.js'
import type { CallRecord } from '../model.js'

const parse = (v: unknown) => (v === null || v === undefined ? null : JSON.parse(String(v)))

/** A row of SELECT_OUT as the API returns a call (docs/calls-and-storage.md), with the derived summary.weave. */
export function toCall(r: Record<string, unknown>): CallRecord {
  const summary = (parse(r.summary) as Record<string, unknown> | null) ?? {}
  const weave: Record<string, unknown> = { ...((summary.weave as Record<string, unknown>) ?? {}) }
  weave.status = r.d_status
  weave.trace_name = r.d_trace_name
  if (r.d_latency !== null && r.d_latency !== undefined) weave.latency_ms = Number(r.d_latency)
  if (r.display_name) weave.display_name = r.display_name
  return {
    id: r.id,
    project_id: r.project_id,
    op_name: r.op_name,
    display_name: r.display_name ?? null,
    trace_id: r.trace_id,
    parent_id: r.parent_id ?? null,
    thread_id: r.thread_id ?? null,
    turn_id: r.turn_id ?? null,
    started_at: isoFromMicros(r.started_us as bigint),
    ended_at: isoFromMicros((r.ended_us as bigint) ?? null),
    attributes: parse(r.attributes) ?? {},
    inputs: parse(r.inputs) ?? {},
    output: parse(r.output),
    exception: r.exception ?? null,
    summary: { ...summary, weave },
    svc_user_id: r.user_id ?? null,
    svc_run_id: r.run_id ?? null,
    svc_run_step: r.run_step === null || r.run_step === undefined ? null : Number(r.run_step),
    svc_run_step_end: r.run_step_end === null || r.run_step_end === undefined ? null : Number(r.run_step_end),
    deleted_at: null,
  }
}
