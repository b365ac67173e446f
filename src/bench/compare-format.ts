import type { Comparison } from './comparison.js'

const letter = (i: number) => String.fromCharCode(65 + (i % 26)) + (i >= 26 ? String(Math.floor(i / 26)) : '')
const num = (v: number | null) => (v === null ? '–' : Number.isInteger(v) ? String(v) : v.toFixed(2))
const ratio = (v: number | null) => (v === null ? '–' : `${v.toFixed(3)}×`)
const change = (v: number | null) => (v === null ? '–' : `${v >= 0 ? '+' : ''}${v.toFixed(1)}%`)

/** The header and the rows as cells: metric, which way is better, the baseline, then per run value, ratio, change, verdict. */
function cells(c: Comparison): string[][] {
  const head = ['metric', 'better', letter(0)]
  for (let i = 1; i < c.files.length; i++) head.push(letter(i), `${letter(i)}/${letter(0)}`, 'change', `${letter(i)} is`)
  const rows = c.metrics.map((m) => {
    const out = [m.metric, m.better, num(m.values[0]!)]
    for (let i = 1; i < c.files.length; i++)
      out.push(num(m.values[i]!), ratio(m.ratio[i]!), change(m.change_percent[i]!), m.verdict[i] ?? '–')
    return out
  })
  return [head, ...rows]
}

/** Which file each letter is, with the settings that tell the runs apart. */
function legend(c: Comparison, bullet: string): string {
  return c.files
    .map((f, i) => {
      const settings = Object.entries(c.runs[i]!)
        .filter(([, v]) => v !== null)
        .map(([k, v]) => `${k}=${typeof v === 'object' ? JSON.stringify(v) : String(v)}`)
      return `${bullet}${letter(i)}${i === 0 ? ' (baseline)' : ''}: ${f} — ${settings.join(', ')}`
    })
    .join('\n')
}

function table(c: Comparison): string {
  const rows = cells(c)
  const widths = rows[0]!.map((_, j) => Math.max(...rows.map((r) => [...r[j]!].length)))
  const line = (r: string[]) => r.map((x, j) => (j < 2 ? x.padEnd(widths[j]!) : x.padStart(widths[j]!))).join('  ')
  const rule = '-'.repeat(widths.reduce((a, w) => a + w + 2, -2))
  return `bench ${c.kind} comparison\n${legend(c, '  ')}\n\n${line(rows[0]!)}\n${rule}\n${rows.slice(1).map(line).join('\n')}\n`
}

function markdown(c: Comparison): string {
  const rows = cells(c)
  const esc = (x: string) => x.replace(/\|/g, '\\|')
  const line = (r: string[]) => `| ${r.map(esc).join(' | ')} |`
  const align = `|${rows[0]!.map((_, j) => (j < 2 ? '---' : '--:')).join('|')}|`
  return `**bench ${c.kind} comparison**\n\n${legend(c, '- ')}\n\n${line(rows[0]!)}\n${align}\n${rows.slice(1).map(line).join('\n')}\n`
}

/** The comparison as an aligned text table, a Markdown table, or JSON (every number unrounded). */
export function formatComparison(c: Comparison, format: 'table' | 'markdown' | 'json'): string {
  if (format === 'json') return JSON.stringify({ ...c, baseline: c.files[0] }, null, 2) + '\n'
  return format === 'markdown' ? markdown(c) : table(c)
}
