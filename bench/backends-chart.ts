/**
 * The both-backends bench's chart: per request, one bar per backend (median, min–max whiskers), on a
 * log scale (the requests span milliseconds to seconds), horizontal so the request names stay readable.
 */
export interface ChartRow {
  label: string
  /** Per backend, in legend order. */
  bars: { min: number; median: number; max: number }[]
}

const PALETTE = ['#2b6cb0', '#dd6b20', '#38a169', '#805ad5']
const esc = (s: string) => s.replace(/&/g, '&amp;').replace(/</g, '&lt;')

export function backendsChart(title: string, legend: string[], rows: ChartRow[]): string {
  const left = 190
  const plotW = 560
  const top = 40
  const barH = 9
  const rowH = legend.length * barH + 8
  const all = rows.flatMap((r) => r.bars.flatMap((b) => [b.min, b.max])).filter((v) => v > 0)
  const lo = Math.pow(10, Math.floor(Math.log10(Math.min(...all, 1))))
  const hi = Math.pow(10, Math.ceil(Math.log10(Math.max(...all, 10))))
  const x = (v: number) => left + ((Math.log10(Math.max(v, lo)) - Math.log10(lo)) / (Math.log10(hi) - Math.log10(lo))) * plotW
  const h = top + rows.length * rowH + 40
  let out = `<text x="${(left + plotW) / 2}" y="18" text-anchor="middle" font-size="13">${esc(title)}</text>`
  for (let d = Math.log10(lo); d <= Math.log10(hi); d++) {
    const v = Math.pow(10, d)
    const label = v >= 1000 ? `${v / 1000} s` : `${v} ms`
    out += `<line x1="${x(v)}" y1="${top}" x2="${x(v)}" y2="${h - 34}" stroke="#eee"/><text x="${x(v)}" y="${top - 4}" text-anchor="middle" font-size="10">${label}</text>`
  }
  rows.forEach((r, ri) => {
    const y0 = top + ri * rowH + 4
    out += `<text x="${left - 6}" y="${y0 + rowH / 2}" text-anchor="end" font-size="10">${esc(r.label)}</text>`
    r.bars.forEach((b, bi) => {
      const y = y0 + bi * barH
      out += `<rect x="${left}" y="${y}" width="${x(b.median) - left}" height="${barH - 2}" fill="${PALETTE[bi % PALETTE.length]}"/>`
      out += `<line x1="${x(b.min)}" y1="${y + (barH - 2) / 2}" x2="${x(b.max)}" y2="${y + (barH - 2) / 2}" stroke="#000"/>`
      out += `<text x="${x(b.max) + 3}" y="${y + barH - 3}" font-size="8">${b.median >= 100 ? Math.round(b.median) : b.median.toFixed(1)}</text>`
    })
  })
  legend.forEach((l, i) => {
    out += `<rect x="${left + i * 160}" y="${h - 24}" width="12" height="12" fill="${PALETTE[i % PALETTE.length]}"/><text x="${left + i * 160 + 18}" y="${h - 14}" font-size="11">${esc(l)}</text>`
  })
  return `<svg xmlns="http://www.w3.org/2000/svg" width="${left + plotW + 60}" height="${h}" font-family="sans-serif"><rect width="100%" height="100%" fill="white"/>${out}</svg>\n`
}
