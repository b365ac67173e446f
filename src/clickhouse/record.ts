import type { CallPart } from '../calls/model.js'

/** Fields the ingest path may carry as raw JSON (objects and arrays spliced in as bytes: calls/ingest/encode.ts). */
const RAW_FIELDS = new Set(['attributes', 'inputs', 'output'])
const WS = new Set([' ', '\t', '\n', '\r'])

/** The index just past the JSON value starting at `i` (the text is valid JSON: ingest checked it). */
function skipValue(s: string, i: number): number {
  let depth = 0
  for (; i < s.length; i++) {
    const ch = s[i]!
    if (ch === '"') {
      for (i++; s[i] !== '"'; i++) if (s[i] === '\\') i++
      if (depth === 0) return i + 1
    } else if (ch === '{' || ch === '[') depth++
    else if (ch === '}' || ch === ']') {
      if (--depth === 0) return i + 1
      if (depth < 0) return i
    } else if (depth === 0 && (ch === ',' || WS.has(ch))) return i
  }
  return i
}

function skipWs(s: string, i: number): number {
  while (WS.has(s[i]!)) i++
  return i
}

/**
 * A log record as the ingest workers frame it (`u32 length | u32 crc | JSON array of parts`) back
 * into parts. The object and array values of inputs, output and attributes stay the JSON text they
 * arrived as (JSON.parse and a second stringify would change numbers such as 1.0 or integers past
 * 2^53), the rest is JSON.parse'd; timestamps are microsecond numbers, which CallPart takes.
 */
export function partsOfRecord(record: Uint8Array): CallPart[] {
  const s = Buffer.from(record.buffer, record.byteOffset + 8, record.byteLength - 8).toString('utf8')
  const parts: CallPart[] = []
  let i = skipWs(s, 0) + 1 // [
  for (;;) {
    i = skipWs(s, i)
    if (s[i] === ']') break
    if (s[i] === ',') i = skipWs(s, i + 1)
    const part: Record<string, unknown> = {}
    i = skipWs(s, i + 1) // {
    while (s[i] !== '}') {
      if (s[i] === ',') i = skipWs(s, i + 1)
      const keyEnd = skipValue(s, i)
      const key = JSON.parse(s.slice(i, keyEnd)) as string
      const start = skipWs(s, skipWs(s, keyEnd) + 1) // :
      const end = skipValue(s, start)
      const text = s.slice(start, end)
      part[key] = RAW_FIELDS.has(key) && (text[0] === '{' || text[0] === '[') ? text : JSON.parse(text)
      i = skipWs(s, end)
    }
    parts.push(part as unknown as CallPart)
    i++
  }
  return parts
}
