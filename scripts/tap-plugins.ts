// Builds tap's plugin set (package.json "tap.plugin") before a fresh install's first run.
//
// tap rebuilds its plugins when the configured set differs from the built one, but only after the runner has loaded
// the old set: that run's test processes still get the default loaders, @tapjs/typescript (ts-node, ~1.1 s of CPU
// and ~100 MB per test process, for tests that are already JavaScript) and @tapjs/mock (~0.4 s) among them. CI
// installs fresh every time, so every CI run paid it. Building first (what the runner would do anyway, ~13 s of
// CPU) lets the run itself use the configured set.
import { spawnSync } from 'node:child_process'
import { readFileSync } from 'node:fs'
import path from 'node:path'

const root = process.cwd()
const configured = (JSON.parse(readFileSync(path.join(root, 'package.json'), 'utf8')) as { tap?: { plugin?: string[] } }).tap?.plugin ?? []
// The built set: tap writes it into @tapjs/test's test-built module as `export const signature = \`a\nb…\``.
const built = readFileSync(path.join(root, 'node_modules', '@tapjs', 'test', 'test-built', 'dist', 'esm', 'index.js'), 'utf8')
const signature = new Set(/export const signature = `([^`]*)`/.exec(built)?.[1]?.split('\n') ?? [])
const stale = configured.some((p) => (p.startsWith('!') ? signature.has(p.slice(1)) : !signature.has(p)))
if (stale) {
  const r = spawnSync(path.join(root, 'node_modules', '.bin', 'tap'), ['build'], { stdio: ['ignore', 'ignore', 'inherit'] })
  if (r.status !== 0) console.error(`tap build failed (${r.status ?? r.signal}); the tests run with tap's default plugins`)
}
