import t from 'tap'
import { mergeOrderCase } from './helpers/merge-order.js'

// Split from calls-merge-order.test.ts so each file stays well inside tap's per-file timeout on a loaded machine.
for (const [flushRows, maxSegments, compactParts] of [
  [1_000_000, 8, 2_000_000],
  [7, 1000, 2_000_000],
])
  t.test(
    `the merged view does not depend on the order parts arrive in (flush every ${flushRows} parts, compact past ${maxSegments} segments of ${compactParts} parts)`,
    (t) => mergeOrderCase(t, flushRows, maxSegments, compactParts),
  )
