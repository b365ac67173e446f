import { INT_FIELDS, MICROS_FIELDS, STRING_FIELDS, type CallPart } from '../model.js'
import { RawJson } from './raw-json.js'

/**
 * A batch of parts as the bytes the write-ahead log keeps and DuckDB reads (JSON, parsed by DuckDB
 * off the event loop). Timestamps become numbers (microseconds stay exact below 2^53, year 2255).
 * JSON-valued fields are JSON strings, and so are RawJson values that are `exact` (their bytes are what
 * DuckDB would store for them: DuckDB copies a string into the VARCHAR column instead of parsing the value
 * into a tree and writing it out again, half of the tail insert's CPU on the soak's calls; bench/README, Soak).
 * Other RawJson values go in as the JSON values they are (DuckDB reads an object or array into a VARCHAR
 * column as its JSON text, normalised: whitespace, escapes, numbers). Strings are made
 * well-formed first: DuckDB's JSON reader refuses a lone surrogate escape, and a batch it cannot read
 * would fail after being logged.
 */
export function encodeParts(parts: CallPart[]): Buffer {
  // The text is built as one string with a \x01 where each raw value goes (JSON.stringify escapes
  // control characters, so no other \x01 byte can occur), encoded once, then the raw bytes are spliced in.
  let text = '['
  const raws: Raw[] = []
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
      const bytes = Buffer.from(v.bytes.buffer, v.bytes.byteOffset, v.bytes.byteLength)
      raws.push({ bytes, escapes: v.exact ? escapes(bytes) : null })
    }
    text += '}'
  }
  text += ']'
  return spliceRaw(text, marks, raws)
}

/**
 * A part as JSON text without its RawJson fields, and those fields (null: none). The text is written field by field
 * (the same keys in the same order as an object of them given to JSON.stringify): building that object and
 * stringifying it was a seventh of an ingest worker's time (bench/README, 2026-12-06 night).
 */
function plainPart(p: CallPart): { json: string; raw: [string, RawJson][] | null } {
  let json = ''
  let raw: [string, RawJson][] | null = null
  for (const f of STRING_FIELDS) {
    const v = p[f]
    if (v === undefined || v === null) continue
    if (v instanceof RawJson) (raw ??= []).push([f, v])
    else json += `,"${f}":${JSON.stringify(wellFormed(v))}`
  }
  for (const f of MICROS_FIELDS) {
    const v = p[f]
    if (v !== undefined && v !== null) json += `,"${f}":${JSON.stringify(Number(v))}`
  }
  for (const f of INT_FIELDS) {
    const v = p[f]
    if (v !== undefined && v !== null) json += `,"${f}":${JSON.stringify(v)}`
  }
  if (p.input_refs?.length) json += `,"input_refs":${JSON.stringify(p.input_refs.map(wellFormed))}`
  if (p.output_refs?.length) json += `,"output_refs":${JSON.stringify(p.output_refs.map(wellFormed))}`
  if (p.usage?.length) json += `,"usage":${JSON.stringify(p.usage.map((u) => ({ ...u, model: wellFormed(u.model) })))}`
  return { json: json ? `{${json.slice(1)}}` : '{}', raw }
}

/** A raw value's bytes; for an exact one, where it needs a backslash to go in as a JSON string (see escapes). */
interface Raw {
  bytes: Buffer
  escapes: number[] | null
}

/**
 * Where an exact RawJson's bytes need a backslash to be a JSON string: before each quote and backslash. Nothing else
 * needs one: valid JSON holds no control character outside a string, and inside one only escaped (and its bytes are
 * UTF-8, checked by the scanner). Found with indexOf (memchr) and copied in runs: ~2x faster than a loop over the
 * bytes, and ~4x faster than decoding them for JSON.stringify (which made encodeParts 3x slower).
 */
function escapes(b: Buffer): number[] {
  const at: number[] = []
  for (let i = b.indexOf(0x22); i >= 0; i = b.indexOf(0x22, i + 1)) at.push(i)
  const quotes = at.length
  for (let i = b.indexOf(0x5c); i >= 0; i = b.indexOf(0x5c, i + 1)) at.push(i)
  if (at.length > quotes) at.sort((x, y) => x - y)
  return at
}

/** The text's bytes with the raw values in place of the \x01 at each mark (character offsets); exact ones quoted. */
function spliceRaw(text: string, marks: number[], raws: Raw[]): Buffer {
  const bytes = Buffer.from(text)
  if (raws.length === 0) return bytes
  // Character offsets are byte offsets only for ASCII text; otherwise the marks are found in the bytes.
  if (bytes.length !== text.length) {
    let from = 0
    for (let k = 0; k < marks.length; k++) from = marks[k] = bytes.indexOf(1, from) + 1
    for (let k = 0; k < marks.length; k++) marks[k]!--
  }
  let length = bytes.length - raws.length
  for (const x of raws) length += x.bytes.length + (x.escapes ? x.escapes.length + 2 : 0)
  const out = Buffer.allocUnsafe(length)
  let src = 0
  let dst = 0
  for (let k = 0; k < raws.length; k++) {
    dst += bytes.copy(out, dst, src, marks[k])
    const { bytes: b, escapes } = raws[k]!
    if (escapes === null) dst += b.copy(out, dst)
    else {
      out[dst++] = 0x22
      let from = 0
      for (const e of escapes) {
        dst += b.copy(out, dst, from, e)
        out[dst++] = 0x5c
        from = e
      }
      dst += b.copy(out, dst, from)
      out[dst++] = 0x22
    }
    src = marks[k]! + 1
  }
  bytes.copy(out, dst, src)
  return out
}

const wellFormed = (s: string): string =>
  (s as unknown as { isWellFormed(): boolean }).isWellFormed() ? s : (s as unknown as { toWellFormed(): string }).toWellFormed()
