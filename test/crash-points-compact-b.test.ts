import { crashChain } from './helpers/crash-matrix.js'

// A compaction (past 8 flushed segments, so each armed run writes a dozen small batches), around the manifest swap that ends it.
crashChain(
  'crash points of compaction (b)',
  ['compact.before-manifest', 'compact.after-manifest'].map((point) => ({ point })),
)
