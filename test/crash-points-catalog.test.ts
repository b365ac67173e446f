import { crashChain } from './helpers/crash-matrix.js'
import type { Kind } from './helpers/crash.js'

// No chat in this file: its servers start without the built-in model (about 1 s of CPU less per start).
process.env.WEFT_MODEL ??= 'none'

// A catalog write killed before and after its commit: objects, tables, feedback.
const kinds: Kind[] = ['object', 'table', 'feedback']
crashChain(
  'crash points of catalog writes: objects, tables, feedback',
  kinds.flatMap((k) => [
    { point: 'catalog.before-commit', kinds: [k] },
    { point: 'catalog.after-commit', kinds: [k] },
  ]),
)
