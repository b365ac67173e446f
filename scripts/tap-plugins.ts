// Builds tap's plugin set (package.json "tap.plugin") before the first run of a fresh clone.
//
// tap rebuilds its plugins when the configured set differs from the built one, but only after the runner has loaded
// the old set: the test processes of that first run still get the default loaders, @tapjs/typescript among them
// (ts-node, ~1.1 s of CPU and ~100 MB per test process, for tests that are already JavaScript). CI runs a fresh
// clone every time, so every CI run paid it. Building first (what the runner would do anyway, ~13 s of CPU) lets the
// run itself use the configured set.
import { spawnSync } from 'node:child_process'
import { existsSync } from 'node:fs'
import path from 'node:path'

const root = process.cwd()
if (!existsSync(path.join(root, '.tap', 'plugins', 'package.json'))) {
  const tap = path.join(root, 'node_modules', '.bin', 'tap')
  const r = spawnSync(tap, ['build'], { stdio: ['ignore', 'ignore', 'inherit'] })
  if (r.status !== 0) {
    console.error(`tap build failed (${r.status ?? r.signal}); the tests run with tap's default plugins`)
  }
}
