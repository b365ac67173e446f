import type { CallPart } from '../../src/calls/model.js'

/**
 * n plain calls of a project (start and end folded into one part), numbered from `from`: ids in start-time order
 * (as UUIDv7 ids are, so exports read them in windows), a millisecond apart, five ops, `inputs(i)` as their inputs.
 */
export function plainCalls(project: string, from: number, n: number, inputs: (i: number) => unknown): CallPart[] {
  return Array.from({ length: n }, (_, k) => {
    const i = from + k
    return {
      kind: 'merged' as const,
      project_id: project,
      id: i.toString(16).padStart(16, '0'),
      trace_id: i.toString(16).padStart(32, '0'),
      op_name: `op${i % 5}`,
      started_us: String(1_700_000_000_000_000 + i * 1000),
      ended_us: String(1_700_000_000_000_000 + i * 1000 + 500),
      inputs: JSON.stringify(inputs(i)),
    }
  })
}
