// Transpiles test/**/*.ts to dist/test/**/*.js, types stripped and nothing checked: what tap's TypeScript loader
// (ts-node) did in every test process, done once. Each process paid 1.7–2.7 s of CPU for the loader, plus
// transpiling every src/ module it imported, across 100+ files; compiled, a test imports ../src/x.js as the
// already-built dist/src/x.js. Files are rewritten only when their source is newer.
import { mkdirSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs'
import path from 'node:path'
import ts from 'typescript'

const ROOT = process.cwd()
const FROM = path.join(ROOT, 'test')
const TO = path.join(ROOT, 'dist', 'test')

const OPTIONS: ts.CompilerOptions = {
  module: ts.ModuleKind.ESNext,
  target: ts.ScriptTarget.ES2022,
  esModuleInterop: true,
  inlineSourceMap: true,
  inlineSources: true,
}

function sources(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
    const p = path.join(dir, e.name)
    if (e.isDirectory()) return sources(p)
    return e.name.endsWith('.ts') && !e.name.endsWith('.d.ts') ? [p] : []
  })
}

function mtime(file: string): number {
  try {
    return statSync(file).mtimeMs
  } catch {
    return -1
  }
}

/** Output files whose source is gone (a test renamed or deleted) would still run: removed. */
function prune(dir: string, keep: Set<string>): void {
  let entries
  try {
    entries = readdirSync(dir, { withFileTypes: true })
  } catch {
    return
  }
  for (const e of entries) {
    const p = path.join(dir, e.name)
    if (e.isDirectory()) prune(p, keep)
    else if (!keep.has(p)) rmSync(p, { force: true })
  }
}

const files = sources(FROM)
const outputs = new Set<string>()
let built = 0
for (const src of files) {
  const out = path.join(TO, path.relative(FROM, src)).replace(/\.ts$/, '.js')
  outputs.add(out)
  if (mtime(out) >= mtime(src)) continue
  const { outputText, diagnostics } = ts.transpileModule(readFileSync(src, 'utf8'), {
    compilerOptions: OPTIONS,
    fileName: src,
    reportDiagnostics: true,
  })
  if (diagnostics?.length) {
    const msg = diagnostics.map((d) => ts.flattenDiagnosticMessageText(d.messageText, '\n')).join('\n')
    throw new Error(`${path.relative(ROOT, src)}: ${msg}`)
  }
  mkdirSync(path.dirname(out), { recursive: true })
  writeFileSync(out, outputText)
  built++
}
prune(TO, outputs)
process.stdout.write(`tests: ${built} of ${files.length} transpiled to ${path.relative(ROOT, TO)}\n`)
