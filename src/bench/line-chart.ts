import { BLUE, H, W, axes, esc, fmt } from './chart.js'

/** One line of a time-series panel: [seconds since the start, value] points. */
export interface Series {
  label: string
  points: [number, number][]
  color?: string
}

const PALETTE = [BLUE, '#c53030', '#2f855a', '#805ad5', '#dd6b20', '#718096', '#d53f8c', '#319795']

/** A time-series panel at (x0, y0): one polyline per series, a shared linear y axis from 0, a legend under it. */
export function linePanel(x0: number, y0: number, title: string, series: Series[], xMax?: number): string {
  const all = series.flatMap((s) => s.points)
  if (all.length === 0) return axes(x0, y0, `${title}: no data`, 0, ['', ''])
  const tMax = xMax ?? Math.max(1, ...all.map((p) => p[0]))
  const top = Math.max(...all.map((p) => p[1])) * 1.05 || 1
  const x = (t: number) => x0 + (t / tMax) * W
  const y = (v: number) => y0 + H - (v / top) * H
  let out = axes(x0, y0, title, top, ['0 s', `${fmt(tMax)} s`])
  series.forEach((s, i) => {
    const color = s.color ?? PALETTE[i % PALETTE.length]!
    const pts = s.points.map(([t, v]) => `${x(t).toFixed(1)},${y(v).toFixed(1)}`).join(' ')
    out += `<polyline data-series="${esc(s.label)}" points="${pts}" fill="none" stroke="${color}" stroke-width="1.5"/>`
    out += `<rect x="${x0 + (i % 3) * 100}" y="${y0 + H + 18 + Math.floor(i / 3) * 12}" width="8" height="8" fill="${color}"/>`
    out += `<text x="${x0 + (i % 3) * 100 + 11}" y="${y0 + H + 26 + Math.floor(i / 3) * 12}" font-size="9">${esc(s.label)}</text>`
  })
  return out
}

/** Grouped bars at (x0, y0): one group per label, one bar per named value, values printed above. */
export function barPanel(x0: number, y0: number, title: string, groups: { label: string; values: Record<string, number> }[]): string {
  const names = [...new Set(groups.flatMap((g) => Object.keys(g.values)))]
  const top = Math.max(0, ...groups.flatMap((g) => Object.values(g.values))) * 1.1 || 1
  const gw = W / Math.max(1, groups.length)
  const bw = (gw * 0.8) / Math.max(1, names.length)
  let out = axes(x0, y0, title, top, ['', ''])
  groups.forEach((g, gi) => {
    names.forEach((n, ni) => {
      const v = g.values[n] ?? 0
      const h = (v / top) * H
      const bx = x0 + gi * gw + gw * 0.1 + ni * bw
      out += `<rect data-bar="${esc(`${g.label} ${n}`)}" x="${bx.toFixed(1)}" y="${(y0 + H - h).toFixed(1)}" width="${(bw - 1).toFixed(1)}" height="${h.toFixed(1)}" fill="${PALETTE[ni % PALETTE.length]}"/>`
      out += `<text x="${(bx + bw / 2).toFixed(1)}" y="${(y0 + H - h - 2).toFixed(1)}" text-anchor="middle" font-size="7">${fmt(v)}</text>`
    })
    out += `<text x="${x0 + gi * gw + gw / 2}" y="${y0 + H + 24}" text-anchor="middle" font-size="9">${esc(g.label)}</text>`
  })
  names.forEach((n, i) => {
    out += `<rect x="${x0 + i * 70}" y="${y0 + H + 30}" width="8" height="8" fill="${PALETTE[i % PALETTE.length]}"/><text x="${x0 + i * 70 + 11}" y="${y0 + H + 38}" font-size="9">${esc(n)}</text>`
  })
  return out
}

/** Panels laid out two a row (each 370 × 220) under a title, as one SVG document. */
export function panelsSvg(title: string, panels: ((x0: number, y0: number) => string)[]): string {
  const rows = Math.ceil(panels.length / 2)
  const body = panels.map((p, i) => p(50 + (i % 2) * 420, 50 + Math.floor(i / 2) * 230)).join('')
  const head = `<text x="395" y="18" text-anchor="middle" font-size="13">${esc(title)}</text>`
  return `<svg xmlns="http://www.w3.org/2000/svg" width="790" height="${rows * 230 + 40}" font-family="sans-serif"><rect width="100%" height="100%" fill="white"/>${head}${body}</svg>\n`
}
