/**
 * IP-to-country index over the geo-whois-asn-country range files (CC BY 4.0 by the NRO), held in
 * typed arrays and searched by bisection.
 *
 * The published files are sorted by range start but not disjoint: more specific ranges (geofeed
 * entries, reassignments) are listed after, and inside, the block that contains them, and a few
 * ranges overlap partially or repeat with another country. Where ranges overlap, the narrowest
 * range containing the address wins (the later row on equal width), as in longest-prefix routing.
 * The answer reports that row exactly as the file has it, so file_index and the range identify a
 * line of the CSV; other rows may still sit inside that range.
 */
import { existsSync } from 'node:fs'
import { readFile } from 'node:fs/promises'
import { createRequire } from 'node:module'
import path from 'node:path'
import { formatIpWords, isMappedWords, parseIpWords, wordsToBigInt, type IpVersion } from './ip.js'

export const GEO_PACKAGE = '@ip-location-db/geo-whois-asn-country'

/** `file_index` of ranges from the IPv4 file. */
export const FILE_INDEX_IPV4 = 0
/** `file_index` of ranges from the IPv6 file. */
export const FILE_INDEX_IPV6 = 1
/** The range files, by file_index. */
export const GEO_FILES = ['geo-whois-asn-country-ipv4-num.csv', 'geo-whois-asn-country-ipv6-num.csv'] as const

export interface GeoLocation {
  file_index: number
  range_start_int: bigint
  range_end_int: bigint
  range_start_ip: string
  range_end_ip: string
  country_code: string
  country_name: string
}

export interface GeoResult {
  /** Canonical text of the address looked up (IPv4 for an IPv4-mapped IPv6 address). */
  ip: string
  location: GeoLocation
}

export type GeoLookup = { ok: true; result: GeoResult } | { ok: false; error: 'invalid_ip' } | { ok: false; error: 'not_found'; ip: string }

export interface GeoStats {
  ipv4Rows: number
  ipv6Rows: number
  /** Rows that overlap an earlier row of the same file (resolved as described above). */
  ipv4OverlappingRows: number
  ipv6OverlappingRows: number
  countries: number
  loadMs: number
}

export interface LoadGeoOptions {
  /** Directory holding the two -num.csv files; the installed package by default. */
  dir?: string
}

/** Marks a stretch of address space no row covers. */
const NONE = 0xffffffff
const WORD = 4294967296

/** One file's rows plus the boundary table the search runs over. */
interface Family {
  version: IpVersion
  fileIndex: number
  /** 32-bit words per address: 1 for IPv4, 4 for IPv6. */
  width: 1 | 4
  rows: number
  /** Row starts and ends, `width` words each, as in the file. */
  rowStart: Uint32Array
  rowEnd: Uint32Array
  rowCountry: Uint16Array
  /**
   * Disjoint cover of the address space from the first row on: boundary i spans from
   * boundStart[i] to just before boundStart[i + 1] and answers with row boundRow[i] (or NONE).
   */
  boundStart: Uint32Array
  boundRow: Uint32Array
  bounds: number
  overlappingRows: number
}

let regionNames: Intl.DisplayNames | undefined

function countryName(code: string): string {
  try {
    regionNames ??= new Intl.DisplayNames(['en'], { type: 'region' })
    const name = regionNames.of(code)
    return name && name !== code ? name : code
  } catch {
    return code
  }
}

/** Country codes by index; the row tables hold the index. */
class CountryTable {
  readonly codes: string[] = []
  private readonly byPair = new Int16Array(26 * 26).fill(-1)

  /** Index of the code whose ASCII letters are a and b (both already checked to be A-Z). */
  indexOf(a: number, b: number): number {
    const key = (a - 65) * 26 + (b - 65)
    let idx = this.byPair[key]!
    if (idx < 0) {
      idx = this.codes.length
      this.codes.push(String.fromCharCode(a, b))
      this.byPair[key] = idx
    }
    return idx
  }
}

class CsvError extends Error {}

function fail(file: string, line: number, msg: string): never {
  throw new CsvError(`${file} line ${line}: ${msg}`)
}

/** -1, 0 or 1 comparing `width`-word numbers a[ai..] and b[bi..]. */
function compare(a: Uint32Array, ai: number, b: Uint32Array, bi: number, width: number): number {
  for (let k = 0; k < width; k++) {
    const x = a[ai + k]!
    const y = b[bi + k]!
    if (x !== y) return x < y ? -1 : 1
  }
  return 0
}

function copy(a: Uint32Array, ai: number, out: Uint32Array, oi: number, width: number): void {
  for (let k = 0; k < width; k++) out[oi + k] = a[ai + k]!
}

/** Sets out[oi..] to a[ai..] + 1; false if that overflows the address space. */
function increment(a: Uint32Array, ai: number, out: Uint32Array, oi: number, width: number): boolean {
  let carry = 1
  for (let k = width - 1; k >= 0; k--) {
    const x = a[ai + k]! + carry
    out[oi + k] = x
    carry = x === WORD ? 1 : 0
  }
  return carry === 0
}

/** Reads a decimal integer at buf[pos..] into out[oi]; the position after it, or -1 if absent or above 2^32 - 1. */
function readDecimal32(buf: Buffer, pos: number, out: Uint32Array, oi: number): number {
  const len = buf.length
  let i = pos
  let v = 0
  while (i < len) {
    const c = buf[i]!
    if (c < 48 || c > 57) break
    v = v * 10 + (c - 48)
    if (v > 0xffffffff) return -1
    i++
  }
  if (i === pos) return -1
  out[oi] = v
  return i
}

const limbs = new Uint32Array(8)

/** As readDecimal32 for a 128-bit integer, written as four words at out[oi..]. */
function readDecimal128(buf: Buffer, pos: number, out: Uint32Array, oi: number): number {
  const len = buf.length
  let i = pos
  // 16-bit limbs times 10^4 plus carry stay below 2^31, so this is all small-integer arithmetic.
  limbs.fill(0)
  while (i < len) {
    let chunk = 0
    let scale = 1
    while (i < len && scale < 10000) {
      const c = buf[i]!
      if (c < 48 || c > 57) break
      chunk = chunk * 10 + (c - 48)
      scale *= 10
      i++
    }
    if (scale === 1) break
    let carry = chunk
    for (let k = 7; k >= 0; k--) {
      const x = limbs[k]! * scale + carry
      limbs[k] = x & 0xffff
      carry = x >>> 16
    }
    if (carry !== 0) return -1
    if (scale < 10000) break
  }
  if (i === pos) return -1
  for (let w = 0; w < 4; w++) out[oi + w] = limbs[2 * w]! * 65536 + limbs[2 * w + 1]!
  return i
}

/** Parses `start,end,CC` lines, checking each row and that starts never decrease. */
function parseRows(buf: Buffer, file: string, width: 1 | 4, countries: CountryTable) {
  let capacity = 1
  for (let p = buf.indexOf(10); p !== -1; p = buf.indexOf(10, p + 1)) capacity++
  const rowStart = new Uint32Array(capacity * width)
  const rowEnd = new Uint32Array(capacity * width)
  const rowCountry = new Uint16Array(capacity)
  const readDecimal = width === 1 ? readDecimal32 : readDecimal128
  const len = buf.length
  let rows = 0
  let line = 0
  let pos = 0
  while (pos < len) {
    line++
    if (buf[pos] === 10 || (buf[pos] === 13 && buf[pos + 1] === 10)) {
      pos += buf[pos] === 10 ? 1 : 2
      continue
    }
    const o = rows * width
    pos = readDecimal(buf, pos, rowStart, o)
    if (pos < 0 || buf[pos] !== 44) fail(file, line, 'expected a range start (decimal integer within the address space) and a comma')
    pos = readDecimal(buf, pos + 1, rowEnd, o)
    if (pos < 0 || buf[pos] !== 44) fail(file, line, 'expected a range end (decimal integer within the address space) and a comma')
    const a = buf[pos + 1]
    const b = buf[pos + 2]
    if (a === undefined || b === undefined || a < 65 || a > 90 || b < 65 || b > 90)
      fail(file, line, 'expected a two-letter upper-case country code')
    pos += 3
    if (buf[pos] === 13) pos++
    if (pos < len && buf[pos] !== 10) fail(file, line, 'unexpected text after the country code')
    pos++
    if (compare(rowStart, o, rowEnd, o, width) > 0) fail(file, line, 'range start is after range end')
    if (rows > 0 && compare(rowStart, o - width, rowStart, o, width) > 0) fail(file, line, 'rows are not sorted by range start')
    rowCountry[rows] = countries.indexOf(a, b)
    rows++
  }
  if (rows === 0) throw new CsvError(`${file}: no ranges`)
  return { rowStart, rowEnd, rowCountry, rows }
}

type Rows = ReturnType<typeof parseRows>

/**
 * The disjoint boundary table under construction: each entry is the first address of a stretch
 * and the row that answers for it (NONE for a gap). Each row adds at most its start and the
 * address after its end; each gap adds one.
 */
class Boundaries {
  start: Uint32Array
  row: Uint32Array
  count = 0

  constructor(
    private readonly file: string,
    private readonly width: number,
    rows: number,
  ) {
    this.start = new Uint32Array((2 * rows + 1) * width)
    this.row = new Uint32Array(2 * rows + 1)
  }

  /** Appends a stretch starting at `src[si..]`; a stretch answered by the same row as the last one extends it. */
  emit(src: Uint32Array, si: number, row: number): void {
    const { width, count } = this
    if (count > 0 && this.row[count - 1] === row) return
    if (count > 0 && compare(this.start, (count - 1) * width, src, si, width) >= 0) {
      throw new Error(`${this.file}: internal error, range boundaries out of order near row ${row + 1}`)
    }
    copy(src, si, this.start, count * width, width)
    this.row[this.count++] = row
  }

  /** Gives back the over-allocation: the table lives as long as the process. */
  trim(): void {
    this.start = this.start.slice(0, this.count * this.width)
    this.row = this.row.slice(0, this.count)
  }
}

/**
 * Walks the rows in clusters of overlapping rows: runs of rows that do not overlap map one to one;
 * each cluster is swept point by point. Returns how many rows overlap an earlier one.
 */
function walkClusters(r: Rows, width: number, out: Boundaries): number {
  const { rowStart, rowEnd, rows } = r
  const point = new Uint32Array(width)
  const clusterEnd = new Uint32Array(width)
  const prevEnd = new Uint32Array(width)
  let prevEndValid = false
  let overlappingRows = 0
  let i = 0
  while (i < rows) {
    copy(rowEnd, i * width, clusterEnd, 0, width)
    let j = i + 1
    while (j < rows && compare(rowStart, j * width, clusterEnd, 0, width) <= 0) {
      if (compare(rowEnd, j * width, clusterEnd, 0, width) > 0) copy(rowEnd, j * width, clusterEnd, 0, width)
      j++
    }
    if (prevEndValid && increment(prevEnd, 0, point, 0, width) && compare(point, 0, rowStart, i * width, width) < 0) {
      out.emit(point, 0, NONE)
    }
    if (j === i + 1) {
      out.emit(rowStart, i * width, i)
    } else {
      overlappingRows += j - i - 1
      sweepCluster(r, width, i, j, point, out)
    }
    copy(clusterEnd, 0, prevEnd, 0, width)
    prevEndValid = true
    i = j
  }
  if (increment(prevEnd, 0, point, 0, width)) out.emit(point, 0, NONE)
  return overlappingRows
}

/**
 * Rows `from..to-1` overlap: at every start and every end + 1 among them, the narrowest row
 * covering the point (the later one on equal width) answers. Rare enough to do in BigInt.
 */
function sweepCluster(r: Rows, width: number, from: number, to: number, point: Uint32Array, out: Boundaries): void {
  const k = to - from
  const s: bigint[] = new Array(k)
  const e: bigint[] = new Array(k)
  const points: bigint[] = []
  for (let x = 0; x < k; x++) {
    s[x] = wordsToBigInt(r.rowStart, (from + x) * width, width)
    e[x] = wordsToBigInt(r.rowEnd, (from + x) * width, width)
    points.push(s[x]!, e[x]! + 1n)
  }
  points.sort((x, y) => (x < y ? -1 : x > y ? 1 : 0))
  const last = points[points.length - 1]!
  const active: number[] = []
  let next = 0
  let prev = -1n
  for (const p of points) {
    if (p === prev) continue
    prev = p
    // The cluster's own end + 1 is left to the caller, which knows whether a gap follows.
    if (p === last) break
    while (next < k && s[next]! <= p) active.push(next++)
    let keep = 0
    for (const x of active) if (e[x]! >= p) active[keep++] = x
    active.length = keep
    const best = narrowest(active, s, e)
    let v = p
    for (let w = width - 1; w >= 0; w--) {
      point[w] = Number(v & 0xffffffffn)
      v >>= 32n
    }
    out.emit(point, 0, best < 0 ? NONE : from + best)
  }
}

/** The narrowest of the active rows, the later one on equal width; -1 when none is active. */
function narrowest(active: number[], s: bigint[], e: bigint[]): number {
  let best = -1
  let bestWidth = 0n
  for (const x of active) {
    const w = e[x]! - s[x]!
    if (best < 0 || w <= bestWidth) {
      best = x
      bestWidth = w
    }
  }
  return best
}

/** Builds the disjoint boundary table of one range file. */
function buildFamily(buf: Buffer, file: string, version: IpVersion, fileIndex: number, countries: CountryTable): Family {
  const width = version === 4 ? 1 : 4
  const parsed = parseRows(buf, file, width, countries)
  const { rowStart, rowEnd, rowCountry, rows } = parsed
  const bounds = new Boundaries(file, width, rows)
  const overlappingRows = walkClusters(parsed, width, bounds)
  bounds.trim()
  return {
    version,
    fileIndex,
    width,
    rows,
    rowStart: rowStart.slice(0, rows * width),
    rowEnd: rowEnd.slice(0, rows * width),
    rowCountry: rowCountry.slice(0, rows),
    boundStart: bounds.start,
    boundRow: bounds.row,
    bounds: bounds.count,
    overlappingRows,
  }
}

/** The installed data package's directory, without relying on it having a main or exports map. */
export function geoDataDir(): string {
  const require = createRequire(import.meta.url)
  try {
    return path.dirname(require.resolve(`${GEO_PACKAGE}/package.json`))
  } catch {
    for (const dir of require.resolve.paths(GEO_PACKAGE) ?? []) {
      const candidate = path.join(dir, GEO_PACKAGE)
      if (existsSync(path.join(candidate, GEO_FILES[FILE_INDEX_IPV4]))) return candidate
    }
  }
  throw new Error(`${GEO_PACKAGE} is not installed (looked from ${path.dirname(new URL(import.meta.url).pathname)})`)
}

export class GeoIndex {
  readonly stats: GeoStats
  private readonly v4: Family
  private readonly v6: Family
  private readonly codes: readonly string[]
  private readonly names: readonly string[]
  private readonly key = new Uint32Array(4)

  /** Use `loadGeoIndex`. */
  constructor(v4: Family, v6: Family, countries: CountryTable, loadMs: number) {
    this.v4 = v4
    this.v6 = v6
    this.codes = countries.codes
    this.names = countries.codes.map(countryName)
    this.stats = {
      ipv4Rows: v4.rows,
      ipv6Rows: v6.rows,
      ipv4OverlappingRows: v4.overlappingRows,
      ipv6OverlappingRows: v6.overlappingRows,
      countries: countries.codes.length,
      loadMs,
    }
  }

  /** Country of an address given as text; IPv4-mapped IPv6 addresses are answered as IPv4. */
  lookup(ip: string): GeoLookup {
    const key = this.key
    let version = parseIpWords(ip, key)
    if (version === 0) return { ok: false, error: 'invalid_ip' }
    if (version === 6 && isMappedWords(key)) version = 4
    const fam = version === 4 ? this.v4 : this.v6
    const ki = 4 - fam.width
    const canonical = formatIpWords(version, key, ki)
    const row = this.search(fam, key, ki)
    if (row === NONE) return { ok: false, error: 'not_found', ip: canonical }
    const o = row * fam.width
    const country = fam.rowCountry[row]!
    return {
      ok: true,
      result: {
        ip: canonical,
        location: {
          file_index: fam.fileIndex,
          range_start_int: wordsToBigInt(fam.rowStart, o, fam.width),
          range_end_int: wordsToBigInt(fam.rowEnd, o, fam.width),
          range_start_ip: formatIpWords(fam.version, fam.rowStart, o),
          range_end_ip: formatIpWords(fam.version, fam.rowEnd, o),
          country_code: this.codes[country]!,
          country_name: this.names[country]!,
        },
      },
    }
  }

  /** Row answering for key[ki..], or NONE: the last boundary at or below the key. */
  private search(fam: Family, key: Uint32Array, ki: number): number {
    const { boundStart, width } = fam
    let lo = 0
    let hi = fam.bounds
    while (lo < hi) {
      const mid = (lo + hi) >>> 1
      if (compare(boundStart, mid * width, key, ki, width) <= 0) lo = mid + 1
      else hi = mid
    }
    return lo === 0 ? NONE : fam.boundRow[lo - 1]!
  }
}

/**
 * Reads both -num.csv files and builds the index. Throws if a file is missing, a line is malformed,
 * a value is outside the address space, a range is inverted, or rows are not sorted by start.
 */
export async function loadGeoIndex(opts: LoadGeoOptions = {}): Promise<GeoIndex> {
  const started = performance.now()
  const dir = opts.dir ?? geoDataDir()
  const [buf4, buf6] = await Promise.all(GEO_FILES.map((f) => readFile(path.join(dir, f))))
  const countries = new CountryTable()
  const v4 = buildFamily(buf4!, GEO_FILES[FILE_INDEX_IPV4], 4, FILE_INDEX_IPV4, countries)
  const v6 = buildFamily(buf6!, GEO_FILES[FILE_INDEX_IPV6], 6, FILE_INDEX_IPV6, countries)
  return new GeoIndex(v4, v6, countries, Math.round(performance.now() - started))
}
