import { crashChain } from './helpers/crash-matrix.js'

// No chat in this file: its servers start without the built-in model (about 1 s of CPU less per start).
process.env.WEFT_MODEL ??= 'none'

// Every step of a flush (tail → segment).
crashChain(
  'crash points of flush',
  ['flush.after-switch', 'flush.before-copy', 'flush.after-copy', 'flush.after-rename', 'flush.after-manifest'].map((point) => ({ point })),
)
