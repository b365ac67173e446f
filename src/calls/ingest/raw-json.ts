import { randomBytes } from 'node:crypto'
import { isUtf8 } from 'node:buffer'

/**
 * The fast path of ingest parsing. A call's inputs, output and attributes are most of its bytes and
 * are only stored, never looked into, so parsing them into objects and serialising them again is
 * wasted work (it was two thirds of an ingest worker's time, with the garbage it makes). This scanner
 * checks that a body is valid JSON, byte by byte, and hands those values on as bytes (RawJson); only
 * the rest of the body is parsed into objects, by JSON.parse. Anything unusual — invalid or non-UTF-8
 * bodies, escaped keys on the way to those values, lone surrogates, deep nesting — returns null and
 * the caller parses the body whole, so errors and odd cases keep one code path.
 */
export class RawJson {
  constructor(
    /** One JSON object or array, exactly as sent (a view into the request body). */
    readonly bytes: Uint8Array,
    /** The Weave refs (strings starting with weave:///) among its values, for the input/output ref filters. */
    readonly refs: string[],
    /**
     * Whether the bytes are already as DuckDB's JSON reader writes the value back (no whitespace between tokens, no
     * \u or \/ escapes, no -0, fractions and exponents in their shortest form; see isExact): such a value can reach
     * the tail as a JSON string, copied, instead of being parsed and serialised again (see encodeParts).
     */
    readonly exact = false,
  ) {}
}

/** Which values are passed on as bytes: the kind of call object they sit in, and the key. */
const RAW_KEYS = { start: ['inputs', 'attributes'], end: ['output'] } as const
const REF_KEYS = new Set(['inputs', 'output'])
const MAX_DEPTH = 256
const KEY_NAMES = ['batch', 'req', 'start', 'end', 'inputs', 'attributes', 'output'].map((k) => [k, Buffer.from(k)] as const)

const QUOTE = 0x22
const BACKSLASH = 0x5c
const WEAVE_REF = Buffer.from('weave:///')
/**
 * Stand-ins for the raw values while the rest is parsed: an object holding a key no client can know
 * (96 random bits drawn when the worker starts, never sent anywhere).
 */
const NONCE = randomBytes(12).toString('hex')

class Bail extends Error {}
const bail = new Bail()

type Route = 'start' | 'end' | 'batch'

/**
 * The body of /call/start, /call/end or /call/upsert_batch as JSON.parse would give it, except that
 * start inputs/attributes objects and end outputs that are objects or arrays are RawJson; null when
 * the body must take the ordinary path.
 */
export function parseWithRawValues(body: Uint8Array, route: Route): unknown {
  if (body.length === 0 || !isUtf8(body)) return null
  const s = new Scanner(body)
  try {
    s.ws()
    if (route === 'batch') s.object(0, (key, depth) => (key === 'batch' ? s.array(depth, (d) => s.item(d)) : s.skip(depth)))
    else s.object(0, (key, depth) => (key === route ? s.call(route, depth) : s.skip(depth)))
    s.ws()
    if (s.p !== body.length) return null
  } catch (e) {
    if (e === bail) return null
    throw e
  }
  const value = JSON.parse(s.skeleton()) as Record<string, unknown>
  const put = (call: unknown, kind: 'start' | 'end') => {
    if (!call || typeof call !== 'object') return
    const c = call as Record<string, unknown>
    for (const k of RAW_KEYS[kind]) {
      const v = c[k] as Record<string, unknown> | undefined
      if (v && typeof v === 'object' && typeof v[NONCE] === 'number') c[k] = s.raws[v[NONCE] as number]
    }
  }
  if (route === 'batch') {
    if (Array.isArray(value?.batch)) {
      for (const item of value.batch as { req?: { start?: unknown; end?: unknown } }[]) {
        if (item && typeof item === 'object' && item.req && typeof item.req === 'object') {
          put(item.req.start, 'start')
          put(item.req.end, 'end')
        }
      }
    }
  } else put(value?.[route], route)
  return value
}

class Scanner {
  p = 0
  readonly raws: RawJson[] = []
  /** Set when the value being scanned holds something DuckDB would write differently (see RawJson.exact). */
  private loose = false
  /** Where raw values start and end in the body, in order, for the skeleton. */
  private readonly cuts: number[] = []

  /** The next backslash at or after the last place looked from (Infinity: none left). */
  private nextBackslash = -1
  private readonly b: Uint8Array
  private readonly buf: Buffer
  /** The body's bytes four at a time, from its first 4-aligned byte (`wordBase`), for controlFree. */
  private readonly words: Uint32Array
  private readonly wordBase: number

  constructor(body: Uint8Array) {
    // One concrete type for the byte loops (a Buffer here and a Uint8Array there makes them polymorphic).
    this.b = new Uint8Array(body.buffer, body.byteOffset, body.byteLength)
    this.buf = Buffer.from(body.buffer, body.byteOffset, body.byteLength)
    this.wordBase = Math.min((4 - (body.byteOffset & 3)) & 3, body.byteLength)
    this.words = new Uint32Array(body.buffer, body.byteOffset + this.wordBase, (body.byteLength - this.wordBase) >>> 2)
  }

  /**
   * Whether bytes [from, to) hold no control character (< 0x20, which JSON strings must escape). Four bytes a step: a
   * word has a byte below 0x20 exactly when (w - 0x20202020) & ~w & 0x80808080 is not 0 (the "has less than" test of
   * the bit-twiddling hacks, exact for a bound up to 0x80). A byte a step (~2 ns a byte) made the scan of the ingest
   * bench's batches (1 KB strings) 12.1 µs a call against 10.7 this way (fastest of 30 rounds; medians 19.1 and 15.8).
   */
  private controlFree(from: number, to: number): boolean {
    const b = this.b
    const base = this.wordBase
    let i = from
    for (; i < to && (i < base || ((i - base) & 3) !== 0); i++) if (b[i]! < 0x20) return false
    const words = this.words
    const last = (to - base) >> 2
    for (let w = (i - base) >> 2; w < last; w++) {
      const x = words[w]!
      if (((x - 0x20202020) & ~x & 0x80808080) !== 0) return false
    }
    for (i = Math.max(i, base + last * 4); i < to; i++) if (b[i]! < 0x20) return false
    return true
  }

  /** The body with each raw value replaced by its stand-in. */
  skeleton(): string {
    const pieces: Uint8Array[] = []
    let at = 0
    for (let i = 0; i < this.raws.length; i++) {
      pieces.push(this.b.subarray(at, this.cuts[2 * i]), Buffer.from(`{"${NONCE}":${i}}`))
      at = this.cuts[2 * i + 1]!
    }
    pieces.push(this.b.subarray(at))
    return Buffer.concat(pieces).toString('utf8')
  }

  ws(): void {
    const b = this.b
    let p = this.p
    for (;;) {
      const c = b[p]
      if (c === 0x20 || c === 0x0a || c === 0x0d || c === 0x09) p++
      else break
    }
    if (p !== this.p) this.loose = true
    this.p = p
  }

  private expect(c: number): void {
    if (this.b[this.p] !== c) throw bail
    this.p++
  }

  /** An object; each key's value is left to `member` (positioned at the value). */
  object(depth: number, member: (key: string | null, depth: number) => void): void {
    if (depth > MAX_DEPTH) throw bail
    this.expect(0x7b)
    this.ws()
    if (this.b[this.p] === 0x7d) {
      this.p++
      return
    }
    for (;;) {
      const key = this.key()
      this.ws()
      this.expect(0x3a)
      this.ws()
      member(key, depth + 1)
      this.ws()
      const c = this.b[this.p++]
      if (c === 0x7d) return
      if (c !== 0x2c) throw bail
      this.ws()
    }
  }

  array(depth: number, element: (depth: number) => void): void {
    if (depth > MAX_DEPTH) throw bail
    this.expect(0x5b)
    this.ws()
    if (this.b[this.p] === 0x5d) {
      this.p++
      return
    }
    for (;;) {
      element(depth + 1)
      this.ws()
      const c = this.b[this.p++]
      if (c === 0x5d) return
      if (c !== 0x2c) throw bail
      this.ws()
    }
  }

  /** The key if it is one of the names the walk looks for (written without escapes); null otherwise. */
  private key(): string | null {
    const start = this.p + 1
    const escaped = this.string()
    const length = this.p - 1 - start
    if (escaped) return null
    for (const [name, bytes] of KEY_NAMES) {
      if (bytes.length !== length) continue
      let i = 0
      while (i < length && this.b[start + i] === bytes[i]) i++
      if (i === length) return name
    }
    return null
  }

  /** One batch item: {mode, req: {start | end}}. */
  item(depth: number): void {
    if (this.b[this.p] !== 0x7b) return this.skip(depth)
    this.object(depth, (key, d) => {
      if (key !== 'req' || this.b[this.p] !== 0x7b) return this.skip(d)
      this.object(d, (k, dd) => (k === 'start' || k === 'end' ? this.call(k, dd) : this.skip(dd)))
    })
  }

  /** A start or end object: its raw-kept keys are recorded, the rest skipped. */
  call(kind: 'start' | 'end', depth: number): void {
    if (this.b[this.p] !== 0x7b) return this.skip(depth)
    const keys: readonly string[] = RAW_KEYS[kind]
    this.object(depth, (key, d) => {
      const c = this.b[this.p]
      if (key === null || !keys.includes(key) || !(c === 0x7b || (kind === 'end' && c === 0x5b))) return this.skip(d)
      const start = this.p
      const refs: string[] = []
      this.loose = false
      this.skip(d, REF_KEYS.has(key) ? refs : undefined)
      this.cuts.push(start, this.p)
      this.raws.push(new RawJson(this.b.subarray(start, this.p), [...new Set(refs)], !this.loose))
    })
  }

  /** Any value, checked; with `refs`, the Weave refs among its string values are collected. */
  skip(depth: number, refs?: string[]): void {
    const b = this.b
    const c = b[this.p]
    if (c === QUOTE) {
      const start = this.p
      const escaped = this.string()
      if (refs && this.p - start - 2 >= WEAVE_REF.length) {
        const prefix = refPrefix(b, start + 1)
        if (prefix !== 'no') {
          const text = Buffer.from(b.buffer, b.byteOffset + start, this.p - start).toString('utf8')
          const value = escaped ? (JSON.parse(text) as string) : text.slice(1, -1)
          if (prefix === 'yes' || value.startsWith('weave:///')) refs.push(value)
        }
      }
    } else if (c === 0x7b) this.object(depth, (_k, d) => this.skip(d, refs))
    else if (c === 0x5b) this.array(depth, (d) => this.skip(d, refs))
    else if (c === 0x74) this.word('true')
    else if (c === 0x66) this.word('false')
    else if (c === 0x6e) this.word('null')
    else this.number()
  }

  private word(w: string): void {
    for (let i = 0; i < w.length; i++) if (this.b[this.p + i] !== w.charCodeAt(i)) throw bail
    this.p += w.length
  }

  /** -?(0|[1-9]d*)(.d+)?([eE][+-]?d+)? */
  private number(): void {
    const b = this.b
    const start = this.p
    let p = start
    if (b[p] === 0x2d) p++
    if (b[p] === 0x30) p++
    else if (isDigit(b[p])) while (isDigit(b[p])) p++
    else throw bail
    const integer = p
    if (b[p] === 0x2e) {
      p++
      if (!isDigit(b[p])) throw bail
      while (isDigit(b[p])) p++
    }
    if (b[p] === 0x65 || b[p] === 0x45) {
      p++
      if (b[p] === 0x2b || b[p] === 0x2d) p++
      if (!isDigit(b[p])) throw bail
      while (isDigit(b[p])) p++
    }
    if (p !== integer) this.loose ||= !isExact(this.buf.toString('latin1', start, p))
    else if (p - start === 2 && b[start] === 0x2d && b[start + 1] === 0x30) this.loose = true // -0 comes back 0
    this.p = p
  }

  /** A string (positioned at its quote), checked; true when it holds escapes. Quotes and backslashes are found with memchr. */
  private string(): boolean {
    const b = this.b
    if (b[this.p] !== QUOTE) throw bail
    let p = this.p + 1
    // Short strings (keys, ids, names) end sooner than a call into indexOf returns.
    for (const stop = Math.min(p + 48, b.length); p < stop; p++) {
      const c = b[p]!
      if (c === QUOTE) {
        this.p = p + 1
        return false
      }
      if (c === BACKSLASH) break
      if (c < 0x20) throw bail
    }
    let escaped = false
    for (;;) {
      const q = this.buf.indexOf(QUOTE, p)
      if (q < 0) throw bail
      if (this.nextBackslash < p) {
        const x = this.buf.indexOf(BACKSLASH, p)
        this.nextBackslash = x < 0 ? Infinity : x
      }
      const end = Math.min(q, this.nextBackslash)
      if (!this.controlFree(p, end)) throw bail
      if (this.nextBackslash > q) {
        this.p = q + 1
        return escaped
      }
      escaped = true
      p = this.nextBackslash + 1
      const e = b[p++]
      if (e === 0x75) {
        let code = 0
        for (let i = 0; i < 4; i++) {
          const h = hexValue(b[p++])
          if (h < 0) throw bail
          code = code * 16 + h
        }
        // Surrogate escapes: DuckDB's JSON reader refuses lone ones; pairs are rare enough to take the slow path.
        if (code >= 0xd800 && code <= 0xdfff) throw bail
        this.loose = true
      } else if (e === 0x2f) this.loose = true
      else if (!(e === QUOTE || e === BACKSLASH || e === 0x2f || e === 0x62 || e === 0x66 || e === 0x6e || e === 0x72 || e === 0x74))
        throw bail
    }
  }
}

/**
 * Whether a number with a fraction or an exponent is written back by DuckDB's JSON reader (yyjson) as it is: the
 * shortest text that reads back as the same double, like JavaScript's, but with `.0` after a whole number and no
 * `+` in an exponent (2.5e3 comes back 2500.0, 1.50 as 1.5, 1e+21 as 1e21). Integers always come back as sent
 * (past 64 bits too), except -0. Checked against DuckDB on 35,000 numbers (bench/README, Soak: none accepted wrongly).
 */
function isExact(text: string): boolean {
  const x = Number(text)
  if (!Number.isFinite(x)) return false
  const s = String(x)
  return (s.includes('e') ? s.replace('e+', 'e') : s.includes('.') ? s : `${s}.0`) === text
}

function isDigit(c: number | undefined): boolean {
  return c !== undefined && c >= 0x30 && c <= 0x39
}

function hexValue(c: number | undefined): number {
  if (c === undefined) return -1
  if (c >= 0x30 && c <= 0x39) return c - 0x30
  if (c >= 0x61 && c <= 0x66) return c - 0x57
  if (c >= 0x41 && c <= 0x46) return c - 0x37
  return -1
}

/** Whether the string starting at `at` is a Weave ref: 'maybe' when an escape comes first and only decoding can tell. */
function refPrefix(b: Uint8Array, at: number): 'yes' | 'no' | 'maybe' {
  for (let i = 0; i < WEAVE_REF.length; i++) {
    if (b[at + i] === BACKSLASH) return 'maybe'
    if (b[at + i] !== WEAVE_REF[i]) return 'no'
  }
  return 'yes'
}
