import type { ChParams } from './query/params.js'
import type { RollupTier } from './stats-tiers.js'

/** The rollup project, the filter on the rollup's dimensions, and the slots' hours: a condition and the bucket of a row's `hour`. */
export interface Slots {
  p: string
  dims: string[]
  /** The row's hour is one of the slots' (a key range the index prunes by, then a hash lookup). */
  inHours: string
  /** The row's bucket start. */
  bucketOf: string
  /** Which rollups the rows come from (the op tier, or users and runs too). */
  tier: RollupTier
}

/**
 * The whole hours and their buckets as bound arrays. A lookup by `transform` (a hash map) rather than
 * `has`/`indexOf` (a linear search of ~720 hours for every rollup row: most of a 30-day read's time).
 */
export function slotParams(project: string, slots: [number, number][], dims: string[], params: ChParams, tier: RollupTier = 'op'): Slots {
  const hs = slots.map(([h]) => h)
  const hours = params.add(hs, 'Array(Int64)')
  const buckets = params.add(
    slots.map(([, b]) => b),
    'Array(Int64)',
  )
  const lo = params.add(hs.length ? Math.min(...hs) : 0, 'Int64')
  const hi = params.add(hs.length ? Math.max(...hs) : -1, 'Int64')
  const bucketOf = `transform(hour, ${hours}, ${buckets}, toInt64(-1))`
  return { p: params.add(project, 'String'), dims, tier, bucketOf, inHours: `hour >= ${lo} AND hour <= ${hi} AND ${bucketOf} != -1` }
}
