/** A small SVG chart of bench results: two panels (req/s, p99 latency), median bars with min–max whiskers. */
interface Spread {
  min: number
  median: number
  max: number
}
interface Side {
  rps: Spread
  p99_ms: Spread
}
type Scenarios = Record<string, { weft: Side; node_http: Side }>

const COLORS = { weft: '#2b6cb0', node_http: '#a0aec0' }
const esc = (s: string) => s.replace(/&/g, '&amp;').replace(/</g, '&lt;')

function panel(x0: number, title: string, scenarios: Scenarios, pick: (s: Side) => Spread, unit: string): string {
  const w = 420
  const h = 260
  const names = Object.keys(scenarios)
  const max = Math.max(...names.flatMap((n) => [pick(scenarios[n]!.weft).max, pick(scenarios[n]!.node_http).max])) * 1.1 || 1
  const y = (v: number) => 40 + h - (v / max) * h
  let out = `<text x="${x0 + w / 2}" y="24" text-anchor="middle" font-size="14">${esc(title)}</text>`
  out += `<line x1="${x0 + 40}" y1="${40 + h}" x2="${x0 + w}" y2="${40 + h}" stroke="#333"/>`
  for (let i = 0; i <= 4; i++) {
    const v = (max / 4) * i
    out += `<text x="${x0 + 36}" y="${y(v) + 4}" text-anchor="end" font-size="10">${v >= 1000 ? Math.round(v / 1000) + 'k' : v.toFixed(v < 10 ? 2 : 0)}</text>`
    out += `<line x1="${x0 + 40}" y1="${y(v)}" x2="${x0 + w}" y2="${y(v)}" stroke="#eee"/>`
  }
  const group = (w - 40) / names.length
  names.forEach((n, gi) => {
    const gx = x0 + 40 + gi * group
    ;(['weft', 'node_http'] as const).forEach((side, si) => {
      const s = pick(scenarios[n]![side])
      const bx = gx + group * 0.15 + si * group * 0.35
      const bw = group * 0.3
      out += `<rect x="${bx}" y="${y(s.median)}" width="${bw}" height="${40 + h - y(s.median)}" fill="${COLORS[side]}"/>`
      out += `<line x1="${bx + bw / 2}" y1="${y(s.max)}" x2="${bx + bw / 2}" y2="${y(s.min)}" stroke="#000"/>`
      out += `<line x1="${bx + bw * 0.3}" y1="${y(s.max)}" x2="${bx + bw * 0.7}" y2="${y(s.max)}" stroke="#000"/>`
      out += `<line x1="${bx + bw * 0.3}" y1="${y(s.min)}" x2="${bx + bw * 0.7}" y2="${y(s.min)}" stroke="#000"/>`
      out += `<text x="${bx + bw / 2}" y="${y(s.max) - 4}" text-anchor="middle" font-size="9">${s.median >= 1000 ? Math.round(s.median) : s.median.toFixed(2)}</text>`
    })
    out += `<text x="${gx + group / 2}" y="${40 + h + 16}" text-anchor="middle" font-size="11">${esc(n)}</text>`
  })
  out += `<text x="${x0 + 8}" y="${40 + h / 2}" font-size="10" transform="rotate(-90 ${x0 + 8} ${40 + h / 2})" text-anchor="middle">${esc(unit)}</text>`
  return out
}

export function barChart(scenarios: Scenarios, title: string): string {
  const width = 900
  const height = 360
  let body = `<text x="${width / 2}" y="12" text-anchor="middle" font-size="12" fill="#555">${esc(title)}</text>`
  body += `<g transform="translate(0,10)">${panel(0, 'requests/s (median, min–max)', scenarios, (s) => s.rps, 'req/s')}</g>`
  body += `<g transform="translate(0,10)">${panel(460, 'p99 latency (median, min–max)', scenarios, (s) => s.p99_ms, 'ms')}</g>`
  body += `<rect x="20" y="${height - 22}" width="12" height="12" fill="${COLORS.weft}"/><text x="38" y="${height - 12}" font-size="11">weft (uWebSockets.js)</text>`
  body += `<rect x="200" y="${height - 22}" width="12" height="12" fill="${COLORS.node_http}"/><text x="218" y="${height - 12}" font-size="11">node:http, same pipeline</text>`
  return `<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}" font-family="sans-serif"><rect width="100%" height="100%" fill="white"/>${body}</svg>\n`
}

/** One panel of bars (median with min–max whiskers) per labelled row. */
export function spreadChart(
  title: string,
  unit: string,
  rows: { label: string; min: number; median: number; max: number }[],
  target?: number,
): string {
  const width = 560
  const h = 260
  const top = 40
  const left = 60
  const max = Math.max(target ?? 0, ...rows.map((r) => r.max)) * 1.1 || 1
  const y = (v: number) => top + h - (v / max) * h
  const group = (width - left - 20) / rows.length
  let out = `<text x="${width / 2}" y="20" text-anchor="middle" font-size="13">${esc(title)}</text>`
  for (let i = 0; i <= 4; i++) {
    const v = (max / 4) * i
    out += `<line x1="${left}" y1="${y(v)}" x2="${width - 20}" y2="${y(v)}" stroke="#eee"/><text x="${left - 4}" y="${y(v) + 4}" text-anchor="end" font-size="10">${Math.round(v)}</text>`
  }
  if (target !== undefined)
    out += `<line x1="${left}" y1="${y(target)}" x2="${width - 20}" y2="${y(target)}" stroke="#c53030" stroke-dasharray="4 3"/><text x="${width - 22}" y="${y(target) - 4}" text-anchor="end" font-size="10" fill="#c53030">target ${target}</text>`
  rows.forEach((r, i) => {
    const bx = left + i * group + group * 0.25
    const bw = group * 0.5
    out += `<rect x="${bx}" y="${y(r.median)}" width="${bw}" height="${top + h - y(r.median)}" fill="${COLORS.weft}"/>`
    out += `<line x1="${bx + bw / 2}" y1="${y(r.max)}" x2="${bx + bw / 2}" y2="${y(r.min)}" stroke="#000"/>`
    out += `<text x="${bx + bw / 2}" y="${y(r.max) - 4}" text-anchor="middle" font-size="10">${Math.round(r.median)}</text>`
    out += `<text x="${bx + bw / 2}" y="${top + h + 16}" text-anchor="middle" font-size="11">${esc(r.label)}</text>`
  })
  out += `<text x="12" y="${top + h / 2}" font-size="10" transform="rotate(-90 12 ${top + h / 2})" text-anchor="middle">${esc(unit)}</text>`
  return `<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${top + h + 30}" font-family="sans-serif"><rect width="100%" height="100%" fill="white"/>${out}</svg>\n`
}

/**
 * Latency against data size: one panel per request, one line per system (median), log scale, so a
 * flat line reads as "does not grow with the data".
 */
export function sizeChart(
  title: string,
  sizes: string[],
  panels: { title: string; series: { label: string; values: (number | null)[] }[] }[],
  fmt: (v: number) => string = (v) => (v >= 1000 ? v / 1000 + 's' : v + 'ms'),
): string {
  const pw = 300
  const ph = 220
  const top = 50
  const left = 50
  const palette = ['#2b6cb0', '#dd6b20', '#38a169', '#805ad5']
  const all = panels.flatMap((p) => p.series.flatMap((s) => s.values.filter((v): v is number => v !== null && v > 0)))
  const lo = Math.pow(10, Math.floor(Math.log10(Math.min(...all, 1))))
  const hi = Math.pow(10, Math.ceil(Math.log10(Math.max(...all, 10))))
  const y = (v: number) => top + ph - ((Math.log10(v) - Math.log10(lo)) / (Math.log10(hi) - Math.log10(lo))) * ph
  let out = `<text x="${(panels.length * (pw + left)) / 2}" y="18" text-anchor="middle" font-size="13">${esc(title)}</text>`
  panels.forEach((p, pi) => {
    const x0 = pi * (pw + left) + left
    const x = (i: number) => x0 + (sizes.length === 1 ? pw / 2 : (i / (sizes.length - 1)) * (pw - 20) + 10)
    out += `<text x="${x0 + pw / 2}" y="${top - 12}" text-anchor="middle" font-size="12">${esc(p.title)}</text>`
    for (let d = Math.log10(lo); d <= Math.log10(hi); d++) {
      const v = Math.pow(10, d)
      out += `<line x1="${x0}" y1="${y(v)}" x2="${x0 + pw}" y2="${y(v)}" stroke="#eee"/><text x="${x0 - 4}" y="${y(v) + 4}" text-anchor="end" font-size="10">${fmt(v)}</text>`
    }
    sizes.forEach((s, i) => (out += `<text x="${x(i)}" y="${top + ph + 16}" text-anchor="middle" font-size="11">${esc(s)}</text>`))
    p.series.forEach((s, si) => {
      const pts = s.values.map((v, i) => (v === null || v <= 0 ? null : `${x(i)},${y(v)}`)).filter(Boolean)
      out += `<polyline points="${pts.join(' ')}" fill="none" stroke="${palette[si % palette.length]}" stroke-width="2"/>`
      s.values.forEach(
        (v, i) => v !== null && v > 0 && (out += `<circle cx="${x(i)}" cy="${y(v)}" r="3" fill="${palette[si % palette.length]}"/>`),
      )
    })
  })
  const legend =
    panels[0]?.series
      .map(
        (s, i) =>
          `<rect x="${left + i * 170}" y="${top + ph + 28}" width="12" height="12" fill="${palette[i % palette.length]}"/><text x="${left + i * 170 + 18}" y="${top + ph + 38}" font-size="11">${esc(s.label)}</text>`,
      )
      .join('') ?? ''
  return `<svg xmlns="http://www.w3.org/2000/svg" width="${panels.length * (pw + left) + 20}" height="${top + ph + 50}" font-family="sans-serif"><rect width="100%" height="100%" fill="white"/>${out}${legend}</svg>\n`
}
