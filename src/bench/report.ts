import { mkdir, writeFile } from 'node:fs/promises'
import path from 'node:path'

/** The table vLLM's `bench serve` prints, line for line, so the two read alike; failures and their reasons after it. */
export function resultTable(r: Record<string, unknown>, percentiles: number[]): string {
  const n = (k: string) => Number(r[k] ?? 0)
  const line = (label: string, v: number | string, digits = 2) =>
    `${label.padEnd(40)} ${typeof v === 'number' ? (Number.isInteger(v) && digits === 0 ? String(v) : v.toFixed(digits)) : v}\n`
  // Centred in 50 columns as Python's '{:-^50}' does it (the odd filler goes right).
  const rule = (title: string) =>
    (title ? '-'.repeat(Math.floor((50 - title.length) / 2)) + title : '').padEnd(50, title ? '-' : '=') + '\n'
  let out = `${'='.repeat(12)} Serving Benchmark Result ${'='.repeat(12)}\n`
  out += line('Successful requests:', n('completed'), 0)
  out += line('Failed requests:', n('failed'), 0)
  out += line('Benchmark duration (s):', n('duration'))
  out += line('Total input tokens:', n('total_input_tokens'), 0)
  out += line('Total generated tokens:', n('total_output_tokens'), 0)
  out += line('Request throughput (req/s):', n('request_throughput'))
  if (r.request_goodput !== null && r.request_goodput !== undefined) out += line('Request goodput (req/s):', n('request_goodput'))
  out += line('Output token throughput (tok/s):', n('output_throughput'))
  out += line('Peak output token throughput (tok/s):', n('max_output_tokens_per_s'))
  out += line('Peak concurrent requests:', n('max_concurrent_requests'), 0)
  out += line('Total Token throughput (tok/s):', n('total_token_throughput'))
  const sections = [
    ['ttft', 'TTFT', 'Time to First Token'],
    ['tpot', 'TPOT', 'Time per Output Token (excl. 1st token)'],
    ['itl', 'ITL', 'Inter-token Latency'],
    ['e2el', 'E2EL', 'End-to-end Latency'],
  ]
  for (const [key, short, title] of sections) {
    out += rule(title!)
    out += line(`Mean ${short} (ms):`, n(`mean_${key}_ms`))
    out += line(`Median ${short} (ms):`, n(`median_${key}_ms`))
    for (const p of percentiles) out += line(`P${p} ${short} (ms):`, n(`p${p}_${key}_ms`))
  }
  out += rule('')
  const errors = (r.errors as string[]).filter(Boolean)
  if (errors.length) {
    const counts = new Map<string, number>()
    for (const e of errors) counts.set(e.slice(0, 200), (counts.get(e.slice(0, 200)) ?? 0) + 1)
    out += `Failures by reason:\n`
    for (const [e, c] of counts) out += `  ${String(c).padStart(5)} × ${e}\n`
  }
  return out
}

/** Writes the result JSON and the plot beside it; resolves with the JSON's path. */
export async function writeResult(dir: string, base: string, result: Record<string, unknown>, svg: string): Promise<string> {
  await mkdir(dir, { recursive: true })
  const file = path.join(dir, base.endsWith('.json') ? base : `${base}.json`)
  await writeFile(file, JSON.stringify(result, null, 2) + '\n')
  await writeFile(file.replace(/\.json$/, '') + '.svg', svg)
  return file
}
