import { validationError } from './errors.js'

/**
 * Deeper JSON than this is refused before any handler sees it: recursive code past here (JSON.stringify,
 * digests, Python-style dumps) would overflow the stack, and no Weave or OpenAI payload nests anywhere near it.
 */
export const MAX_JSON_DEPTH = 512

/** A lone UTF-16 surrogate: a high one not followed by a low one, or a low one not preceded by a high one. */
const LONE_SURROGATE = /[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/

interface Node {
  v: unknown
  key: string | number
  parent: Node | null
  depth: number
}

function locOf(n: Node): (string | number)[] {
  const loc: (string | number)[] = []
  for (let x: Node | null = n; x; x = x.parent) loc.push(x.key)
  return loc.reverse()
}

/**
 * Checks a parsed JSON body for what it cannot be stored or processed with: nesting past MAX_JSON_DEPTH, and
 * (when the text had `\u` escapes, the only way to write them) strings with lone UTF-16 surrogates: UTF-8 cannot
 * encode them, so DuckDB's JSON reader would refuse the stored row on every later read. Iterative, so the check
 * itself never overflows the stack.
 */
export function checkJsonShape(body: unknown, hasEscapes: boolean): void {
  const root: Node = { v: body, key: 'body', parent: null, depth: 0 }
  const lone = (s: string, parent: Node, key: string | number) => {
    if (!LONE_SURROGATE.test(s)) return
    const loc = [...locOf(parent), key]
    throw validationError([{ loc, msg: 'String contains a lone UTF-16 surrogate (not valid Unicode)', type: 'string_unicode' }])
  }
  if (typeof body === 'string' && hasEscapes) lone(body, root, 0)
  // Only containers are visited as nodes; their strings are checked in place (most values are leaves).
  const stack: Node[] = body !== null && typeof body === 'object' ? [root] : []
  while (stack.length > 0) {
    const n = stack.pop()!
    if (n.depth >= MAX_JSON_DEPTH) {
      throw validationError([{ loc: locOf(n).slice(0, 8), msg: `JSON nested deeper than ${MAX_JSON_DEPTH} levels`, type: 'too_deep' }])
    }
    const depth = n.depth + 1
    const v = n.v as Record<string, unknown> | unknown[]
    if (Array.isArray(v)) {
      for (let i = v.length - 1; i >= 0; i--) {
        const x = v[i]
        if (typeof x === 'string') hasEscapes && lone(x, n, i)
        else if (x !== null && typeof x === 'object') stack.push({ v: x, key: i, parent: n, depth })
      }
      continue
    }
    for (const k in v) {
      const x = v[k]
      if (hasEscapes) lone(k, n, k)
      if (typeof x === 'string') hasEscapes && lone(x, n, k)
      else if (x !== null && typeof x === 'object') stack.push({ v: x, key: k, parent: n, depth })
    }
  }
}
