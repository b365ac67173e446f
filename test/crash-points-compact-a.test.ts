import { crashChain } from './helpers/crash-matrix.js'

// A compaction (past 8 flushed segments, so each armed run writes a dozen small batches), before and after a merged segment is written.
crashChain(
  'crash points of compaction (a)',
  ['compact.before-copy', 'compact.after-range'].map((point) => ({ point })),
)
