import { endPart, startPart, type CallPart } from '../../src/index.js'
import type { CallStatsReq } from '../../src/schemas/calls.js'

/** The calls of test/rollups-catch-up and its child process (catch-up-child.ts). */
export const CATCH_UP_PROJECT = 'e/catch-up'
export const CATCH_UP_REQ: CallStatsReq = {
  project_id: CATCH_UP_PROJECT,
  start: '2026-05-01T00:00:00Z',
  end: '2026-05-03T00:00:00Z',
  granularity: 86400,
  call_metrics: [
    { metric: 'latency_ms', aggregations: ['sum', 'count'] },
    { metric: 'call_count', aggregations: ['sum'] },
  ],
  usage_metrics: [{ metric: 'input_tokens' }],
}

/** What was sent of a call: its start and end (epoch ms; null while running) and whether it was deleted. */
export interface Sent {
  id: string
  started: number
  ended: number | null
  deleted?: boolean
}

export const catchUpId = (k: number) => `01900000-0000-7000-c000-${k.toString(16).padStart(12, '0')}`

/** Calls from..from+n-1 (start and end parts; every fifth still running), recorded in `sent`. */
export function catchUpCalls(sent: Map<string, Sent>, from: number, n: number): CallPart[] {
  const parts: CallPart[] = []
  for (let k = from; k < from + n; k++) {
    const id = catchUpId(k)
    const started = Date.parse(CATCH_UP_REQ.start!) + k * 500_000
    const ended = k % 5 === 4 ? null : started + 7 * k + 3
    sent.set(id, { id, started, ended })
    parts.push(
      startPart(
        {
          project_id: CATCH_UP_PROJECT,
          id,
          trace_id: id,
          op_name: `op${k % 3}`,
          started_at: new Date(started).toISOString(),
          attributes: {},
          inputs: {},
        },
        'me',
      ),
    )
    if (ended !== null) parts.push(endOf(id, ended, k))
  }
  return parts
}

/** An end part of call `id` at `ended` (epoch ms), with some usage. */
export function endOf(id: string, ended: number, tokens: number): CallPart {
  return endPart({
    project_id: CATCH_UP_PROJECT,
    id,
    ended_at: new Date(ended).toISOString(),
    summary: { usage: { m: { prompt_tokens: tokens } } },
  })
}
