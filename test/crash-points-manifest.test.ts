import { rm } from 'node:fs/promises'
import path from 'node:path'
import { crashChain } from './helpers/crash-matrix.js'

// No chat in this file: its servers start without the built-in model (about 1 s of CPU less per start).
process.env.WEFT_MODEL ??= 'none'

// The manifest swap (reached by a flush's log switch), the end of a flush, and the rollups' commits: the catch-up
// a start runs after a crash, and a full rebuild (its file removed).
crashChain('crash points of manifest swap and rollup commit', [
  { point: 'manifest.before-rename' },
  { point: 'manifest.after-rename' },
  { point: 'flush.after-wal-delete' },
  { point: 'rollups.before-commit', atStart: true },
  {
    point: 'rollups.rebuild-before-commit',
    atStart: true,
    before: (dataDir) => rm(path.join(dataDir, 'rollups'), { recursive: true, force: true }),
  },
])
