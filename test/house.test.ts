/**
 * The house rules, checked on every `npm test` (docs/architecture.md):
 * - imports run downhill and nothing imports in a circle, between files or between folders
 *   (dependency-cruiser with .dependency-cruiser.cjs, plus the folder graph computed here);
 * - no source file over 500 lines, no function over 60 unless its comment says why (scripts/house.ts).
 * The formatting (prettier) and the tests' type check are in test/house-format and test/house-types.
 */
import { execFileSync } from 'node:child_process'
import { readdirSync, readFileSync } from 'node:fs'
import path from 'node:path'
import t from 'tap'
import { check, MAX_FILE_LINES, MAX_FUNCTION_LINES } from '../scripts/house.js'
import { bin } from './helpers/house-tool.js'
import { ROOT } from './helpers/server.js'

/** What statistics must not name: the store's view of parts, a part's seq, its DuckDB connection. */
const STORE_INTERNALS: [string, RegExp][] = [
  ['the parts view all_parts', /\ball_parts\b/],
  ['the seq column of parts', /\bseq\s*(<=|>=|<|>|=)/],
  ['a DuckDB connection', /\bDuckDBConnection\b|\.connect\(/],
]

interface Cruised {
  modules: { source: string; dependencies: { resolved: string; coreModule: boolean; couldNotResolve: boolean }[] }[]
  summary: { violations: { rule: { name: string }; from: string; to: string; cycle?: { name: string }[] }[] }
}

let cruised: Cruised | undefined
/** One cruise for every test here (it takes seconds). */
function cruise(): Cruised {
  if (cruised) return cruised
  const out = execFileSync(bin('depcruise'), ['src', 'workers', '--config', '.dependency-cruiser.cjs', '--output-type', 'json'], {
    cwd: ROOT,
    maxBuffer: 64 * 2 ** 20,
  })
  cruised = JSON.parse(out.toString()) as Cruised
  return cruised
}

/** Strongly connected components of more than one node (Tarjan): the cycles of a graph. */
export function cycles(graph: Map<string, Set<string>>): string[][] {
  let index = 0
  const idx = new Map<string, number>()
  const low = new Map<string, number>()
  const stack: string[] = []
  const on = new Set<string>()
  const out: string[][] = []
  const visit = (v: string) => {
    idx.set(v, index)
    low.set(v, index++)
    stack.push(v)
    on.add(v)
    for (const w of graph.get(v) ?? []) {
      if (!idx.has(w)) {
        visit(w)
        low.set(v, Math.min(low.get(v)!, low.get(w)!))
      } else if (on.has(w)) low.set(v, Math.min(low.get(v)!, idx.get(w)!))
    }
    if (low.get(v) === idx.get(v)) {
      const scc: string[] = []
      for (let w = stack.pop()!; ; w = stack.pop()!) {
        on.delete(w)
        scc.push(w)
        if (w === v) break
      }
      if (scc.length > 1) out.push(scc.sort())
    }
  }
  for (const v of graph.keys()) if (!idx.has(v)) visit(v)
  return out
}

/** The import graph between folders, at one depth below src/ (1: src/calls; 2: src/calls/read). */
function folderGraph(c: Cruised, depth: number): Map<string, Set<string>> {
  const folder = (file: string) =>
    path
      .dirname(file)
      .split('/')
      .slice(0, depth + 1)
      .join('/')
  const g = new Map<string, Set<string>>()
  for (const m of c.modules) {
    if (!m.source.startsWith('src/')) continue
    const from = folder(m.source)
    if (!g.has(from)) g.set(from, new Set())
    for (const d of m.dependencies) {
      if (d.coreModule || d.couldNotResolve || !d.resolved.startsWith('src/')) continue
      const to = folder(d.resolved)
      if (to !== from && !from.startsWith(to + '/') && !to.startsWith(from + '/')) g.get(from)!.add(to)
    }
  }
  return g
}

t.test('imports run downhill, with no cycle between files', async (t) => {
  const c = cruise()
  t.ok(c.modules.length > 50, `${c.modules.length} modules cruised`)
  const violations = c.summary.violations.map(
    (v) => `${v.rule.name}: ${v.from} → ${v.to}${v.cycle ? ` (${v.cycle.map((x) => x.name).join(' → ')})` : ''}`,
  )
  t.same(violations, [], 'dependency-cruiser finds no violation')
})

t.test('no cycle between folders', async (t) => {
  const c = cruise()
  for (const depth of [1, 2]) t.same(cycles(folderGraph(c, depth)), [], `folders at depth ${depth} below src/`)
})

t.test('the cycle finder finds cycles', async (t) => {
  const g = new Map([
    ['a', new Set(['b'])],
    ['b', new Set(['c'])],
    ['c', new Set(['a'])],
    ['d', new Set(['a'])],
  ])
  t.same(cycles(g), [['a', 'b', 'c']])
  t.same(
    cycles(
      new Map([
        ['a', new Set(['b'])],
        ['b', new Set<string>()],
      ]),
    ),
    [],
  )
})

t.test('statistics read calls through calls/source.ts only: no table, seq column or connection of the store', async (t) => {
  const dir = path.join(ROOT, 'src', 'stats')
  const found: string[] = []
  for (const f of readdirSync(dir).filter((x) => x.endsWith('.ts'))) {
    const text = readFileSync(path.join(dir, f), 'utf8')
    for (const [what, re] of STORE_INTERNALS) if (re.test(text)) found.push(`src/stats/${f}: ${what}`)
  }
  t.same(found, [], 'no file under src/stats/ names the internals of the store')
  // Each pattern finds what it names where it is used (the calls store), so a silent regex cannot pass this.
  const calls = ['read/facts.ts', 'storage/storage.ts'].map((f) => readFileSync(path.join(ROOT, 'src', 'calls', f), 'utf8')).join('\n')
  for (const [what, re] of STORE_INTERNALS) t.ok(re.test(calls), `the pattern for ${what} finds it in src/calls/`)
})

t.test(`no file over ${MAX_FILE_LINES} lines, no function over ${MAX_FUNCTION_LINES} unless excused`, async (t) => {
  const findings = check(ROOT)
  const broken = findings.filter((f) => !f.excused).map((f) => `${f.file}:${f.line} ${f.what} ${f.name} (${f.lines} lines)`)
  t.same(broken, [], 'every long file and function')
  for (const f of findings.filter((x) => x.excused)) t.comment(`excused: ${f.file}:${f.line} ${f.name} (${f.lines} lines): ${f.excused}`)
})
