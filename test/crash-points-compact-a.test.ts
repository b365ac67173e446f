import { crashChain } from './helpers/crash-matrix.js'

// No chat in this file: its servers start without the built-in model (about 1 s of CPU less per start).
process.env.WEFT_MODEL ??= 'none'

// A compaction (past 8 flushed segments, so each armed run writes a dozen small batches), before and after a merged segment is written.
crashChain(
  'crash points of compaction (a)',
  ['compact.before-copy', 'compact.after-range'].map((point) => ({ point })),
)
