/**
 * Valid UTF-8 on top of the grammar mask. xgrammar 0.1.27 reads UTF-8 leniently: with a byte-level
 * vocabulary it accepts overlong forms, surrogates and sequences past U+10FFFF, which decode to
 * several U+FFFD in the reply (breaking maxLength, or the text a regex was meant to match). This
 * tracks where the output stands inside a character and masks tokens whose bytes would not continue
 * it validly (the well-formed sequences of the Unicode standard, table 3-7).
 */
import type { GrammarVocab } from './vocab.js'

/** Where the output stands: continuation bytes still due, and the range allowed for the next one. */
export interface Utf8State {
  need: number
  lo: number
  hi: number
}

export const UTF8_START: Utf8State = { need: 0, lo: 0x80, hi: 0xbf }

/** The state after one more byte, or null when the byte makes the text invalid. */
export function utf8Step(s: Utf8State, b: number): Utf8State | null {
  if (s.need > 0) return b < s.lo || b > s.hi ? null : { need: s.need - 1, lo: 0x80, hi: 0xbf }
  if (b < 0x80) return s
  if (b >= 0xc2 && b <= 0xdf) return { need: 1, lo: 0x80, hi: 0xbf }
  if (b === 0xe0) return { need: 2, lo: 0xa0, hi: 0xbf }
  if (b === 0xed) return { need: 2, lo: 0x80, hi: 0x9f }
  if (b >= 0xe1 && b <= 0xef) return { need: 2, lo: 0x80, hi: 0xbf }
  if (b === 0xf0) return { need: 3, lo: 0x90, hi: 0xbf }
  if (b >= 0xf1 && b <= 0xf3) return { need: 3, lo: 0x80, hi: 0xbf }
  if (b === 0xf4) return { need: 3, lo: 0x80, hi: 0x8f }
  return null
}

export function utf8Run(s: Utf8State, bytes: Uint8Array): Utf8State | null {
  let cur: Utf8State | null = s
  for (let i = 0; i < bytes.length && cur; i++) cur = utf8Step(cur, bytes[i]!)
  return cur
}

/** The GPT-2 byte ↔ character map byte-level vocabularies spell their entries with. */
function byteLevelDecoder(): Map<string, number> {
  const keep = (b: number) => (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174 && b <= 255)
  const out = new Map<string, number>()
  let extra = 0
  for (let b = 0; b < 256; b++) out.set(String.fromCodePoint(keep(b) ? b : 256 + extra++), b)
  return out
}

/** Each token's bytes, and whether it is plain ASCII (valid whenever no character is open). */
export interface TokenBytes {
  bytes: Uint8Array[]
  ascii: Uint8Array
}

export function tokenBytes(v: GrammarVocab): TokenBytes {
  const bytes: Uint8Array[] = []
  const ascii = new Uint8Array(v.size)
  const map = v.type === 'byte_level' ? byteLevelDecoder() : null
  for (let id = 0; id < v.size; id++) {
    const e = v.encoded[id] ?? ''
    let b: Uint8Array
    if (map) b = Uint8Array.from([...e].map((c) => map.get(c) ?? 0x3f))
    else if (v.type === 'byte_fallback' && /^<0x[0-9A-Fa-f]{2}>$/.test(e)) b = Uint8Array.of(Number.parseInt(e.slice(3, 5), 16))
    else b = new Uint8Array(Buffer.from(e.replaceAll('\u2581', ' '), 'utf8'))
    bytes[id] = b
    ascii[id] = b.every((x) => x < 0x80) ? 1 : 0
  }
  return { bytes, ascii }
}

/** Clears the mask bits of tokens that would break the UTF-8 of the output from state `s`. */
export function maskInvalidUtf8(mask: Int32Array, s: Utf8State, t: TokenBytes): void {
  const V = t.ascii.length
  for (let w = 0; w < mask.length; w++) {
    let bits = mask[w]!
    if (bits === 0) continue
    const base = w << 5
    for (let j = 0; j < 32; j++) {
      if ((bits & (1 << j)) === 0) continue
      const id = base + j
      if (id >= V) break
      const b = t.bytes[id]!
      // Tokens without bytes (special ones, end of sequence) are the grammar's business alone.
      if (b.length === 0 || (s.need === 0 && t.ascii[id])) continue
      if (!utf8Run(s, b)) bits &= ~(1 << j)
    }
    mask[w] = bits
  }
}
