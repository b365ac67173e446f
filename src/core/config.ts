import os from 'node:os'
import path from 'node:path'

/** `--tool-call-parser` values: the parsers in inference/parsers/tool-parsers.ts. */
export const TOOL_PARSERS = ['hermes', 'llama3_json'] as const
export type ToolParserName = (typeof TOOL_PARSERS)[number]
/** `--reasoning-parser` values: the parsers in inference/parsers/reasoning.ts. */
export const REASONING_PARSERS = ['deepseek_r1', 'qwen3'] as const
export type ReasoningParserName = (typeof REASONING_PARSERS)[number]

/** Everything the server reads from its environment and flags, resolved once at start. */
export interface Config {
  host: string
  port: number
  dataDir: string
  /** Admin key set from the environment (WEFT_API_KEY); ensured present at start. */
  apiKey?: string
  maxBodyBytes: number
  /** Largest file `/file/create` stores (413 past it); uploads stream to disk, so this is not a memory bound. */
  maxFileBytes: number
  /** Origins allowed by CORS; '*' allows any. */
  corsOrigins: string[]
  /** Peers whose X-Forwarded-For is believed (exact addresses). */
  trustedProxies: string[]
  /** Countries for which /geolocate answers allowed=false. */
  geoDenyList: string[]
  /** Parse the geo ranges at start (default) rather than at the first /geolocate (tests and small tools). */
  geoPreload: boolean
  logLevel: string
  accessLog: boolean
  shutdownGraceMs: number
  /** Parts in the in-memory calls tail before it is flushed to a Parquet segment. */
  callsFlushRows: number
  /** Age (ms) at which a non-empty tail is flushed anyway; 0: only by size. */
  callsFlushIntervalMs: number
  /** A call query waiting longer than this (ms) on DuckDB is stopped with 504. */
  queryTimeoutMs: number
  /** Most calls /calls/query returns at once (413 past it). */
  maxQueryRows: number
  /** Worker threads that parse and validate ingest bodies; 0: one per core. */
  ingestWorkers: number
  /** Ingest requests waiting for a worker past which the answer is 503. */
  ingestQueue: number
  /** Default prices added to or replacing the book's: `model=prompt,completion[,cache_read,cache_creation];…` (USD per token). */
  prices: string
  /** Model directories to serve (Hugging Face layout); empty: the built-in tiny model; `none`: no inference. */
  models: string[]
  /** Served names, one per model (default: the directory's name). */
  servedModelNames: string[]
  schedulingPolicy: 'fcfs' | 'priority'
  /** Sequences decoded together at most, per model. */
  maxNumSeqs: number
  /** KV-cache positions per model, over all its running sequences. */
  kvCacheTokens: number
  /** Automatic prefix caching (vLLM's default); off with --no-enable-prefix-caching. */
  enablePrefixCaching: boolean
  /** Chat requests waiting to start at most, per model (429 past it). */
  maxWaitingRequests: number
  /** Prompt tokens prefilled per step (chunked prefill). */
  prefillChunk: number
  /** TF.js backend: auto (tensorflow when installed, else wasm, else cpu), tensorflow, wasm or cpu. */
  inferenceBackend: string
  /** Workers per model, each with its own copy of the weights (one wasm worker computes on one core). */
  modelReplicas: number
  /** XNNPACK threads per wasm inference worker (1: the single-threaded build). */
  inferenceThreads: number
  /** Tool-call parser for `tool_choice: "auto"` (hermes, llama3_json); null: the one the model's template calls for. */
  toolCallParser: ToolParserName | null
  /** Reasoning parser (deepseek_r1, qwen3); null: reasoning stays in the content. */
  reasoningParser: ReasoningParserName | null
  /** Where calls live: the embedded DuckDB store, a ClickHouse server, or ClickHouse in-process (chdb). */
  storage: StorageConfig
  /** Bytes DuckDB may hold in memory, the calls store's and the catalog's instances together (past it they spill to disk). */
  memoryLimit: number
  /** The nice value (0-19) of the server's threads other than the event loop's, so that it gets a core first; 0: off (see core/thread-priority.ts). */
  backgroundNice: number
}

export const STORAGE_KINDS = ['embedded', 'clickhouse', 'chdb'] as const
export type StorageKind = (typeof STORAGE_KINDS)[number]

export interface StorageConfig {
  kind: StorageKind
  /** ClickHouse's HTTP interface (`--storage clickhouse`), e.g. http://host:8123. */
  clickhouseUrl: string
  clickhouseDatabase: string
  /** A cluster name: the DDL runs ON CLUSTER with Replicated/Distributed tables (docs/clickhouse.md). */
  clickhouseCluster?: string
  /** chdb's data directory (`--storage chdb`); default `<data dir>/chdb`. */
  chdbPath: string
  /**
   * ClickHouse settings every insert runs with (`--clickhouse-insert-settings insert_quorum=2,...`): what ClickHouse
   * must have done before a write is acknowledged (docs/clickhouse.md, Settings and durability). Empty by default.
   */
  clickhouseInsertSettings: Record<string, string | number>
}

export const DEFAULTS = {
  host: '127.0.0.1',
  port: 8000,
  dataDir: './data',
  maxBodyBytes: 32 * 1024 * 1024,
  maxFileBytes: 1024 * 1024 * 1024,
  corsOrigins: ['*'],
  trustedProxies: [] as string[],
  geoDenyList: ['CU', 'IR', 'KP', 'SY'],
  geoPreload: true,
  logLevel: 'info',
  accessLog: true,
  shutdownGraceMs: 10_000,
  callsFlushRows: 200_000,
  callsFlushIntervalMs: 30_000,
  queryTimeoutMs: 30_000,
  maxQueryRows: 100_000,
  ingestWorkers: 0,
  ingestQueue: 256,
  // The models weft serves, priced at 0 until an operator sets a price.
  prices: 'weft-tiny=0,0',
  schedulingPolicy: 'fcfs' as const,
  maxNumSeqs: 64,
  kvCacheTokens: 131_072,
  maxWaitingRequests: 256,
  prefillChunk: 512,
  inferenceBackend: 'auto',
  modelReplicas: 1,
  inferenceThreads: 1,
  backgroundNice: 10,
}

const FLAG_TO_ENV: Record<string, string> = {
  host: 'WEFT_HOST',
  port: 'WEFT_PORT',
  'data-dir': 'WEFT_DATA_DIR',
  'api-key': 'WEFT_API_KEY',
  'max-body-bytes': 'WEFT_MAX_BODY_BYTES',
  'max-file-bytes': 'WEFT_MAX_FILE_BYTES',
  'cors-origins': 'WEFT_CORS_ORIGINS',
  'trusted-proxies': 'WEFT_TRUSTED_PROXIES',
  'geo-deny': 'WEFT_GEO_DENY',
  'geo-preload': 'WEFT_GEO_PRELOAD',
  'log-level': 'WEFT_LOG_LEVEL',
  'access-log': 'WEFT_ACCESS_LOG',
  'shutdown-grace-ms': 'WEFT_SHUTDOWN_GRACE_MS',
  'calls-flush-rows': 'WEFT_CALLS_FLUSH_ROWS',
  'calls-flush-interval-ms': 'WEFT_CALLS_FLUSH_INTERVAL_MS',
  'query-timeout-ms': 'WEFT_QUERY_TIMEOUT_MS',
  'max-query-rows': 'WEFT_MAX_QUERY_ROWS',
  'ingest-workers': 'WEFT_INGEST_WORKERS',
  'ingest-queue': 'WEFT_INGEST_QUEUE',
  prices: 'WEFT_PRICES',
  model: 'WEFT_MODEL',
  'served-model-name': 'WEFT_SERVED_MODEL_NAME',
  'scheduling-policy': 'WEFT_SCHEDULING_POLICY',
  'max-num-seqs': 'WEFT_MAX_NUM_SEQS',
  'kv-cache-tokens': 'WEFT_KV_CACHE_TOKENS',
  'no-enable-prefix-caching': 'WEFT_NO_ENABLE_PREFIX_CACHING',
  'max-waiting-requests': 'WEFT_MAX_WAITING_REQUESTS',
  'prefill-chunk': 'WEFT_PREFILL_CHUNK',
  'inference-backend': 'WEFT_INFERENCE_BACKEND',
  'model-replicas': 'WEFT_MODEL_REPLICAS',
  'inference-threads': 'WEFT_INFERENCE_THREADS',
  'tool-call-parser': 'WEFT_TOOL_CALL_PARSER',
  'reasoning-parser': 'WEFT_REASONING_PARSER',
  storage: 'WEFT_STORAGE',
  'clickhouse-url': 'WEFT_CLICKHOUSE_URL',
  'clickhouse-database': 'WEFT_CLICKHOUSE_DATABASE',
  'clickhouse-cluster': 'WEFT_CLICKHOUSE_CLUSTER',
  'clickhouse-insert-settings': 'WEFT_CLICKHOUSE_INSERT_SETTINGS',
  'chdb-path': 'WEFT_CHDB_PATH',
  'memory-limit': 'WEFT_MEMORY_LIMIT',
  'background-nice': 'WEFT_BACKGROUND_NICE',
}

export class ConfigError extends Error {}

const REPEATABLE = new Set(['model', 'served-model-name'])

/** Splits `--name value` / `--name=value` flags from positional arguments. */
/** The file in the data directory where a running server writes its URL (so CLI commands find it). */
export const SERVER_FILE = 'server.json'

export function parseFlags(argv: string[]): { flags: Record<string, string>; positional: string[] } {
  const flags: Record<string, string> = {}
  const positional: string[] = []
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i]!
    if (!a.startsWith('--')) {
      positional.push(a)
      continue
    }
    const eq = a.indexOf('=')
    let name: string
    let value: string
    if (eq > 0) [name, value] = [a.slice(2, eq), a.slice(eq + 1)]
    else {
      name = a.slice(2)
      const next = argv[i + 1]
      if (next === undefined || next.startsWith('--')) value = 'true'
      else {
        value = next
        i++
      }
    }
    // Repeatable flags gather into a comma list (--model a --model b); others: the last one wins.
    flags[name] = REPEATABLE.has(name) && name in flags ? `${flags[name]},${value}` : value
  }
  return { flags, positional }
}

function list(v: string | undefined, fallback: string[]): string[] {
  if (v === undefined) return fallback
  return v
    .split(',')
    .map((s) => s.trim())
    .filter((s) => s.length > 0)
}

function int(name: string, v: string | undefined, fallback: number, min: number, max: number): number {
  if (v === undefined || v === '') return fallback
  const n = Number(v)
  if (!Number.isInteger(n) || n < min || n > max) {
    throw new ConfigError(`${name} must be an integer in [${min}, ${max}], got ${JSON.stringify(v)}`)
  }
  return n
}

function bool(name: string, v: string | undefined, fallback: boolean): boolean {
  if (v === undefined || v === '') return fallback
  if (/^(1|true|yes|on)$/i.test(v)) return true
  if (/^(0|false|no|off)$/i.test(v)) return false
  throw new ConfigError(`${name} must be a boolean, got ${JSON.stringify(v)}`)
}

/** Flags win over environment variables, which win over the embedded defaults. */
export function loadConfig(flags: Record<string, string> = {}, env: NodeJS.ProcessEnv = process.env): Config {
  for (const f of Object.keys(flags)) {
    if (!(f in FLAG_TO_ENV)) throw new ConfigError(`unknown flag --${f}`)
  }
  const get = (flag: string): string | undefined => flags[flag] ?? env[FLAG_TO_ENV[flag]!]
  const apiKey = get('api-key')
  const dataDir = path.resolve(get('data-dir') || DEFAULTS.dataDir)
  return {
    host: get('host') || DEFAULTS.host,
    port: int('port', get('port'), DEFAULTS.port, 0, 65535),
    dataDir,
    apiKey: apiKey ? apiKey : undefined,
    maxBodyBytes: int('max-body-bytes', get('max-body-bytes'), DEFAULTS.maxBodyBytes, 1024, 2 ** 31),
    maxFileBytes: int('max-file-bytes', get('max-file-bytes'), DEFAULTS.maxFileBytes, 1024, 2 ** 42),
    corsOrigins: list(get('cors-origins'), DEFAULTS.corsOrigins),
    trustedProxies: list(get('trusted-proxies'), DEFAULTS.trustedProxies),
    geoDenyList: list(get('geo-deny'), DEFAULTS.geoDenyList).map((c) => c.toUpperCase()),
    geoPreload: bool('geo-preload', get('geo-preload'), DEFAULTS.geoPreload),
    logLevel: get('log-level') || DEFAULTS.logLevel,
    accessLog: bool('access-log', get('access-log'), DEFAULTS.accessLog),
    shutdownGraceMs: int('shutdown-grace-ms', get('shutdown-grace-ms'), DEFAULTS.shutdownGraceMs, 0, 600_000),
    callsFlushRows: int('calls-flush-rows', get('calls-flush-rows'), DEFAULTS.callsFlushRows, 1, 100_000_000),
    callsFlushIntervalMs: int('calls-flush-interval-ms', get('calls-flush-interval-ms'), DEFAULTS.callsFlushIntervalMs, 0, 86_400_000),
    queryTimeoutMs: int('query-timeout-ms', get('query-timeout-ms'), DEFAULTS.queryTimeoutMs, 1, 3_600_000),
    maxQueryRows: int('max-query-rows', get('max-query-rows'), DEFAULTS.maxQueryRows, 1, 10_000_000),
    ingestWorkers: int('ingest-workers', get('ingest-workers'), DEFAULTS.ingestWorkers, 0, 256),
    ingestQueue: int('ingest-queue', get('ingest-queue'), DEFAULTS.ingestQueue, 1, 1_000_000),
    prices: get('prices') ?? DEFAULTS.prices,
    models: list(get('model'), []).map((m) => (m === 'none' ? m : path.resolve(m))),
    servedModelNames: list(get('served-model-name'), []),
    schedulingPolicy: oneOf('scheduling-policy', get('scheduling-policy'), ['fcfs', 'priority'] as const, DEFAULTS.schedulingPolicy),
    maxNumSeqs: int('max-num-seqs', get('max-num-seqs'), DEFAULTS.maxNumSeqs, 1, 4096),
    kvCacheTokens: int('kv-cache-tokens', get('kv-cache-tokens'), DEFAULTS.kvCacheTokens, 16, 2 ** 30),
    enablePrefixCaching: !bool('no-enable-prefix-caching', get('no-enable-prefix-caching'), false),
    maxWaitingRequests: int('max-waiting-requests', get('max-waiting-requests'), DEFAULTS.maxWaitingRequests, 1, 1_000_000),
    prefillChunk: int('prefill-chunk', get('prefill-chunk'), DEFAULTS.prefillChunk, 1, 1_000_000),
    inferenceBackend: oneOf('inference-backend', get('inference-backend'), ['auto', 'tensorflow', 'wasm', 'cpu'] as const, 'auto'),
    modelReplicas: int('model-replicas', get('model-replicas'), DEFAULTS.modelReplicas, 1, 64),
    // At most the pthread workers the wasm build starts up front (8).
    inferenceThreads: int('inference-threads', get('inference-threads'), DEFAULTS.inferenceThreads, 1, 8),
    toolCallParser: get('tool-call-parser') ? oneOf('tool-call-parser', get('tool-call-parser'), TOOL_PARSERS, 'hermes') : null,
    reasoningParser: get('reasoning-parser') ? oneOf('reasoning-parser', get('reasoning-parser'), REASONING_PARSERS, 'qwen3') : null,
    storage: storageConfig(get, dataDir),
    memoryLimit: byteSize('memory-limit', get('memory-limit'), defaultMemoryLimit()),
    backgroundNice: int('background-nice', get('background-nice'), DEFAULTS.backgroundNice, 0, 19),
  }
}

/**
 * A quarter of the memory this process may use (the container's limit when there is one), at least 256 MiB and at
 * most 4 GiB: DuckDB's own default (80 % of RAM per instance, two instances) let one process reach 18 GB, and the
 * rest of the process (V8's heap, the models' weights, ingest workers) needs room beside it.
 */
export function defaultMemoryLimit(): number {
  const constrained = process.constrainedMemory?.() ?? 0
  const ram = constrained > 0 ? Math.min(constrained, os.totalmem()) : os.totalmem()
  // DuckDB's own default (80 % of RAM) for the two instances together, not each: a tighter default turned memory
  // pressure into refused writes (a tail insert out of memory stops the store until a restart; the 30-minute soak
  // hit it at 3 GiB). Operators who want less set --memory-limit, and queries spill past it.
  return Math.max(256 * 2 ** 20, Math.floor(ram * 0.8))
}

const SIZE_UNITS: Record<string, number> = {
  '': 1,
  b: 1,
  kb: 1e3,
  mb: 1e6,
  gb: 1e9,
  tb: 1e12,
  kib: 2 ** 10,
  mib: 2 ** 20,
  gib: 2 ** 30,
  tib: 2 ** 40,
  bytes: 1,
}

/**
 * Bytes in a size as people and DuckDB write them (`512MB`, `2GiB`, `192.0 MiB`, `1024 bytes`, plain bytes): decimal
 * units are powers of 1000, binary ones of 1024. NaN when it is not a size.
 */
export function sizeBytes(v: string): number {
  const m = /^\s*(\d+(?:\.\d+)?)\s*([a-z]*)\s*$/i.exec(v)
  const unit = m ? SIZE_UNITS[m[2]!.toLowerCase()] : undefined
  return m && unit ? Math.floor(Number(m[1]) * unit) : NaN
}

/** A size as DuckDB writes it (`512MB`, `2GiB`, or plain bytes): decimal units are powers of 1000, binary ones of 1024. */
export function byteSize(name: string, v: string | undefined, fallback: number): number {
  if (v === undefined || v === '') return fallback
  const n = sizeBytes(v)
  if (!(n >= 64 * 2 ** 20 && n <= 2 ** 50))
    throw new ConfigError(`${name} must be a size from 64MiB up (e.g. 512MB, 4GiB, or bytes), got ${JSON.stringify(v)}`)
  return n
}

function storageConfig(get: (flag: string) => string | undefined, dataDir: string): StorageConfig {
  const kind = oneOf('storage', get('storage'), STORAGE_KINDS, 'embedded')
  const url = get('clickhouse-url') || 'http://127.0.0.1:8123'
  if (!/^https?:\/\/[^\s]+$/.test(url)) throw new ConfigError(`clickhouse-url must be an http(s) URL, got ${JSON.stringify(url)}`)
  const database = get('clickhouse-database') || 'weft'
  const cluster = get('clickhouse-cluster') || undefined
  for (const [name, v] of [
    ['clickhouse-database', database],
    ['clickhouse-cluster', cluster],
  ] as const)
    if (v !== undefined && !/^[A-Za-z_][A-Za-z0-9_]{0,63}$/.test(v))
      throw new ConfigError(`${name} must be a plain identifier (letters, digits, _), got ${JSON.stringify(v)}`)
  if (cluster && kind === 'chdb') throw new ConfigError('clickhouse-cluster needs --storage clickhouse (chdb is one node)')
  const chdbPath = path.resolve(get('chdb-path') || path.join(dataDir, 'chdb'))
  const clickhouseInsertSettings = insertSettings(get('clickhouse-insert-settings'))
  if (Object.keys(clickhouseInsertSettings).length > 0 && kind === 'embedded')
    throw new ConfigError('clickhouse-insert-settings needs --storage clickhouse or chdb')
  return { kind, clickhouseUrl: url, clickhouseDatabase: database, clickhouseCluster: cluster, chdbPath, clickhouseInsertSettings }
}

/**
 * `name=value,name=value` (e.g. `insert_quorum=2,insert_quorum_parallel=0` or `async_insert=1,wait_for_async_insert=1`):
 * names are ClickHouse setting names (checked by ClickHouse at start, see clickhouse/calls.ts), values numbers or
 * plain words. They go to ClickHouse as settings, never into SQL text.
 */
export function insertSettings(v: string | undefined): Record<string, string | number> {
  const out: Record<string, string | number> = {}
  if (v === undefined || v.trim() === '') return out
  for (const item of v.split(',')) {
    const m = /^\s*([a-z_][a-z0-9_]{0,99})\s*=\s*([A-Za-z0-9_.-]{1,100})\s*$/.exec(item)
    if (!m)
      throw new ConfigError(
        `clickhouse-insert-settings: each item is name=value (a setting name, a number or a word), got ${JSON.stringify(item)}`,
      )
    if (m[1]! in out) throw new ConfigError(`clickhouse-insert-settings: ${m[1]} is given twice`)
    out[m[1]!] = /^-?\d+(\.\d+)?$/.test(m[2]!) ? Number(m[2]) : m[2]!
  }
  return out
}

function oneOf<T extends string>(name: string, v: string | undefined, allowed: readonly T[], fallback: T): T {
  if (v === undefined || v === '') return fallback
  if (!allowed.includes(v as T)) throw new ConfigError(`${name} must be one of ${allowed.join(', ')}, got ${JSON.stringify(v)}`)
  return v as T
}
