import { isAscii } from 'node:buffer'
import { elements, fields, GIVE_UP, QUOTE, Scan } from './table-scan.js'

/** Bytes of a row digest as the digest list scan takes it (digest.ts: [A-Za-z0-9]). */
const ALNUM = new Uint8Array(256)
for (let c = 0; c < 256; c++) ALNUM[c] = /[A-Za-z0-9]/.test(String.fromCharCode(c)) ? 1 : 0
/** The schema's bound on one digest's length: a longer one goes to the whole-body path and its 422. */
const MAX_DIGEST_BYTES = 128

/** A `/table/create_from_digests` body scanned: its digests back to back, and the body with the list empty. */
export interface ScannedDigests {
  envelope: string
  digests: { text: Uint8Array; ends: Int32Array }
}

/**
 * The row digests of a `/table/create_from_digests` body copied out of its bytes (a 1M-row dataset's list is 46 MB
 * of JSON: JSON.parse and a string per digest took ~1 s of the worker), and the body with `row_digests` as `[]`
 * for JSON.parse and the schema. Taken only when every element is a plain string of 1-128 bytes of [A-Za-z0-9];
 * anything else is null, and the whole-body path answers it.
 */
export function scanDigestList(body: Uint8Array): ScannedDigests | null {
  const s = new Scan(body)
  const b = body
  // A buffer of its own, which moves to the request thread; the body is left as it was should the scan give up.
  const text = new Uint8Array(body.length)
  let ends = new Int32Array(1024)
  let n = 0
  let o = 0
  let list = null as [number, number] | null
  try {
    fields(s, (k) => {
      if (k !== 'row_digests') return s.skip()
      const start = s.i
      elements(s, () => {
        let i = s.i
        if (b[i] !== QUOTE) throw GIVE_UP
        const from = ++i
        // Copied byte by byte as it is checked: a subarray per digest cost more than the copy.
        for (let c = b[i]!; ALNUM[c] === 1; c = b[++i]!) text[o++] = c
        if (b[i] !== QUOTE || i === from || i - from > MAX_DIGEST_BYTES) throw GIVE_UP
        s.i = i + 1
        if (n === ends.length) {
          const grown = new Int32Array(ends.length * 2)
          grown.set(ends)
          ends = grown
        }
        ends[n++] = o
      })
      list = [start, s.i]
    })
    s.ws()
    if (s.i !== body.length || list === null) throw GIVE_UP
  } catch (e) {
    if (e === GIVE_UP) return null
    throw e
  }
  const [start, end] = list
  const bytes = Buffer.from(b.buffer, b.byteOffset, b.byteLength)
  const env = Buffer.concat([bytes.subarray(0, start), Buffer.from('[]'), bytes.subarray(end)])
  return {
    envelope: isAscii(env) ? env.toString('latin1') : env.toString('utf8'),
    digests: { text: text.subarray(0, o), ends: ends.slice(0, n) },
  }
}
