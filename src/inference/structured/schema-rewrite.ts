/**
 * A workaround for xgrammar 0.1.27 (@mlc-ai/web-xgrammar): a string with `minLength`/`maxLength`
 * becomes `[^"\\\r\n]{m,n}` between quotes, which lets control characters through unescaped, so the
 * reply would not parse as JSON. Such strings are given the equivalent `pattern` instead, over the
 * characters JSON allows unescaped (no escapes are generated in them, so each character counts once,
 * as maxLength counts). Strings with their own pattern, format, enum or const are left alone.
 */
const PLAIN = '[^"\\\\\\x00-\\x1f]'

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v)
}

function boundedString(s: Record<string, unknown>): boolean {
  const typed = s.type === 'string' || (Array.isArray(s.type) && s.type.length === 1 && s.type[0] === 'string')
  const bounded = typeof s.minLength === 'number' || typeof s.maxLength === 'number'
  return typed && bounded && !('pattern' in s) && !('format' in s) && !('enum' in s) && !('const' in s)
}

/** The schema with every length-bounded plain string rewritten (a copy; the input is not changed). */
export function rewriteBoundedStrings(schema: unknown): unknown {
  if (Array.isArray(schema)) return schema.map(rewriteBoundedStrings)
  if (!isObject(schema)) return schema
  const out: Record<string, unknown> = {}
  for (const [k, v] of Object.entries(schema))
    out[k] = k === 'const' || k === 'enum' || k === 'default' || k === 'examples' ? v : rewriteBoundedStrings(v)
  if (!boundedString(out)) return out
  const min = Math.max(0, Math.floor(Number(out.minLength ?? 0)))
  const max = typeof out.maxLength === 'number' ? String(Math.floor(out.maxLength)) : ''
  delete out.minLength
  delete out.maxLength
  out.pattern = `^${PLAIN}{${min},${max}}$`
  return out
}
