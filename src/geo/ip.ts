/**
 * Strict IP address text parsing and canonical formatting.
 *
 * The parsers are hand-written scanners rather than regexes: the input comes straight from query
 * strings and X-Forwarded-For headers, and a hand scan is linear by construction. Internally an
 * address is four 32-bit words (IPv4 uses only the last), which lets the geo index search without
 * creating a BigInt per comparison.
 */

export type IpVersion = 4 | 6

export interface ParsedIp {
  version: IpVersion
  value: bigint
}

/** Longest valid text: `ffff:ffff:ffff:ffff:ffff:ffff:255.255.255.255`. */
export const MAX_IP_TEXT_LENGTH = 45

const MAX_V4 = 0xffffffffn
const MAX_V6 = (1n << 128n) - 1n
const MAPPED_PREFIX = 0xffffn

const groups = new Uint16Array(8)
const scratchWords = new Uint32Array(4)

function hexValue(c: number): number {
  if (c >= 48 && c <= 57) return c - 48
  if (c >= 97 && c <= 102) return c - 87
  if (c >= 65 && c <= 70) return c - 55
  return -1
}

/** Dotted quad in s[from, to) as an unsigned 32-bit number, or -1. */
function parseV4(s: string, from: number, to: number): number {
  let value = 0
  let parts = 0
  let i = from
  for (;;) {
    const begin = i
    let octet = 0
    while (i < to) {
      const c = s.charCodeAt(i)
      if (c < 48 || c > 57) break
      octet = octet * 10 + (c - 48)
      if (octet > 255) return -1
      i++
    }
    const len = i - begin
    // A leading zero is rejected because some resolvers read it as octal.
    if (len === 0 || (len > 1 && s.charCodeAt(begin) === 48)) return -1
    value = value * 256 + octet
    parts++
    if (i === to) break
    if (parts === 4 || s.charCodeAt(i) !== 46) return -1
    i++
  }
  return parts === 4 ? value : -1
}

/** RFC 4291 section 2.2 text into `out` as four words; false if s is not exactly such an address. */
function parseV6(s: string, out: Uint32Array): boolean {
  const n = s.length
  let i = 0
  let count = 0
  let gapAt = -1
  if (s.charCodeAt(0) === 58) {
    if (s.charCodeAt(1) !== 58) return false
    gapAt = 0
    i = 2
  }
  while (i < n) {
    if (count === 8) return false
    const begin = i
    let v = 0
    while (i < n) {
      const h = hexValue(s.charCodeAt(i))
      if (h < 0) break
      v = v * 16 + h
      i++
    }
    if (i < n && s.charCodeAt(i) === 46) {
      if (count > 6) return false
      const v4 = parseV4(s, begin, n)
      if (v4 < 0) return false
      groups[count++] = v4 >>> 16
      groups[count++] = v4 & 0xffff
      break
    }
    const len = i - begin
    if (len === 0 || len > 4) return false
    groups[count++] = v
    if (i === n) break
    if (s.charCodeAt(i) !== 58) return false
    i++
    if (s.charCodeAt(i) === 58) {
      if (gapAt >= 0) return false
      gapAt = count
      i++
    } else if (i === n) {
      return false
    }
  }
  // "::" stands for at least one zero group, so it cannot accompany eight explicit ones.
  if (gapAt < 0 ? count !== 8 : count > 7) return false
  const fill = 8 - count
  for (let w = 0; w < 4; w++) {
    const hi = groupAt(2 * w, gapAt, fill, count)
    const lo = groupAt(2 * w + 1, gapAt, fill, count)
    out[w] = hi * 65536 + lo
  }
  return true
}

function groupAt(pos: number, gapAt: number, fill: number, count: number): number {
  if (gapAt < 0 || pos < gapAt) return groups[pos]!
  if (pos < gapAt + fill) return 0
  const k = pos - fill
  return k < count ? groups[k]! : 0
}

/**
 * Parses text into four words (IPv4: the address in out[3], the rest zero). Returns the version, or
 * 0 if the text is not an address. For callers that want to avoid BigInt; most want `parseIp`.
 */
export function parseIpWords(text: string, out: Uint32Array): 0 | IpVersion {
  const n = text.length
  if (n === 0 || n > MAX_IP_TEXT_LENGTH) return 0
  if (text.indexOf(':') >= 0) return parseV6(text, out) ? 6 : 0
  const v4 = parseV4(text, 0, n)
  if (v4 < 0) return 0
  out[0] = 0
  out[1] = 0
  out[2] = 0
  out[3] = v4
  return 4
}

/** Words back to a BigInt (words at out[offset..offset+width)). */
export function wordsToBigInt(words: ArrayLike<number>, offset: number, width: number): bigint {
  let v = 0n
  for (let k = 0; k < width; k++) v = (v << 32n) | BigInt(words[offset + k]!)
  return v
}

/**
 * Strict parser: an IPv4 dotted quad (no leading zeros, no whitespace) or any RFC 4291 IPv6 text
 * form (compressed, mixed case, embedded IPv4 tail). Zone ids, brackets and ports are rejected.
 */
export function parseIp(text: string): ParsedIp | null {
  const version = parseIpWords(text, scratchWords)
  if (version === 0) return null
  if (version === 4) return { version, value: BigInt(scratchWords[3]!) }
  return { version, value: wordsToBigInt(scratchWords, 0, 4) }
}

/** True for the words of an IPv4-mapped IPv6 address, ::ffff:0:0/96. */
export function isMappedWords(words: ArrayLike<number>, offset = 0): boolean {
  return words[offset] === 0 && words[offset + 1] === 0 && words[offset + 2] === 0xffff
}

/**
 * An IPv4-mapped IPv6 address (how a dual-stack socket reports an IPv4 peer) as the IPv4 address
 * it carries; anything else unchanged.
 */
export function normalizeMapped(ip: ParsedIp): ParsedIp {
  if (ip.version === 6 && ip.value >> 32n === MAPPED_PREFIX) return { version: 4, value: ip.value & MAX_V4 }
  return ip
}

function formatV4(v: number): string {
  return `${v >>> 24}.${(v >>> 16) & 255}.${(v >>> 8) & 255}.${v & 255}`
}

/** Canonical text from words: IPv4 from words[offset] alone; IPv6 from four words. */
export function formatIpWords(version: IpVersion, words: ArrayLike<number>, offset = 0): string {
  if (version === 4) return formatV4(words[offset]!)
  // RFC 5952 section 5: a mapped address keeps its IPv4 tail in dotted form.
  if (isMappedWords(words, offset)) return `::ffff:${formatV4(words[offset + 3]!)}`
  for (let w = 0; w < 4; w++) {
    const word = words[offset + w]!
    groups[2 * w] = word >>> 16
    groups[2 * w + 1] = word & 0xffff
  }
  let bestAt = -1
  let bestLen = 1
  for (let k = 0; k < 8;) {
    if (groups[k] !== 0) {
      k++
      continue
    }
    let end = k
    while (end < 8 && groups[end] === 0) end++
    // Strictly longer only, so the first of equally long runs wins (RFC 5952 section 4.2.3).
    if (end - k > bestLen) {
      bestAt = k
      bestLen = end - k
    }
    k = end
  }
  let text = ''
  for (let k = 0; k < 8; k++) {
    if (k === bestAt) {
      text += '::'
      k += bestLen - 1
      continue
    }
    if (text !== '' && !text.endsWith(':')) text += ':'
    text += groups[k]!.toString(16)
  }
  return text
}

/** Writes value as `width` words at out[offset..]. */
export function bigIntToWords(value: bigint, out: Uint32Array, offset: number, width: number): void {
  let v = value
  for (let k = width - 1; k >= 0; k--) {
    out[offset + k] = Number(v & 0xffffffffn)
    v >>= 32n
  }
}

/**
 * Canonical text: IPv4 dotted decimal; IPv6 per RFC 5952 (lowercase, no leading zeros, the longest
 * run of two or more zero groups as "::", the first on ties, ::ffff:a.b.c.d for IPv4-mapped).
 */
export function formatIp(version: IpVersion, value: bigint): string {
  if (value < 0n || value > (version === 4 ? MAX_V4 : MAX_V6)) {
    throw new RangeError(`${value} is not an IPv${version} address`)
  }
  if (version === 4) return formatV4(Number(value))
  bigIntToWords(value, scratchWords, 0, 4)
  return formatIpWords(6, scratchWords, 0)
}
