/**
 * The house rules a reader can check (docs/architecture.md): no source file over MAX_FILE_LINES lines and no
 * function over MAX_FUNCTION_LINES, except a function whose leading comment says why with
 * `house: long because …`. Import direction and cycles are dependency-cruiser's (.dependency-cruiser.cjs),
 * formatting is prettier's. Prints what breaks a rule; exits 1 if anything does.
 *
 *   node dist/scripts/house.js [--json]
 */
import fs from 'node:fs'
import path from 'node:path'
import ts from 'typescript'

export const MAX_FILE_LINES = 500
export const MAX_FUNCTION_LINES = 60
const ROOTS = ['src', 'workers']

export interface Finding {
  file: string
  line: number
  what: 'file' | 'function'
  name: string
  lines: number
  excused?: string
}

function sourceFiles(root: string): string[] {
  const out: string[] = []
  const walk = (dir: string) => {
    for (const e of fs.readdirSync(dir, { withFileTypes: true })) {
      const p = path.join(dir, e.name)
      if (e.isDirectory()) walk(p)
      else if (e.name.endsWith('.ts') && !e.name.endsWith('.d.ts')) out.push(p)
    }
  }
  for (const r of ROOTS) if (fs.existsSync(path.join(root, r))) walk(path.join(root, r))
  return out.sort()
}

function functionName(node: ts.Node): string {
  const named = node as ts.Node & { name?: ts.Node }
  if (named.name && ts.isIdentifier(named.name)) return named.name.text
  if (named.name && ts.isPrivateIdentifier(named.name)) return named.name.text
  const parent = node.parent
  if (parent && ts.isVariableDeclaration(parent) && ts.isIdentifier(parent.name)) return parent.name.text
  if (parent && ts.isPropertyAssignment(parent) && ts.isIdentifier(parent.name)) return parent.name.text
  if (ts.isConstructorDeclaration(node)) return 'constructor'
  return '(anonymous)'
}

/** The `house: long because …` reason in the comments just above a function (or its statement), if any. */
function excuse(node: ts.Node, text: string): string | undefined {
  let at: ts.Node = node
  while (at.parent && !ts.isSourceFile(at.parent) && !ts.isClassLike(at.parent) && !ts.isBlock(at.parent)) at = at.parent
  const ranges = ts.getLeadingCommentRanges(text, at.getFullStart()) ?? []
  for (const r of ranges) {
    const m = /house: (long because[^\n*]*)/.exec(text.slice(r.pos, r.end))
    if (m) return m[1]!.trim()
  }
  return undefined
}

export function check(root: string): Finding[] {
  const findings: Finding[] = []
  for (const file of sourceFiles(root)) {
    const text = fs.readFileSync(file, 'utf8')
    const rel = path.relative(root, file)
    const sf = ts.createSourceFile(file, text, ts.ScriptTarget.Latest, true)
    const total = sf.getLineAndCharacterOfPosition(text.length).line + (text.endsWith('\n') ? 0 : 1)
    if (total > MAX_FILE_LINES) findings.push({ file: rel, line: 1, what: 'file', name: rel, lines: total })
    const visit = (node: ts.Node) => {
      if (ts.isFunctionLike(node) && (node as ts.FunctionLikeDeclaration).body) {
        const start = sf.getLineAndCharacterOfPosition(node.getStart(sf)).line
        const end = sf.getLineAndCharacterOfPosition(node.getEnd()).line
        const lines = end - start + 1
        if (lines > MAX_FUNCTION_LINES) {
          findings.push({ file: rel, line: start + 1, what: 'function', name: functionName(node), lines, excused: excuse(node, text) })
        }
      }
      ts.forEachChild(node, visit)
    }
    visit(sf)
  }
  return findings
}

const isMain =
  process.argv[1] &&
  path.resolve(process.argv[1]).replace(/\.ts$/, '.js') === path.resolve(new URL(import.meta.url).pathname).replace(/\.ts$/, '.js')
if (isMain) {
  const root = path.resolve(path.dirname(new URL(import.meta.url).pathname), '..', '..')
  const findings = check(fs.existsSync(path.join(root, 'src')) ? root : process.cwd())
  if (process.argv.includes('--json')) process.stdout.write(JSON.stringify(findings, null, 1) + '\n')
  else
    for (const f of findings)
      process.stdout.write(
        `${f.excused ? 'excused ' : 'BREAKS  '} ${f.file}:${f.line} ${f.what} ${f.name} ${f.lines} lines${f.excused ? ` (${f.excused})` : ''}\n`,
      )
  const broken = findings.filter((f) => !f.excused)
  process.stdout.write(
    `${broken.length} over the limits (${MAX_FILE_LINES} lines a file, ${MAX_FUNCTION_LINES} a function), ${findings.length - broken.length} excused\n`,
  )
  process.exitCode = broken.length ? 1 : 0
}
