import { percentile } from './stats.js'
import type { RequestOutput } from './request.js'

/** The run as one SVG: a histogram per latency (TTFT, TPOT, ITL, E2EL) and output tokens/s over the run. */
export const esc = (s: string) => s.replace(/&/g, '&amp;').replace(/</g, '&lt;')
export const BLUE = '#2b6cb0'
/** A panel's plot area. */
export const W = 300
export const H = 160
export const fmt = (v: number) => (v >= 100 ? Math.round(v).toString() : v.toFixed(v >= 10 ? 1 : 2))

export function axes(x0: number, y0: number, title: string, yMax: number, xLabels: [string, string]): string {
  let out = `<text x="${x0 + W / 2}" y="${y0 - 8}" text-anchor="middle" font-size="12">${esc(title)}</text>`
  out += `<line x1="${x0}" y1="${y0 + H}" x2="${x0 + W}" y2="${y0 + H}" stroke="#333"/><line x1="${x0}" y1="${y0}" x2="${x0}" y2="${y0 + H}" stroke="#333"/>`
  out += `<text x="${x0 - 4}" y="${y0 + 8}" text-anchor="end" font-size="9">${fmt(yMax)}</text><text x="${x0 - 4}" y="${y0 + H}" text-anchor="end" font-size="9">0</text>`
  out += `<text x="${x0}" y="${y0 + H + 12}" font-size="9">${esc(xLabels[0])}</text><text x="${x0 + W}" y="${y0 + H + 12}" text-anchor="end" font-size="9">${esc(xLabels[1])}</text>`
  return out
}

/** A histogram of values in ms, 24 bins, with the median and p99 marked. */
function histogram(x0: number, y0: number, title: string, ms: number[]): string {
  if (ms.length === 0) return axes(x0, y0, `${title}: no data`, 0, ['', ''])
  const lo = Math.min(...ms)
  const hi = Math.max(...ms)
  const bins = new Array<number>(24).fill(0)
  const width = (hi - lo) / bins.length || 1
  for (const v of ms) bins[Math.min(bins.length - 1, Math.floor((v - lo) / width))]!++
  const top = Math.max(...bins)
  const x = (v: number) => x0 + ((v - lo) / (width * bins.length)) * W
  let out = axes(x0, y0, `${title} (ms), n=${ms.length}`, top, [fmt(lo), fmt(hi)])
  bins.forEach((c, i) => {
    const h = (c / top) * H
    out += `<rect x="${x0 + (i * W) / bins.length + 0.5}" y="${y0 + H - h}" width="${W / bins.length - 1}" height="${h}" fill="${BLUE}"/>`
  })
  for (const [label, v, color] of [
    ['median', percentile(ms, 50), '#2f855a'],
    ['p99', percentile(ms, 99), '#c53030'],
  ] as const)
    out += `<line x1="${x(v)}" y1="${y0}" x2="${x(v)}" y2="${y0 + H}" stroke="${color}" stroke-dasharray="3 2"/><text x="${x(v) + 2}" y="${y0 + 10 + (label === 'p99' ? 10 : 0)}" font-size="9" fill="${color}">${label} ${fmt(v)}</text>`
  return out
}

/** Output tokens per second of the run: each request's tokens spread over its content chunks. */
function throughput(x0: number, y0: number, outputs: RequestOutput[], duration: number): string {
  const secs = Math.max(1, Math.ceil(duration))
  const per = new Array<number>(secs).fill(0)
  for (const o of outputs) {
    if (!o.success || o.chunkTimes.length === 0) continue
    const each = (o.outputTokens ?? o.chunkTimes.length) / o.chunkTimes.length
    for (const t of o.chunkTimes) per[Math.min(secs - 1, Math.floor(t))]! += each
  }
  const top = Math.max(1, ...per)
  const pts = per.map((v, i) => `${x0 + ((i + 0.5) / secs) * W},${y0 + H - (v / top) * H}`)
  return (
    axes(x0, y0, 'output tokens/s over the run', top, ['0 s', `${secs} s`]) +
    `<polyline points="${pts.join(' ')}" fill="none" stroke="${BLUE}" stroke-width="2"/>`
  )
}

export function runChart(title: string, outputs: RequestOutput[], duration: number, tpotsMs: number[]): string {
  const done = outputs.filter((o) => o.success)
  const panels = [
    histogram(
      50,
      50,
      'TTFT',
      done.map((o) => o.ttft * 1000),
    ),
    histogram(420, 50, 'TPOT', tpotsMs),
    histogram(
      50,
      270,
      'ITL',
      done.flatMap((o) => o.itl.map((s) => s * 1000)),
    ),
    histogram(
      420,
      270,
      'E2E latency',
      done.map((o) => o.latency * 1000),
    ),
    throughput(50, 490, outputs, duration),
  ]
  const head = `<text x="395" y="18" text-anchor="middle" font-size="13">${esc(title)}</text>`
  return `<svg xmlns="http://www.w3.org/2000/svg" width="790" height="690" font-family="sans-serif"><rect width="100%" height="100%" fill="white"/>${head}${panels.join('')}</svg>\n`
}
