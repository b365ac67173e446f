import { ConfigError } from '../core/config.js'
import { Flags, baseUrl, parseHeaders } from './args.js'
import { parseGoodput, type Goodput } from './metrics.js'
import type { Endpoint } from './request.js'

export interface ServeOptions {
  baseUrl: string
  model: string | null
  endpoint: Endpoint
  numPrompts: number
  requestRate: number
  burstiness: number
  maxConcurrency: number | null
  dataset: string
  inputLen: number
  outputLen: number
  rangeRatio: number
  seed: number
  ignoreEos: boolean
  goodput: Goodput | null
  percentiles: number[]
  resultDir: string
  resultFilename: string | null
  headers: Record<string, string>
  traceTo: string | null
  project: string | null
  traceApiKey: string | undefined
}

const KNOWN = [
  'base-url',
  'model',
  'endpoint',
  'num-prompts',
  'request-rate',
  'burstiness',
  'max-concurrency',
  'dataset',
  'input-len',
  'output-len',
  'range-ratio',
  'seed',
  'ignore-eos',
  'goodput',
  'metric-percentiles',
  'result-dir',
  'result-filename',
  'api-key',
  'header',
  'trace-to',
  'project',
  'trace-api-key',
]

function percentiles(spec: string): number[] {
  const ps = spec.split(',').map(Number)
  if (ps.some((p) => !Number.isFinite(p) || p <= 0 || p >= 100))
    throw new ConfigError(`--metric-percentiles takes numbers in (0, 100), not ${spec}`)
  return ps
}

/** The flags of `weft bench serve`, with vLLM's defaults where it has them. */
export function serveOptions(raw: Record<string, string>): ServeOptions {
  const f = new Flags(raw, KNOWN, 'bench serve')
  const endpoint = f.str('endpoint', '/v1/chat/completions')
  if (endpoint !== '/v1/chat/completions' && endpoint !== '/v1/completions')
    throw new ConfigError(`--endpoint is /v1/chat/completions or /v1/completions, not ${endpoint}`)
  const apiKey = f.str('api-key') ?? process.env.OPENAI_API_KEY
  const traceTo = f.str('trace-to') ?? null
  const project = f.str('project') ?? null
  if (traceTo && !project) throw new ConfigError('--trace-to needs --project entity/project')
  if (project && !/^[^/\s]+\/[^/\s]+$/.test(project)) throw new ConfigError(`--project is entity/project, not ${project}`)
  let goodput: Goodput | null
  try {
    goodput = parseGoodput(f.str('goodput'))
  } catch (e) {
    throw new ConfigError((e as Error).message)
  }
  const maxConcurrency = f.num('max-concurrency', 0, { min: 0, int: true })
  const requestRate = f.num('request-rate', Infinity, { inf: true, min: 0 })
  const burstiness = f.num('burstiness', 1, { min: 0 })
  if (requestRate === 0 || burstiness === 0) throw new ConfigError("--request-rate and --burstiness are above 0 (the rate may be 'inf')")
  return {
    baseUrl: baseUrl(f.str('base-url', 'http://127.0.0.1:8000')),
    model: f.str('model') ?? null,
    endpoint,
    numPrompts: f.num('num-prompts', 1000, { min: 1, int: true }),
    requestRate,
    burstiness,
    maxConcurrency: maxConcurrency || null,
    dataset: f.str('dataset', 'random'),
    inputLen: f.num('input-len', 1024, { min: 1, int: true }),
    outputLen: f.num('output-len', 128, { min: 1, int: true }),
    rangeRatio: f.num('range-ratio', 0, { min: 0 }),
    seed: f.num('seed', 0, { int: true }),
    ignoreEos: f.bool('ignore-eos'),
    goodput,
    percentiles: percentiles(f.str('metric-percentiles', '90,95,99')),
    resultDir: f.str('result-dir', '.'),
    resultFilename: f.str('result-filename') ?? null,
    headers: { ...(apiKey ? { authorization: `Bearer ${apiKey}` } : {}), ...parseHeaders(f.str('header')) },
    traceTo: traceTo ? baseUrl(traceTo) : null,
    project,
    traceApiKey: f.str('trace-api-key') ?? process.env.WEFT_API_KEY,
  }
}
