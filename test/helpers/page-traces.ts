import type { CallPart } from '../../src/calls/model.js'
import { traceParts } from './merge-order.js'

const HOUR_US = 3_600_000_000n

/** Random traces, each moved by whole hours (so page-index row groups and blocks cover different times), with ties kept. */
export function hourTraces(project: string, n: number, r: () => number): CallPart[] {
  return Array.from({ length: n }, () => {
    const shift = BigInt(Math.floor(r() * 500)) * HOUR_US
    const move = (v: string | number | null | undefined) => (v === null || v === undefined ? v : String(BigInt(v) + shift))
    return traceParts(project, r).map((p) => ({ ...p, started_us: move(p.started_us), ended_us: move(p.ended_us) }))
  }).flat()
}
