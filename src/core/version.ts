import { readFileSync } from 'node:fs'
import path from 'node:path'
import { fileURLToPath } from 'node:url'

/** The repository root: the nearest directory above this module holding weft's package.json. */
function findRoot(): { root: string; version: string } {
  let dir = path.dirname(fileURLToPath(import.meta.url))
  for (;;) {
    try {
      const pkg = JSON.parse(readFileSync(path.join(dir, 'package.json'), 'utf8')) as { name?: string; version?: string }
      if (pkg.name === 'weft') return { root: dir, version: pkg.version ?? '0.0.0' }
    } catch {
      // not here; keep walking up
    }
    const up = path.dirname(dir)
    if (up === dir) throw new Error('cannot find weft package.json above ' + fileURLToPath(import.meta.url))
    dir = up
  }
}

const found = findRoot()
export const ROOT_DIR = found.root
export const VERSION = found.version
/** The oldest Python weave SDK whose server checks we satisfy (the Python SDK reads /server_info). */
export const MIN_WEAVE_PYTHON_VERSION = '0.51.0'
