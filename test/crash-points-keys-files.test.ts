import { crashChain } from './helpers/crash-matrix.js'
import type { Kind } from './helpers/crash.js'

// A catalog write killed before and after its commit: keys and files; a file between its bytes and its row.
const kinds: Kind[] = ['key', 'file']
crashChain('crash points of catalog writes: keys, files', [
  ...kinds.flatMap((k) => [
    { point: 'catalog.before-commit', kinds: [k] },
    { point: 'catalog.after-commit', kinds: [k] },
  ]),
  { point: 'files.after-data', kinds: ['file'] },
])
