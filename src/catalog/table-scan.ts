import { isAscii } from 'node:buffer'
import { digestBytes, dumpsBoth, pyNumber } from './digest.js'

/**
 * The rows of a `/table/create` or `/table/update` body digested from its bytes, without JSON.parse building each
 * row and JSON.stringify writing it back (table-prepare.ts runs this in a worker). One pass over each row writes
 * its compact text (JSON.stringify's, stored) and its Python text (`json.dumps`, digested; docs/tables.md), which
 * for the rows taken here differ from the row's own bytes only in whitespace and separators. Everything else
 * (the rest of the body) goes to JSON.parse with each row replaced by `0`, and through the usual checks.
 *
 * A row is taken only where its bytes say exactly what the two texts are: ASCII, escapes among `\" \\ \b \f \n
 * \r \t`, numbers that JavaScript and Python both print as written, keys that are no integers (JS lists those
 * first) and not repeated (JSON.parse keeps the last value at the first place). Any other row is parsed alone and
 * goes through dumpsBoth as before. A body with `\u` escapes, nesting past MAX_DEPTH, invalid JSON or a row that
 * is no object is not scanned at all (`null`): the whole-body path answers it, with its own error if any.
 */

/** Nesting the scan follows; deeper bodies go to the whole-body path (and its 512-level check). */
const MAX_DEPTH = 64
/** Keys tracked per object for the repeated-key check; an object with more is parsed alone. */
const MAX_KEYS = 256

export const QUOTE = 0x22
const BACKSLASH = 0x5c
const COMMA = 0x2c
const COLON = 0x3a
const SPACE = 0x20

/** Thrown inside the scan when the body is for the whole-body path. */
export const GIVE_UP = new Error('not scanned')

/** The rows' compact texts back to back in `text` (UTF-16 offsets of their ends in `ends`), and their digests. */
export interface PackedRows {
  digests: string[]
  text: Uint8Array
  ends: Int32Array
  /** Whether `text` must be decoded as UTF-8 (a row parsed alone had characters past ASCII); else Latin-1. */
  utf8: boolean
}

export interface ScannedBody {
  /** The body with every row replaced by `0`, for JSON.parse and the schema. */
  envelope: string
  rows: PackedRows
}

/**
 * The Python text of the row being scanned, and the compact texts of all rows: reused across rows and requests (a
 * worker runs one task at a time), as a fresh 10 MB buffer costs tens of ms of first-touch page faults here.
 */
let py: Uint8Array = new Uint8Array(1 << 16)
let out: Uint8Array = new Uint8Array(1 << 20)
/** Hashes of the keys of the objects open in the row being scanned, a stack. */
const keyHashes = new Int32Array(MAX_DEPTH * MAX_KEYS)

export class Scan {
  i = 0
  o = 0
  p = 0
  /** The row needs parsing alone. */
  odd = false
  /** Checking a value of the envelope: nothing is written (it is no row's text). */
  silent = false
  keyTop = 0

  /** The body as a Buffer, to cut short texts from. */
  readonly text: Buffer & { latin1Slice(start: number, end: number): string }

  constructor(readonly b: Uint8Array) {
    this.text = Buffer.from(b.buffer, b.byteOffset, b.byteLength) as Scan['text']
  }

  ws(): void {
    const b = this.b
    let c = b[this.i]
    while (c === SPACE || c === 0x0a || c === 0x0d || c === 0x09) c = b[++this.i]
  }

  /** Writes one byte to both texts, a second one (Python's space) to the Python text only. */
  emit(c: number, pySpace: boolean): void {
    if (this.silent) return
    this.room(2)
    out[this.o++] = c
    py[this.p++] = c
    if (pySpace) py[this.p++] = SPACE
  }

  /** Room for n more bytes in both texts. */
  room(n: number): void {
    if (this.p + n > py.length) py = grown(py, this.p, this.p + n)
    if (this.o + n > out.length) out = grown(out, this.o, this.o + n)
  }

  copy(from: number, to: number): void {
    if (this.silent) return
    const b = this.b
    this.room(to - from)
    if (to - from > 24) {
      out.set(b.subarray(from, to), this.o)
      py.set(b.subarray(from, to), this.p)
      this.o += to - from
      this.p += to - from
      return
    }
    for (let k = from; k < to; k++) {
      out[this.o++] = b[k]!
      py[this.p++] = b[k]!
    }
  }

  expect(c: number): void {
    if (this.b[this.i] !== c) throw GIVE_UP
    this.i++
  }

  value(depth: number): void {
    const c = this.b[this.i]
    if (c === 0x7b) this.object(depth + 1)
    else if (c === 0x5b) this.array(depth + 1)
    else if (c === QUOTE) this.string()
    else if (c === 0x2d || (c !== undefined && c >= 0x30 && c <= 0x39)) this.number()
    else if (c === 0x74) this.literal('true')
    else if (c === 0x66) this.literal('false')
    else if (c === 0x6e) this.literal('null')
    else throw GIVE_UP
  }

  literal(word: string): void {
    const start = this.i
    for (let k = 0; k < word.length; k++) this.expect(word.charCodeAt(k))
    this.copy(start, this.i)
  }

  /** A string, copied as written. */
  string(): void {
    const b = this.b
    const start = this.i
    let i = start + 1
    for (;;) {
      // The common bytes in one tight loop (a local index: the field's stores cost ~3x here).
      while (PLAIN[b[i]!] === 1) i++
      const c = b[i]
      if (c === QUOTE) break
      if (c === BACKSLASH) {
        const e = b[i + 1]
        // \u could spell a lone surrogate, which the whole-body path refuses; a row with \/ is parsed alone.
        if (e === 0x2f) this.odd = true
        else if (e !== QUOTE && e !== BACKSLASH && e !== 0x62 && e !== 0x66 && e !== 0x6e && e !== 0x72 && e !== 0x74) throw GIVE_UP
        i += 2
        continue
      }
      // Past ASCII Python escapes the character (and 0x7f); such rows are parsed alone. Raw control characters
      // and the body's end are for the whole-body path's error.
      if (c === undefined || c < 0x20) throw GIVE_UP
      this.odd = true
      i++
    }
    this.i = i + 1
    this.copy(start, this.i)
  }

  /** A key: as a string, answering a hash of its content (-1: all digits, an integer-like key JS lists first). */
  keyString(): number {
    const start = this.i
    this.string()
    if (this.i - start <= 2) return 0
    let h = 0x811c9dc5
    let digits = true
    for (let k = start + 1; k < this.i - 1; k++) {
      const c = this.b[k]!
      if (c < 0x30 || c > 0x39) digits = false
      h = Math.imul(h ^ c, 0x01000193)
    }
    return digits ? -1 : h | 0
  }

  number(): void {
    const b = this.b
    const start = this.i
    if (b[this.i] === 0x2d) this.i++
    const intStart = this.i
    if (b[this.i] === 0x30) this.i++
    else if (isDigit(b[this.i])) while (isDigit(b[this.i])) this.i++
    else throw GIVE_UP
    const intDigits = this.i - intStart
    let plain = true
    if (b[this.i] === 0x2e) {
      this.i++
      if (!isDigit(b[this.i])) throw GIVE_UP
      while (isDigit(b[this.i])) this.i++
      plain = false
    }
    if (b[this.i] === 0x65 || b[this.i] === 0x45) {
      this.i++
      if (b[this.i] === 0x2b || b[this.i] === 0x2d) this.i++
      if (!isDigit(b[this.i])) throw GIVE_UP
      while (isDigit(b[this.i])) this.i++
      plain = false
    }
    // Integers of up to 15 digits print as written in both languages, but for -0 (JavaScript writes 0).
    const negZero = b[start] === 0x2d && b[intStart] === 0x30 && plain
    if (!plain || intDigits > 15 || negZero) {
      const text = this.text.latin1Slice(start, this.i)
      const n = Number(text)
      if (String(n) !== text || pythonNumber(n) !== text) this.odd = true
    }
    this.copy(start, this.i)
  }

  object(depth: number): void {
    if (depth > MAX_DEPTH) throw GIVE_UP
    const b = this.b
    this.i++
    this.emit(0x7b, false)
    this.ws()
    if (b[this.i] === 0x7d) {
      this.i++
      this.emit(0x7d, false)
      return
    }
    const base = this.keyTop
    for (;;) {
      if (b[this.i] !== QUOTE) throw GIVE_UP
      const h = this.keyString()
      if (h === -1 || this.keyTop - base >= MAX_KEYS) this.odd = true
      else {
        // Equal hashes are taken as a repeated key: at worst a row is parsed alone for nothing.
        for (let k = base; k < this.keyTop; k++) if (keyHashes[k] === h) this.odd = true
        if (this.keyTop < keyHashes.length) keyHashes[this.keyTop++] = h
        else this.odd = true
      }
      this.ws()
      this.expect(COLON)
      this.emit(COLON, true)
      this.ws()
      this.value(depth)
      this.ws()
      const c = b[this.i++]
      if (c === COMMA) {
        this.emit(COMMA, true)
        this.ws()
      } else if (c === 0x7d) {
        this.emit(0x7d, false)
        break
      } else throw GIVE_UP
    }
    this.keyTop = base
  }

  array(depth: number): void {
    if (depth > MAX_DEPTH) throw GIVE_UP
    const b = this.b
    this.i++
    this.emit(0x5b, false)
    this.ws()
    if (b[this.i] === 0x5d) {
      this.i++
      this.emit(0x5d, false)
      return
    }
    for (;;) {
      this.value(depth)
      this.ws()
      const c = b[this.i++]
      if (c === COMMA) {
        this.emit(COMMA, true)
        this.ws()
      } else if (c === 0x5d) {
        this.emit(0x5d, false)
        break
      } else throw GIVE_UP
    }
  }

  /** A key of an object the scan walks through (not a row's): its text, which must be plain. */
  key(): string {
    const b = this.b
    if (b[this.i] !== QUOTE) throw GIVE_UP
    const start = ++this.i
    while (b[this.i] !== QUOTE) {
      const c = b[this.i]
      if (c === undefined || c === BACKSLASH || c < 0x20 || c >= 0x7f) throw GIVE_UP
      this.i++
    }
    const k = Buffer.from(b.buffer, b.byteOffset + start, this.i - start).toString('latin1')
    this.i++
    this.ws()
    this.expect(COLON)
    this.ws()
    return k
  }

  /** Any value of the envelope: checked as JSON, written nowhere. */
  skip(): void {
    this.silent = true
    this.value(1)
    this.silent = false
  }
}

/** pyNumber(n), without its call where JavaScript's text is Python's (digest.ts). */
function pythonNumber(n: number): string {
  const abs = Math.abs(n)
  return Number.isSafeInteger(n) || (abs >= 1e-4 && abs < 1e16 && !Number.isInteger(n)) ? String(n) : pyNumber(n)
}

function grown(a: Uint8Array, used: number, need: number): Uint8Array {
  const b = new Uint8Array(Math.max(a.length * 2, need))
  b.set(a.subarray(0, used))
  return b
}

/** Bytes a string holds as they are in both texts: printable ASCII but `"` and `\\`. */
const PLAIN = new Uint8Array(256)
for (let c = 0x20; c < 0x7f; c++) PLAIN[c] = c === QUOTE || c === BACKSLASH ? 0 : 1

const isDigit = (c: number | undefined) => c !== undefined && c >= 0x30 && c <= 0x39

/** Collects the rows and the envelope as the scan meets them. */
class Rows {
  readonly digests: string[] = []
  readonly ends: number[] = []
  /** The body outside the rows, each row a `0`. */
  env: Uint8Array = new Uint8Array(256)
  e = 0
  /** Where the body's bytes not yet copied to `env` start. */
  kept = 0
  units = 0
  utf8 = false

  constructor(private readonly s: Scan) {}

  /** Copies the body's bytes from the last row's end up to `to`, and `then` after them. */
  keep(to: number, then?: number): void {
    const n = to - this.kept + (then === undefined ? 0 : 1)
    if (this.e + n > this.env.length) {
      const grown = new Uint8Array(Math.max(this.env.length * 2, this.e + n))
      grown.set(this.env.subarray(0, this.e))
      this.env = grown
    }
    const b = this.s.b
    for (let k = this.kept; k < to; k++) this.env[this.e++] = b[k]!
    if (then !== undefined) this.env[this.e++] = then
  }

  /** The row starting at the read position. */
  row(): void {
    const s = this.s
    const b = s.b
    if (b[s.i] !== 0x7b) throw GIVE_UP
    const [start, o0] = [s.i, s.o]
    this.keep(start, 0x30)
    s.p = 0
    s.odd = false
    s.object(1)
    this.kept = s.i
    if (!s.odd) {
      this.digests.push(digestBytes(py.subarray(0, s.p)))
      this.units += s.o - o0
      this.ends.push(this.units)
      return
    }
    // Parsed alone, as the whole body would have been (a row starts and ends at ASCII, so decoding it alone
    // gives the same characters).
    const raw = Buffer.from(b.buffer, b.byteOffset + start, s.i - start)
    const { python, compact } = dumpsBoth(JSON.parse(isAscii(raw) ? raw.toString('latin1') : raw.toString('utf8')))
    this.digests.push(digestBytes(python))
    const bytes = Buffer.byteLength(compact, 'utf8')
    s.o = o0
    s.room(bytes)
    Buffer.from(out.buffer, out.byteOffset, out.byteLength).write(compact, s.o, 'utf8')
    s.o += bytes
    if (bytes !== compact.length) this.utf8 = true
    this.units += compact.length
    this.ends.push(this.units)
  }

  /** An update without a row (a pop): an empty text. */
  none(): void {
    this.digests.push('')
    this.ends.push(this.units)
  }
}

/** Walks an object of the envelope, handing each key to `field` (which must consume its value); repeated keys give up. */
export function fields(s: Scan, field: (key: string) => void): void {
  const b = s.b
  s.ws()
  s.expect(0x7b)
  s.ws()
  if (b[s.i] === 0x7d) {
    s.i++
    return
  }
  const seen = new Set<string>()
  for (;;) {
    const k = s.key()
    if (seen.has(k)) throw GIVE_UP
    seen.add(k)
    field(k)
    s.ws()
    const c = b[s.i++]
    if (c === 0x7d) return
    if (c !== COMMA) throw GIVE_UP
    s.ws()
  }
}

export function elements(s: Scan, each: (i: number) => void): void {
  const b = s.b
  s.expect(0x5b)
  s.ws()
  if (b[s.i] === 0x5d) {
    s.i++
    return
  }
  for (let n = 0; ; n++) {
    each(n)
    s.ws()
    const c = b[s.i++]
    if (c === 0x5d) return
    if (c !== COMMA) throw GIVE_UP
    s.ws()
  }
}

/**
 * The rows of a create (`table.rows`) or update (`updates[i].append.row` / `.insert.row`) body, digested, and the
 * body without them; null when the body is for the whole-body path (see above). The texts are written over the
 * body's bytes (after the scan: a null answer leaves them as they were).
 */
export function scanTableBody(body: Uint8Array, route: 'create' | 'update'): ScannedBody | null {
  const s = new Scan(body)
  const rows = new Rows(s)
  let updates = 0
  try {
    fields(s, (k) => {
      if (route === 'create' && k === 'table') fields(s, (k2) => (k2 === 'rows' ? elements(s, () => rows.row()) : s.skip()))
      else if (route === 'update' && k === 'updates')
        elements(s, () => {
          updates++
          let has = false
          fields(s, (k2) => {
            if (k2 !== 'append' && k2 !== 'insert') return s.skip()
            fields(s, (k3) => {
              if (k3 !== 'row') return s.skip()
              if (has) throw GIVE_UP
              has = true
              rows.row()
            })
          })
          if (!has) rows.none()
        })
      else s.skip()
    })
    s.ws()
    if (s.i !== body.length) throw GIVE_UP
  } catch (e) {
    if (e === GIVE_UP) return null
    throw e
  }
  if (route === 'update' && rows.ends.length !== updates) return null
  rows.keep(body.length)
  const env = Buffer.from(rows.env.buffer, 0, rows.e)
  // The texts go back in the body's own buffer when they fit (it is the worker's, and its pages are touched).
  const text = s.o <= body.length ? body.subarray(0, s.o) : new Uint8Array(s.o)
  text.set(out.subarray(0, s.o))
  return {
    envelope: isAscii(env) ? env.toString('latin1') : env.toString('utf8'),
    rows: { digests: rows.digests, text, ends: Int32Array.from(rows.ends), utf8: rows.utf8 },
  }
}
