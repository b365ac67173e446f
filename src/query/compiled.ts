import { DomainError } from '../core/errors.js'
import type { Params } from './params.js'

export type SqlType = 'string' | 'number' | 'bool' | 'timestamp' | 'null'

/** An operand compiled to SQL. */
export interface Compiled {
  /** The value as Weave's ClickHouse compares it: a JSON field reads as text, `''` when missing or JSON null. */
  sql: string
  type: SqlType
  /** JSON-like fields: the value, NULL when missing or JSON null (for `exists` and sorts). */
  raw?: string
  /** JSON fields: the column and bound path, for `$size`. */
  json?: { column: string; path: string }
  /** Where absent is stored as a value (`''`): what `$eq null` compares with, instead of `IS NULL`. */
  nullAs?: string
  /** Set for a literal: its value, for `IS NULL` rewriting. */
  literal?: unknown
}

const MAX_FIELD = 512

/** Checks a field name's form: non-empty, bounded. */
export function checkFieldName(field: unknown): asserts field is string {
  if (typeof field !== 'string' || field.length === 0 || field.length > MAX_FIELD)
    throw new DomainError(400, `Field names must be non-empty strings of at most ${MAX_FIELD} characters`)
}

/** `a.b\.c.0` → `["a", "b.c", "0"]`: dots split, a backslash-escaped dot is part of the key (as Weave). */
export function splitPath(path: string): string[] {
  const out: string[] = []
  let cur = ''
  for (let i = 0; i < path.length; i++) {
    const ch = path[i]!
    if (ch === '\\' && path[i + 1] === '.') {
      cur += '.'
      i++
    } else if (ch === '.') {
      out.push(cur)
      cur = ''
    } else cur += ch
  }
  out.push(cur)
  return out
}

/** Path segments → the JSON path `$."b"[0]."c"`, keys quoted so no key is syntax. */
export function jsonPath(segments: string[]): string {
  let p = '$'
  for (const s of segments) {
    if (/^(0|[1-9]\d{0,8})$/.test(s)) p += `[${s}]`
    else p += '.' + JSON.stringify(s)
  }
  return p
}

/**
 * A path into a JSON column. The value reads as ClickHouse's `JSON_VALUE` does for Weave: a string's
 * characters (a JSON string at the root included), a number's or boolean's text, and `''` for a
 * missing key or JSON null — so a missing field compares as the empty string, never as NULL.
 * Objects and arrays read as their JSON text (ClickHouse gives `''`; text lets `$contains` search them).
 */
export function jsonField(column: string, segs: string[], params: Params): Compiled {
  const path = params.add(jsonPath(segs))
  const raw = `json_extract_string(${column}, ${path})`
  return { sql: `coalesce(${raw}, '')`, raw, type: 'string', json: { column, path } }
}
