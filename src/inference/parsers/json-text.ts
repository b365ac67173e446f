/**
 * Small JSON-text helpers the tool-call parsers share: Python's `json.dumps` spacing (vLLM writes
 * tool-call arguments with it, so clients see the same text from either server), where a JSON value
 * ends in a growing text, and the top-level members of an object still being written.
 */

/** `json.dumps(v, ensure_ascii=False)`: `", "` between items, `": "` after keys, non-ASCII kept. */
export function pythonDumps(v: unknown): string {
  if (v === null || typeof v !== 'object') return JSON.stringify(v) ?? 'null'
  if (Array.isArray(v)) return '[' + v.map(pythonDumps).join(', ') + ']'
  return (
    '{' +
    Object.entries(v)
      .map(([k, x]) => JSON.stringify(k) + ': ' + pythonDumps(x))
      .join(', ') +
    '}'
  )
}

export function skipWs(s: string, i: number): number {
  while (i < s.length && /\s/.test(s[i]!)) i++
  return i
}

/** Index just past the string literal opening at `i`, or -1 while it is unterminated. */
function stringEnd(s: string, i: number): number {
  for (let j = i + 1; j < s.length; j++) {
    if (s[j] === '\\') j++
    else if (s[j] === '"') return j + 1
  }
  return -1
}

/**
 * Index just past the JSON value starting at `i` (after whitespace), or -1 when the text ends before
 * the value does. A bare number at the very end of the text counts as unfinished: more digits may come.
 */
export function valueEnd(s: string, i: number): number {
  i = skipWs(s, i)
  if (i >= s.length) return -1
  const c = s[i]!
  if (c === '"') return stringEnd(s, i)
  if (c === '{' || c === '[') {
    let depth = 0
    for (let j = i; j < s.length; j++) {
      const x = s[j]!
      if (x === '"') {
        j = stringEnd(s, j) - 1
        if (j < 0) return -1
      } else if (x === '{' || x === '[') depth++
      else if (x === '}' || x === ']') {
        depth--
        if (depth === 0) return j + 1
      }
    }
    return -1
  }
  const m = /^(?:-?[0-9.eE+-]+|true|false|null)/.exec(s.slice(i))
  if (!m) return i + 1 // not JSON: let the caller's JSON.parse say so
  return i + m[0].length >= s.length ? -1 : i + m[0].length
}

export interface Member {
  /** Where the value starts. */
  start: number
  /** Just past its end; -1 while it is still being written. */
  end: number
}

/** The members of the object that opens `s` (after whitespace), as far as they are written. */
export function topLevelMembers(s: string): Map<string, Member> {
  const out = new Map<string, Member>()
  let i = skipWs(s, 0)
  if (s[i] !== '{') return out
  i++
  for (;;) {
    i = skipWs(s, i)
    if (s[i] !== '"') break
    const keyEnd = stringEnd(s, i)
    if (keyEnd < 0) break
    const key = JSON.parse(s.slice(i, keyEnd)) as string
    i = skipWs(s, keyEnd)
    if (s[i] !== ':') break
    i = skipWs(s, i + 1)
    if (i >= s.length) break
    const end = valueEnd(s, i)
    out.set(key, { start: i, end })
    if (end < 0) break
    i = skipWs(s, end)
    if (s[i] !== ',') break
    i++
  }
  return out
}

/**
 * A JSON text re-spaced as `pythonDumps` spaces it, character by character, so a prefix of the text
 * gives a prefix of the result (what streaming arguments in pieces needs).
 */
export function respace(s: string): string {
  let out = ''
  let inString = false
  for (let i = 0; i < s.length; i++) {
    const c = s[i]!
    if (inString) {
      out += c
      if (c === '\\' && i + 1 < s.length) out += s[++i]
      else if (c === '"') inString = false
    } else if (c === '"') {
      inString = true
      out += c
    } else if (c === ',') out += ', '
    else if (c === ':') out += ': '
    else if (!/\s/.test(c)) out += c
  }
  return out
}
