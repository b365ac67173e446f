import { Flags, baseUrl } from './args.js'
import { ConfigError } from '../core/config.js'

export interface TraceOptions {
  baseUrl: string
  project: string
  apiKey: string | undefined
  batchSize: number
  connections: number
  payloadBytes: number
  models: number
  /** Seconds of ingest, unless `count` calls come first. */
  duration: number
  count: number | null
  /** Calls per second offered; Infinity: as fast as the server acknowledges. */
  rate: number
  /** Seconds between the reads (a /calls/stream_query page and a /calls/stats) issued during ingest; 0: none. */
  queryInterval: number
  resultDir: string
  resultFilename: string | null
}

const KNOWN = [
  'base-url',
  'project',
  'api-key',
  'batch-size',
  'connections',
  'payload-bytes',
  'models',
  'duration',
  'count',
  'rate',
  'query-interval',
  'result-dir',
  'result-filename',
]

/** The flags of `weft bench trace`. */
export function traceOptions(raw: Record<string, string>): TraceOptions {
  const f = new Flags(raw, KNOWN, 'bench trace')
  const project = f.str('project', `bench/trace-${Date.now().toString(36)}`)
  if (!/^[^/\s]+\/[^/\s]+$/.test(project)) throw new ConfigError(`--project is entity/project, not ${project}`)
  const count = f.num('count', 0, { min: 0, int: true })
  const rate = f.num('rate', Infinity, { inf: true, min: 0 })
  if (rate === 0) throw new ConfigError("--rate is calls per second above 0, or 'inf'")
  return {
    baseUrl: baseUrl(f.str('base-url', 'http://127.0.0.1:8000')),
    project,
    apiKey: f.str('api-key') ?? process.env.WEFT_API_KEY,
    batchSize: f.num('batch-size', 100, { min: 1, int: true }),
    connections: f.num('connections', 4, { min: 1, int: true }),
    payloadBytes: f.num('payload-bytes', 1000, { min: 0, int: true }),
    models: f.num('models', 3, { min: 1, int: true }),
    duration: f.num('duration', count ? Infinity : 10, { min: 0, inf: true }),
    count: count || null,
    rate,
    queryInterval: f.num('query-interval', 0.5, { min: 0 }),
    resultDir: f.str('result-dir', '.'),
    resultFilename: f.str('result-filename') ?? null,
  }
}
