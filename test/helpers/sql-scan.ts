import fs from 'node:fs'
import path from 'node:path'
import ts from 'typescript'

/**
 * Finds SQL text built from values: every template literal (and `'…' + x` concatenation) in src/ whose literal
 * text reads as SQL, and in it every interpolated expression that is not known to produce constant text.
 * Known constant: a placeholder (`params.add(v)`, `$${n}`), a number, an UPPER_CASE constant, a local `const`
 * bound to literal text, or a line marked `// sql: <reason>`. Whatever is left is reported for review.
 */

export interface Interpolation {
  file: string
  line: number
  expr: string
}

const SQLISH =
  /\b(SELECT|INSERT|UPDATE|DELETE FROM|FROM|WHERE|CREATE|DROP|ATTACH|DETACH|COPY|ORDER BY|GROUP BY|JOIN|VALUES|LIMIT|UNION|read_parquet|list_contains)\b/
const CONSTANT_NAME = /^[A-Z][A-Z0-9_]*$/
/** Calls that answer a bind placeholder (`$n` / `?`) for the value they are given. */
const PLACEHOLDER_CALL = /^([\w.]*\.)?(params|out|p|ps)\.(add|push)$|^(bind|param|placeholder)$/

export function sourceFiles(dir: string): string[] {
  const out: string[] = []
  for (const e of fs.readdirSync(dir, { withFileTypes: true })) {
    const p = path.join(dir, e.name)
    if (e.isDirectory()) out.push(...sourceFiles(p))
    else if (e.name.endsWith('.ts') && !e.name.endsWith('.d.ts')) out.push(p)
  }
  return out
}

/** `const NAME = 'literal'` (or a template of constants) declarations of a file, by name. */
function constantsOf(sf: ts.SourceFile): Set<string> {
  const names = new Set<string>()
  const visit = (n: ts.Node) => {
    if (ts.isVariableDeclaration(n) && ts.isIdentifier(n.name) && n.initializer && ts.isVariableDeclarationList(n.parent)) {
      const isConst = (n.parent.flags & ts.NodeFlags.Const) !== 0
      const init = n.initializer
      if (isConst && (ts.isStringLiteral(init) || ts.isNoSubstitutionTemplateLiteral(init) || ts.isNumericLiteral(init)))
        names.add(n.name.text)
    }
    ts.forEachChild(n, visit)
  }
  visit(sf)
  return names
}

function isConstant(e: ts.Expression, consts: Set<string>): boolean {
  if (ts.isParenthesizedExpression(e)) return isConstant(e.expression, consts)
  if (ts.isNumericLiteral(e) || ts.isStringLiteral(e) || ts.isNoSubstitutionTemplateLiteral(e)) return true
  if (ts.isIdentifier(e)) return CONSTANT_NAME.test(e.text) || consts.has(e.text)
  if (ts.isPropertyAccessExpression(e))
    return e.name.text === 'length' || (ts.isIdentifier(e.expression) && CONSTANT_NAME.test(e.expression.text))
  if (ts.isElementAccessExpression(e)) return ts.isIdentifier(e.expression) && CONSTANT_NAME.test(e.expression.text)
  if (ts.isConditionalExpression(e)) return isConstant(e.whenTrue, consts) && isConstant(e.whenFalse, consts)
  if (ts.isTemplateExpression(e)) return e.templateSpans.every((s) => isConstant(s.expression, consts))
  if (ts.isCallExpression(e)) return PLACEHOLDER_CALL.test(e.expression.getText())
  return false
}

/** The interpolations of SQL-looking templates and concatenations in one file that are not known constants. */
export function scanFile(file: string, root: string): Interpolation[] {
  const text = fs.readFileSync(file, 'utf8')
  const sf = ts.createSourceFile(file, text, ts.ScriptTarget.Latest, true)
  const consts = constantsOf(sf)
  const lines = text.split('\n')
  const marked = (line: number) => /\/\/ sql: \S/.test(lines[line] ?? '') || /^\s*\/\/ sql: \S/.test(lines[line - 1] ?? '')
  const out: Interpolation[] = []
  const report = (e: ts.Expression, prev: string) => {
    // `$${n}`: a placeholder number.
    if (prev.endsWith('$') || isConstant(e, consts)) return
    const line = sf.getLineAndCharacterOfPosition(e.getStart()).line
    if (marked(line)) return
    out.push({ file: path.relative(root, file), line: line + 1, expr: e.getText().replace(/\s+/g, ' ') })
  }
  const visit = (n: ts.Node) => {
    if (ts.isTemplateExpression(n)) {
      const literal = n.head.text + ' ' + n.templateSpans.map((s) => s.literal.text).join(' ')
      if (SQLISH.test(literal)) {
        let prev = n.head.text
        for (const s of n.templateSpans) {
          report(s.expression, prev)
          prev = s.literal.text
        }
      }
    } else if (ts.isBinaryExpression(n) && n.operatorToken.kind === ts.SyntaxKind.PlusToken) {
      const sides = [n.left, n.right]
      if (sides.some((s) => ts.isStringLiteral(s) && SQLISH.test(s.text))) for (const s of sides) if (!ts.isStringLiteral(s)) report(s, '')
    }
    ts.forEachChild(n, visit)
  }
  visit(sf)
  return out
}

/** The name an interpolated expression starts from: `where.join(' AND ')` → `where`, `[...order, x]` → `order`, `TOKEN_NAMES.map(…)` → `TOKEN_NAMES`. */
export function rootOf(expr: string): string {
  const name = /[A-Za-z_$][\w$]*(\.[A-Za-z_$][\w$]*)*/.exec(codeOf(expr))?.[0] ?? ''
  const head = name.split('.')[0]!
  if (CONSTANT_NAME.test(head)) return head
  return name.replace(/(\.(map|join|filter|replaceAll))+$/, '')
}

/** The expression without the text of its string and template literals (nested SQL is scanned on its own). */
export function codeOf(expr: string): string {
  return expr.replace(/`[^`]*`/g, '``').replace(/'[^']*'/g, "''")
}
