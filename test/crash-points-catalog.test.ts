import { crashChain } from './helpers/crash-matrix.js'
import type { Kind } from './helpers/crash.js'

// A catalog write killed before and after its commit: objects, tables, feedback.
const kinds: Kind[] = ['object', 'table', 'feedback']
crashChain(
  'crash points of catalog writes: objects, tables, feedback',
  kinds.flatMap((k) => [
    { point: 'catalog.before-commit', kinds: [k] },
    { point: 'catalog.after-commit', kinds: [k] },
  ]),
)
