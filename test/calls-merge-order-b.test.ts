import t from 'tap'
import { mergeOrderCase } from './helpers/merge-order.js'

// Split from calls-merge-order.test.ts so each file stays well inside tap's per-file timeout on a loaded machine.
for (const [flushRows, maxSegments, compactParts] of [
  [7, 2, 2_000_000],
  // Compaction split into many id ranges (one segment each), as a large store's is.
  [7, 2, 400],
])
  t.test(
    `the merged view does not depend on the order parts arrive in (flush every ${flushRows} parts, compact past ${maxSegments} segments of ${compactParts} parts)`,
    (t) => mergeOrderCase(t, flushRows, maxSegments, compactParts),
  )
