import { readFile } from 'node:fs/promises'
import path from 'node:path'
import { ConfigError } from '../core/config.js'
import { Flags } from './args.js'
import { formatComparison } from './compare-format.js'
import type { Better, Comparison, Kind, MetricRow } from './comparison.js'

const SERVE_LATENCY = /^(mean|median|std|p\d+(\.\d+)?)_(ttft|tpot|itl|e2el)_ms$/
const SERVE_FIXED: [string, Better][] = [
  ['completed', 'higher'],
  ['failed', 'lower'],
  ['duration', 'lower'],
  ['request_throughput', 'higher'],
  ['output_throughput', 'higher'],
  ['total_token_throughput', 'higher'],
  ['max_output_tokens_per_s', 'higher'],
]
/** Present only with --goodput (serve) or against weft with an admin key (trace): compared when every run has them. */
const OPTIONAL = new Set(['request_goodput', 'event_loop_delay_ms.p50', 'event_loop_delay_ms.p99', 'event_loop_delay_ms.max'])
const TRACE_KINDS = ['ingest', 'stream_query', 'stats']
const TRACE_METRICS: [string, Better][] = [
  ['acknowledged_calls', 'higher'],
  ['acknowledged_calls_per_s', 'higher'],
  ...TRACE_KINDS.flatMap((k) =>
    (['mean_ms', 'median_ms', 'p90_ms', 'p99_ms', 'max_ms', 'errors'] as const).map((m) => [`${k}.${m}`, 'lower'] as [string, Better]),
  ),
  ['event_loop_delay_ms.p50', 'lower'],
  ['event_loop_delay_ms.p99', 'lower'],
  ['event_loop_delay_ms.max', 'lower'],
]
const SETTINGS: Record<Kind, string[]> = {
  serve: ['date', 'model_id', 'base_url', 'endpoint', 'request_rate', 'max_concurrency', 'num_prompts', 'seed'],
  trace: ['date', 'base_url', 'batch_size', 'connections', 'payload_bytes', 'rate'],
}

/** A dotted key's value (`ingest.p99_ms`). */
function pick(r: Record<string, unknown>, key: string): unknown {
  return key.split('.').reduce<unknown>((v, k) => (v !== null && typeof v === 'object' ? (v as Record<string, unknown>)[k] : undefined), r)
}

/** Which command wrote a result, from keys only that command writes. */
export function kindOf(r: unknown, file: string): Kind {
  const o = r !== null && typeof r === 'object' && !Array.isArray(r) ? (r as Record<string, unknown>) : {}
  if ('request_throughput' in o && 'completed' in o) return 'serve'
  if ('acknowledged_calls_per_s' in o && 'ingest' in o) return 'trace'
  throw new ConfigError(
    `${file} is not a result of 'weft bench serve' (no request_throughput, completed) nor of 'weft bench trace' (no acknowledged_calls_per_s, ingest)`,
  )
}

/** The metrics compared for a kind: the fixed ones, and for serve every latency statistic the baseline holds. */
function metricsFor(kind: Kind, baseline: Record<string, unknown>): [string, Better][] {
  if (kind === 'trace') return TRACE_METRICS
  const latency = Object.keys(baseline)
    .filter((k) => SERVE_LATENCY.test(k))
    .map((k) => [k, 'lower'] as [string, Better])
  return [...SERVE_FIXED, ['request_goodput', 'higher'], ...latency]
}

/** Relative differences below this are "same": printing 100.00 vs 100.00 as a winner helps nobody. */
const SAME = 1e-9

function row(metric: string, better: Better, values: (number | null)[]): MetricRow {
  const base = values[0]!
  const ratio = values.map((v, i) => (i === 0 || v === null || base === null || base === 0 ? null : v / base))
  const change = ratio.map((r) => (r === null ? null : (r - 1) * 100))
  const verdict = values.map((v, i) => {
    if (i === 0 || v === null || base === null) return null
    if (Math.abs(v - base) <= SAME * Math.max(Math.abs(v), Math.abs(base))) return 'same'
    return v > base === (better === 'higher') ? 'better' : 'worse'
  })
  return { metric, better, values, ratio, change_percent: change, verdict }
}

/** Compares results of one kind, the first file the baseline. Mixed kinds or missing metrics: a ConfigError saying which. */
export function compareResults(files: string[], results: unknown[]): Comparison {
  const kinds = results.map((r, i) => kindOf(r, files[i]!))
  const kind = kinds[0]!
  const odd = kinds.findIndex((k) => k !== kind)
  if (odd > 0)
    throw new ConfigError(
      `${files[0]} is a 'bench ${kind}' result but ${files[odd]} a 'bench ${kinds[odd]}' result: compare results of one kind`,
    )
  const rs = results as Record<string, unknown>[]
  const metrics: MetricRow[] = []
  const missing: string[] = []
  for (const [key, better] of metricsFor(kind, rs[0]!)) {
    const values = rs.map((r) => pick(r, key))
    const nums = values.map((v) => (typeof v === 'number' && Number.isFinite(v) ? v : null))
    if (nums.every((v) => v === null) && OPTIONAL.has(key)) continue
    nums.forEach((v, i) => v === null && missing.push(`${files[i]}: ${key}`))
    metrics.push(row(key, better, nums))
  }
  if (missing.length) throw new ConfigError(`missing or non-numeric keys, so these runs cannot be compared:\n  ${missing.join('\n  ')}`)
  const runs = rs.map((r) => Object.fromEntries(SETTINGS[kind].map((k) => [k, r[k] ?? null])))
  return { kind, files, runs, metrics }
}

async function readResult(file: string): Promise<unknown> {
  let text: string
  try {
    text = await readFile(file, 'utf8')
  } catch (e) {
    throw new ConfigError(`cannot read ${file}: ${(e as Error).message}`)
  }
  try {
    return JSON.parse(text)
  } catch (e) {
    throw new ConfigError(`${file} is not JSON: ${(e as Error).message}`)
  }
}

/** `weft bench compare A.json B.json [...]`: each run's metrics beside the first's, with ratios and which is better. */
export async function benchCompare(files: string[], flags: Record<string, string>): Promise<void> {
  const f = new Flags(flags, ['format'], 'bench compare')
  const format = f.str('format', 'table')
  if (!['table', 'markdown', 'json'].includes(format))
    throw new ConfigError(`--format is table, markdown or json, not ${JSON.stringify(format)}`)
  if (files.length < 2) throw new ConfigError("'weft bench compare' takes two or more result files: A.json B.json [...]")
  const results = await Promise.all(files.map(readResult))
  const c = compareResults(
    files.map((x) => path.normalize(x)),
    results,
  )
  process.stdout.write(formatComparison(c, format as 'table' | 'markdown' | 'json'))
}
