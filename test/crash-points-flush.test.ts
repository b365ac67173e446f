import { crashChain } from './helpers/crash-matrix.js'

// Every step of a flush (tail → segment).
crashChain(
  'crash points of flush',
  ['flush.after-switch', 'flush.before-copy', 'flush.after-copy', 'flush.after-rename', 'flush.after-manifest'].map((point) => ({ point })),
)
