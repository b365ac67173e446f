import { createHash, hash } from 'node:crypto'

/**
 * Weave's digests (docs/objects.md), so refs written by existing clients resolve here:
 * base64url(sha256(bytes)) with '-'→'X', '_'→'Y' and no padding: 43 characters of [A-Za-z0-9].
 */
export function digestBytes(bytes: Uint8Array | string): string {
  // The one-shot hash skips the Hash object: ~2x cheaper on ~1 KB rows, which every dataset row pays.
  return hash('sha256', bytes, 'base64url').replace(/-/g, 'X').replace(/_/g, 'Y')
}

/** The same digest from a SHA-256 computed elsewhere (files are hashed as they stream in). */
export function digestOfSha256(sha256: Buffer): string {
  return sha256.toString('base64url').replace(/-/g, 'X').replace(/_/g, 'Y')
}

/** Python's float repr: shortest round-trip digits, exponent form below 1e-4 and from 1e16, 2-digit exponents. */
export function pyNumber(n: number): string {
  // The common cases, where JS and Python print the same digits: safe integers, and decimals Python does not
  // write in exponent form (JS switches to it only further out, below 1e-6 and from 1e21).
  if (Number.isSafeInteger(n)) return String(n)
  const abs = Math.abs(n)
  if (abs >= 1e-4 && abs < 1e16 && !Number.isInteger(n)) return String(n)
  if (!Number.isFinite(n)) return n > 0 ? 'Infinity' : n < 0 ? '-Infinity' : 'NaN'
  // JSON.parse cannot tell 1 from 1.0; integral values are written as Python ints.
  if (Number.isInteger(n)) return Math.abs(n) < 1e21 ? BigInt(n).toString() : n.toString()
  const [mant, expText] = n.toExponential().split('e') as [string, string]
  const exp = Number(expText)
  if (exp < -4 || exp >= 16) {
    return `${mant}e${exp < 0 ? '-' : '+'}${String(Math.abs(exp)).padStart(2, '0')}`
  }
  return n.toString()
}

const PRINTABLE = /^[\x20-\x7e]*$/

/** A JSON string as Python's json.dumps writes it (ensure_ascii: everything outside ' '..'~' escaped). */
function pyString(s: string): string {
  // Printable ASCII: JSON.stringify escapes exactly what Python does (`"` and `\\`), and much faster.
  if (PRINTABLE.test(s)) return JSON.stringify(s)
  let out = '"'
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i)
    if (c === 0x22) out += '\\"'
    else if (c === 0x5c) out += '\\\\'
    else if (c === 0x0a) out += '\\n'
    else if (c === 0x0d) out += '\\r'
    else if (c === 0x09) out += '\\t'
    else if (c === 0x08) out += '\\b'
    else if (c === 0x0c) out += '\\f'
    else if (c < 0x20 || c > 0x7e) out += '\\u' + c.toString(16).padStart(4, '0')
    else out += s[i]
  }
  return out + '"'
}

/**
 * `json.dumps(value)` with Python's defaults: `", "` and `": "` separators, keys in insertion order.
 * (A JS object lists integer-like keys first; an object that had them elsewhere digests differently
 * from Python. Weave objects use identifier keys.)
 */
export function pythonJsonDumps(v: unknown): string {
  if (v === null || v === undefined) return 'null'
  if (typeof v === 'boolean') return v ? 'true' : 'false'
  if (typeof v === 'number') return pyNumber(v)
  if (typeof v === 'string') return pyString(v)
  // Strings built by `+=` (ropes) rather than arrays joined: this runs once per row of every dataset saved.
  if (Array.isArray(v)) {
    let out = '['
    for (let i = 0; i < v.length; i++) out += (i ? ', ' : '') + pythonJsonDumps(v[i])
    return out + ']'
  }
  if (typeof v === 'object') {
    let out = '{'
    let first = true
    for (const k in v) {
      if (!Object.hasOwn(v, k)) continue
      out += (first ? '' : ', ') + pyString(k) + ': ' + pythonJsonDumps((v as Record<string, unknown>)[k])
      first = false
    }
    return out + '}'
  }
  return 'null'
}

/**
 * Where JSON.stringify and Python's json.dumps could write a value differently: a character outside ASCII
 * (Python escapes it), a number JS writes without the exponent Python uses (below 1e-4), and integers past
 * 2^53 (JS rounds their digits; a fraction's digits are no integer). A string that merely looks like these only costs the slow path.
 * (Lookarounds rather than matched neighbours: the engine then tries the digit run only where one starts.)
 */
const NOT_LIKE_PYTHON = /[^\x00-\x7e]|\de-|0\.0000|(?<![\d.])\d{16,}(?![\d.])/

/**
 * `pythonJsonDumps` of a value parsed from JSON text, several times faster on the common rows: JSON.stringify
 * writes keys, strings and these numbers as Python does and differs only in the separators. Without an escaped
 * quote, `"[^"]*"` matches exactly the strings, so every other `,` and `:` is a separator and gets Python's
 * space. Other values take the character-by-character path: the bytes are always Python's.
 */
export function pythonJsonDumpsParsed(v: unknown): string {
  return dumpsBoth(v).python
}

/** `pythonJsonDumpsParsed` and the compact JSON.stringify text it starts from (a table row stores that one). */
export function dumpsBoth(v: unknown): { python: string; compact: string } {
  const compact = JSON.stringify(v) ?? 'null'
  if (NOT_LIKE_PYTHON.test(compact) || compact.includes('\\"')) return { python: pythonJsonDumps(v), compact }
  return { python: compact.replace(STRING_OR_SEPARATOR, spaced), compact }
}

const STRING_OR_SEPARATOR = /"[^"]*"|[,:]/g
const spaced = (m: string) => (m.length === 1 ? m + ' ' : m)

export function valueDigest(v: unknown): string {
  return digestBytes(pythonJsonDumps(v))
}

/** A table's digest: hex SHA-256 of its row digests concatenated in order (not the base64 form). */
export function tableDigest(rowDigests: readonly string[]): string {
  return createHash('sha256').update(rowDigests.join('')).digest('hex')
}
