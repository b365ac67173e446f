/**
 * Texts and row digests as they cross from the table workers: back to back in one buffer, with their ends. Nothing
 * here loads DuckDB, so the workers (table-prepare.ts) can use it.
 */

/** Row digests are 43 characters of [A-Za-z0-9] (digest.ts): such lists travel as one comma-joined string. */
export const DIGEST = /^[A-Za-z0-9]+$/

/**
 * Texts [a, b) of texts back to back, text i ending at `ends[i]` (offsets into the whole, in characters): `part` is
 * the decoded run of them from text a's start. A slice each: V8 keeps a slice as a view of the decoded whole, so
 * the bytes are copied once, by the decode.
 */
export function splitTexts(part: string, ends: Int32Array, a: number, b: number): string[] {
  const from = a === 0 ? 0 : ends[a - 1]!
  const out = new Array<string>(b - a)
  for (let i = a; i < b; i++) out[i - a] = part.slice((i === 0 ? 0 : ends[i - 1]!) - from, ends[i]! - from)
  return out
}

/** Texts [a, b) of ASCII texts back to back in `text` (text i ends at byte `ends[i]`) as strings. */
export function asciiSlice(text: Uint8Array, ends: Int32Array, a: number, b: number): string[] {
  const from = a === 0 ? 0 : ends[a - 1]!
  const to = b === a ? from : ends[b - 1]!
  return splitTexts(Buffer.from(text.buffer, text.byteOffset + from, to - from).toString('latin1'), ends, a, b)
}
