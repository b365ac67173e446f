import { DomainError } from '../../core/errors.js'
import type { CompletedCall } from '../../schemas/v2-runs.js'
import { endPart, startPart } from '../ingest/parts.js'
import type { CallPart } from '../model.js'
import { write, type EvalDeps, type Scope } from './shared.js'

/** A call sent whole as the start and end parts the call API would have written for it. */
function partsOf(s: Scope, c: CompletedCall, i: number): CallPart[] {
  if (c.project_id !== s.project)
    throw new DomainError(400, `batch[${i}].project_id ${JSON.stringify(c.project_id)} is not this path's project (${s.project})`)
  const start = startPart(
    {
      project_id: c.project_id,
      id: c.id,
      trace_id: c.trace_id,
      parent_id: c.parent_id,
      thread_id: c.thread_id,
      turn_id: c.turn_id,
      op_name: c.op_name,
      display_name: c.display_name,
      started_at: c.started_at,
      attributes: c.attributes,
      inputs: c.inputs,
      svc_run_id: c.svc_run_id ?? c.wb_run_id,
      svc_run_step: c.svc_run_step ?? c.wb_run_step,
    },
    s.userId,
  )
  const end = endPart({
    project_id: c.project_id,
    id: c.id,
    ended_at: c.ended_at,
    exception: c.exception,
    output: c.output === undefined ? null : c.output,
    summary: c.summary,
    svc_run_step_end: c.svc_run_step_end ?? c.wb_run_step_end,
  })
  return [start, end]
}

/** Every call is checked before any is written; then the batch is one acknowledged write. */
export async function completeCalls(d: EvalDeps, s: Scope, batch: CompletedCall[]): Promise<Record<string, never>> {
  const parts = batch.flatMap((c, i) => partsOf(s, c, i))
  await write(d, parts)
  return {}
}
