import { crashChain } from './helpers/crash-matrix.js'

// No chat in this file: its servers start without the built-in model (about 1 s of CPU less per start).
process.env.WEFT_MODEL ??= 'none'

// A compaction (past 8 flushed segments, so each armed run writes a dozen small batches): before and after a merged
// segment is written, then around the manifest swap that ends it. One chain (one clean start before the points and
// one after them): the compaction's two halves were once two files, each paying for its own pair of starts.
crashChain(
  'crash points of compaction',
  ['compact.before-copy', 'compact.after-range', 'compact.before-manifest', 'compact.after-manifest'].map((point) => ({ point })),
)
