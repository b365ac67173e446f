import { DomainError } from '../core/errors.js'

const DAY = 86_400_000
export const MAX_BUCKETS = 10_000
export const MAX_RANGE_MS = 31 * DAY

/** The bucket size for a range (docs/statistics.md): from the span when not given, enlarged past 10,000 buckets. */
export function chooseGranularity(startMs: number, endMs: number, requested?: number | null): number {
  const span = (endMs - startMs) / 1000
  let g = requested ?? (span <= 7200 ? 300 : span <= 43_200 ? 3600 : span <= 259_200 ? 21_600 : span <= 1_209_600 ? 43_200 : 86_400)
  if (span / g > MAX_BUCKETS) g = Math.max(g, Math.floor(span / MAX_BUCKETS) + 1)
  return g
}

const formatters = new Map<string, Intl.DateTimeFormat>()

/** Throws 400 for a name the runtime's time zone database does not know. */
export function checkTimezone(tz: string): void {
  try {
    formatter(tz)
  } catch {
    throw new DomainError(400, `Unknown timezone ${JSON.stringify(tz)}; use an IANA name such as "UTC" or "Europe/Berlin"`)
  }
}

function formatter(tz: string): Intl.DateTimeFormat {
  let f = formatters.get(tz)
  if (!f) {
    f = new Intl.DateTimeFormat('en-US', {
      timeZone: tz,
      hourCycle: 'h23',
      year: 'numeric',
      month: 'numeric',
      day: 'numeric',
      hour: 'numeric',
      minute: 'numeric',
      second: 'numeric',
    })
    formatters.set(tz, f)
  }
  return f
}

/** The zone's offset from UTC at instant t (ms): local wall time = t + offset. */
export function offsetAt(tz: string, t: number): number {
  if (tz === 'UTC') return 0
  const p: Record<string, number> = {}
  for (const x of formatter(tz).formatToParts(new Date(t))) if (x.type !== 'literal') p[x.type] = Number(x.value)
  const wall = Date.UTC(p.year!, p.month! - 1, p.day!, p.hour!, p.minute!, p.second!)
  return wall - (t - (((t % 1000) + 1000) % 1000))
}

/**
 * The instant a local wall time names. In a spring-forward gap the wall time does not exist: the
 * instant the gap ends is taken. In a fall-back overlap, the earlier instant.
 */
export function wallToInstant(tz: string, wall: number): number {
  const before = offsetAt(tz, wall - DAY / 2)
  const after = offsetAt(tz, wall + DAY / 2)
  const a = wall - before
  if (offsetAt(tz, a) === before) return a
  const b = wall - after
  if (offsetAt(tz, b) === after) return b
  // In a gap: the transition instant, found from the side before it.
  return a
}

/**
 * Bucket boundaries covering [start, end): the first is the start of the bucket holding `start`,
 * then one per bucket while it begins before `end`. Buckets follow the zone's wall clock: a
 * granularity of whole days starts at local midnight (a DST day is 23 or 25 hours long); one that
 * divides a day starts at local multiples of it from midnight (6 h: 00, 06, 12, 18 local). Any other
 * granularity is counted in plain seconds from the epoch.
 */
export function bucketStarts(startMs: number, endMs: number, granularitySec: number, tz: string): number[] {
  const g = granularitySec * 1000
  const out: number[] = []
  const push = (t: number) => {
    if (out.length === 0 || t > out[out.length - 1]!) out.push(t)
  }
  if (g % DAY === 0) {
    const days = g / DAY
    const localStart = startMs + offsetAt(tz, startMs)
    const dayNo = Math.floor(localStart / DAY)
    let d = dayNo - (((dayNo % days) + days) % days)
    for (;;) {
      const t = wallToInstant(tz, d * DAY)
      if (t >= endMs) break
      push(t)
      d += days
    }
    return out
  }
  if (DAY % g === 0) {
    // Day by day in local time; inside a day without a transition the offset is constant.
    const localStart = startMs + offsetAt(tz, startMs)
    let day = Math.floor(localStart / DAY) * DAY
    while (true) {
      const dayStart = wallToInstant(tz, day)
      if (dayStart >= endMs) break
      const constant = offsetAt(tz, dayStart) === offsetAt(tz, wallToInstant(tz, day + DAY) - 1)
      const off = offsetAt(tz, dayStart)
      for (let w = 0; w < DAY; w += g) {
        const t = constant ? day + w - off : wallToInstant(tz, day + w)
        if (t >= endMs) break
        push(t)
      }
      day += DAY
    }
    // Keep from the bucket holding start.
    while (out.length > 1 && out[1]! <= startMs) out.shift()
    return out
  }
  for (let t = Math.floor(startMs / g) * g; t < endMs; t += g) push(t)
  return out
}
