import { INT_FIELDS, MICROS_FIELDS, STRING_FIELDS, type CallPart } from '../model.js'
import { RawJson } from './raw-json.js'

/**
 * A batch of parts as the bytes the write-ahead log keeps and DuckDB reads (JSON, parsed by DuckDB
 * off the event loop). Timestamps become numbers (microseconds stay exact below 2^53, year 2255).
 * JSON-valued fields are JSON strings, except RawJson ones, which go in as the JSON values they are
 * (DuckDB reads an object or array into a VARCHAR column as its JSON text). Strings are made
 * well-formed first: DuckDB's JSON reader refuses a lone surrogate escape, and a batch it cannot read
 * would fail after being logged.
 */
export function encodeParts(parts: CallPart[]): Buffer {
  // The text is built as one string with a \x01 where each raw value goes (JSON.stringify escapes
  // control characters, so no other \x01 byte can occur), encoded once, then the raw bytes are spliced in.
  let text = '['
  const raws: Uint8Array[] = []
  const marks: number[] = []
  for (let i = 0; i < parts.length; i++) {
    const { json, raw } = plainPart(parts[i]!)
    if (i > 0) text += ','
    if (!raw) {
      text += json
      continue
    }
    text += json.slice(0, -1)
    let first = json.length === 2
    for (const [f, v] of raw) {
      text += `${first ? '' : ','}"${f}":`
      first = false
      marks.push(text.length)
      text += '\x01'
      raws.push(v.bytes)
    }
    text += '}'
  }
  text += ']'
  return spliceRaw(text, marks, raws)
}

/** A part as JSON text without its RawJson fields, and those fields (null: none). */
function plainPart(p: CallPart): { json: string; raw: [string, RawJson][] | null } {
  const r: Record<string, unknown> = {}
  let raw: [string, RawJson][] | null = null
  for (const f of STRING_FIELDS) {
    const v = p[f]
    if (v === undefined || v === null) continue
    if (v instanceof RawJson) (raw ??= []).push([f, v])
    else r[f] = wellFormed(v)
  }
  for (const f of MICROS_FIELDS) if (p[f] !== undefined && p[f] !== null) r[f] = Number(p[f])
  for (const f of INT_FIELDS) if (p[f] !== undefined && p[f] !== null) r[f] = p[f]
  if (p.input_refs?.length) r.input_refs = p.input_refs.map(wellFormed)
  if (p.output_refs?.length) r.output_refs = p.output_refs.map(wellFormed)
  if (p.usage?.length) r.usage = p.usage.map((u) => ({ ...u, model: wellFormed(u.model) }))
  return { json: JSON.stringify(r), raw }
}

/** The text's bytes with the raw values in place of the \x01 at each mark (character offsets). */
function spliceRaw(text: string, marks: number[], raws: Uint8Array[]): Buffer {
  const bytes = Buffer.from(text)
  if (raws.length === 0) return bytes
  // Character offsets are byte offsets only for ASCII text; otherwise the marks are found in the bytes.
  if (bytes.length !== text.length) {
    let from = 0
    for (let k = 0; k < marks.length; k++) from = marks[k] = bytes.indexOf(1, from) + 1
    for (let k = 0; k < marks.length; k++) marks[k]!--
  }
  let length = bytes.length - raws.length
  for (const x of raws) length += x.byteLength
  const out = Buffer.allocUnsafe(length)
  let src = 0
  let dst = 0
  for (let k = 0; k < raws.length; k++) {
    out.set(bytes.subarray(src, marks[k]), dst)
    dst += marks[k]! - src
    out.set(raws[k]!, dst)
    dst += raws[k]!.byteLength
    src = marks[k]! + 1
  }
  out.set(bytes.subarray(src), dst)
  return out
}

const wellFormed = (s: string): string =>
  (s as unknown as { isWellFormed(): boolean }).isWellFormed() ? s : (s as unknown as { toWellFormed(): string }).toWellFormed()
