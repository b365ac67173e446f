#!/usr/bin/env node
import fs from 'node:fs/promises'
import path from 'node:path'
import { ConfigError, DEFAULTS, loadConfig, parseFlags, SERVER_FILE } from './core/config.js'
import { createLogger } from './core/log.js'
import { progress } from './core/progress.js'
import { lowerBackgroundThreads } from './core/thread-priority.js'
import type { Catalog } from './catalog/db.js'
import type { KeyInfo } from './catalog/keys.js'
import type { keyInfoJson } from './api/admin.js'
import { VERSION } from './core/version.js'

// Each command loads only what it runs (`await import`): the server stack takes over a second to load, which
// `weft version`, `weft bench` and key commands against a running server need not pay.

const USAGE = `weft ${VERSION}

Usage:
  weft serve [--host H] [--port P] [--data-dir D] [--api-key K] [--max-body-bytes N] [--max-file-bytes N]
             [--cors-origins a,b] [--trusted-proxies ip,ip] [--geo-deny CC,CC] [--geo-preload true|false]
             [--log-level L] [--access-log true|false] [--shutdown-grace-ms N]
             [--calls-flush-rows N] [--calls-flush-interval-ms N] [--query-timeout-ms N] [--max-query-rows N]
             [--ingest-workers N] [--ingest-queue N] [--prices 'model=prompt,completion;…']
             [--model DIR,DIR|none] [--served-model-name a,b] [--scheduling-policy fcfs|priority]
             [--max-num-seqs N] [--kv-cache-tokens N] [--no-enable-prefix-caching] [--max-waiting-requests N] [--prefill-chunk N]
             [--inference-backend auto|tensorflow|wasm|cpu] [--model-replicas N]
             [--tool-call-parser hermes|llama3_json] [--reasoning-parser deepseek_r1|qwen3]
             [--storage embedded|clickhouse|chdb] [--clickhouse-url URL] [--clickhouse-database DB]
             [--clickhouse-cluster NAME] [--chdb-path DIR] [--memory-limit SIZE] [--background-nice 0-19]
  weft keys create --user USER [--name NAME] [--entities e1,e2] [--admin] [--data-dir D]
  weft keys list [--data-dir D]
  weft keys revoke KEY_ID [--data-dir D]
  weft bench serve [--base-url URL] [--model M] [--endpoint /v1/chat/completions|/v1/completions]
             [--num-prompts N] [--request-rate R|inf] [--burstiness B] [--max-concurrency C]
             [--dataset random|FILE.jsonl|weave:///entity/project/object/name:digest]
             [--input-len N] [--output-len N] [--range-ratio X] [--seed S] [--ignore-eos]
             [--goodput 'ttft:MS tpot:MS e2el:MS'] [--metric-percentiles 90,95,99] [--header K=V,K=V]
             [--result-dir D] [--result-filename F] [--api-key K]
             [--trace-to URL --project entity/project] [--trace-api-key K]
  weft bench trace [--base-url URL] [--project entity/project] [--api-key K] [--batch-size N]
             [--connections N] [--payload-bytes N] [--models N] [--duration S | --count N]
             [--rate CALLS_PER_S|inf] [--query-interval S] [--result-dir D] [--result-filename F]
  weft bench compare A.json B.json [...] [--format table|markdown|json]
  weft version

Environment: WEFT_HOST (${DEFAULTS.host}), WEFT_PORT (${DEFAULTS.port}), WEFT_DATA_DIR (${DEFAULTS.dataDir}),
WEFT_API_KEY, WEFT_MAX_BODY_BYTES, WEFT_MAX_FILE_BYTES, WEFT_CORS_ORIGINS, WEFT_TRUSTED_PROXIES, WEFT_GEO_DENY,
WEFT_LOG_LEVEL, WEFT_ACCESS_LOG, WEFT_SHUTDOWN_GRACE_MS, WEFT_CALLS_FLUSH_ROWS,
WEFT_CALLS_FLUSH_INTERVAL_MS, WEFT_QUERY_TIMEOUT_MS, WEFT_MAX_QUERY_ROWS, WEFT_INGEST_WORKERS,
WEFT_INGEST_QUEUE, WEFT_PRICES, WEFT_MODEL, WEFT_SERVED_MODEL_NAME, WEFT_SCHEDULING_POLICY, WEFT_MAX_NUM_SEQS,
WEFT_KV_CACHE_TOKENS, WEFT_MAX_WAITING_REQUESTS, WEFT_PREFILL_CHUNK, WEFT_INFERENCE_BACKEND,
WEFT_MODEL_REPLICAS, WEFT_TOOL_CALL_PARSER, WEFT_REASONING_PARSER, WEFT_STORAGE (embedded), WEFT_CLICKHOUSE_URL
(http://127.0.0.1:8123), WEFT_CLICKHOUSE_DATABASE (weft), WEFT_CLICKHOUSE_CLUSTER, WEFT_CHDB_PATH (<data dir>/chdb), WEFT_MEMORY_LIMIT
(80 % of RAM). Flags win over the environment; the README's configuration table and the docs pages it links have every default.

The first start (with no WEFT_API_KEY) creates an admin key, prints it once and keeps it in
<data dir>/admin-key, readable only by its owner: KEY=$(cat data/admin-key). 'weft keys create' makes more.

While a server runs it holds the catalog; 'weft keys' then goes through its admin API and needs an
admin key in WEFT_API_KEY or --api-key.

'weft bench serve' load-tests any OpenAI-compatible server as vLLM's 'bench serve' does (same metrics,
same result keys); its key is --api-key or OPENAI_API_KEY, the trace server's --trace-api-key or
WEFT_API_KEY. 'weft bench trace' load-tests a Weave-compatible trace server (key: --api-key or WEFT_API_KEY).
`

/** What the first start prints about the admin key it created (the key line is what test/keys-cli.test.ts reads). */
function firstKeyMessage(key: string, file: string | undefined): string {
  const shown = file
    ? `Created the first admin API key. It is shown this once here and kept in ${file} (readable only by its owner):`
    : `Created the first admin API key. It is shown this once; store it now:`
  return (
    `\n${shown}\n\n    ${key}\n\n` +
    `Send it as the password of HTTP Basic auth (user "api") or as a Bearer token.\n` +
    `Set WEFT_API_KEY to choose the admin key yourself; 'weft keys create --user U' makes more keys.\n\n`
  )
}

async function serve(flags: Record<string, string>): Promise<void> {
  const config = loadConfig(flags)
  const log = createLogger(config.logLevel)
  // Before any worker starts: the event loop gets a core ahead of the other threads (core/thread-priority.ts).
  lowerBackgroundThreads(config.backgroundNice)
  // The model workers start first and load TF.js and their weights on their own threads while this one loads the
  // server's modules (models.ts); startServer waits for them before it listens, and closes them if it fails.
  progress.useLogger(log)
  // Started as `node dist/src/main.js` rather than through weft.cjs: libuv's pool kept its 4 threads (see weft.cts).
  if (!process.env.UV_THREADPOOL_SIZE)
    log.warn(
      'libuv thread pool at its default of 4: reads may wait behind long statements; start with dist/src/weft.cjs or set UV_THREADPOOL_SIZE',
    )
  const models = (await import('./models.js')).startModels(config, log)
  models.catch(() => {})
  const { startServer } = await import('./server.js')
  const server = await startServer(config, log, { models })
  let stopping = false
  const stop = (signal: string) => {
    if (stopping) {
      process.stdout.write(`${signal} again: exiting now\n`)
      process.exit(1)
    }
    stopping = true
    log.info({ signal }, 'shutting down')
    server.close().then(
      () => log.flush(() => process.exit(0)),
      (err) => {
        log.error({ err }, 'shutdown failed')
        log.flush(() => process.exit(1))
      },
    )
  }
  // The handlers go in before the line that says the server listens: stdout to a pipe is written synchronously on
  // Linux, so a supervisor that signals on reading it could otherwise find the default action (exit by the signal).
  process.on('SIGINT', () => stop('SIGINT'))
  process.on('SIGTERM', () => stop('SIGTERM'))
  if (server.createdAdminKey) process.stdout.write(firstKeyMessage(server.createdAdminKey, server.adminKeyFile))
  process.stdout.write(`weft ${VERSION} listening on ${server.url} (data in ${config.dataDir})\n`)
}

function printKeys(keys: ReturnType<typeof keyInfoJson>[]): void {
  if (keys.length === 0) {
    process.stdout.write('no keys\n')
    return
  }
  const rows = keys.map((k) => [
    k.key_id,
    k.prefix + '…',
    k.user_id,
    k.is_admin ? 'admin' : '',
    k.entities?.join(',') ?? '*',
    k.created_at,
    k.revoked_at ? `revoked ${k.revoked_at}` : 'active',
    k.name,
  ])
  const head = ['ID', 'KEY', 'USER', 'ROLE', 'ENTITIES', 'CREATED', 'STATE', 'NAME']
  const widths = head.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i]!.length)))
  for (const r of [head, ...rows])
    process.stdout.write(
      r
        .map((c, i) => c.padEnd(widths[i]!))
        .join('  ')
        .trimEnd() + '\n',
    )
}

/** Talks to the running server that holds the catalog. */
async function viaServer(dataDir: string, apiKey: string | undefined, method: string, p: string, body?: unknown): Promise<unknown> {
  let url: string
  try {
    url = (JSON.parse(await fs.readFile(path.join(dataDir, SERVER_FILE), 'utf8')) as { url: string }).url
  } catch {
    throw new Error(`the catalog in ${dataDir} is locked by another process, and no running weft server is recorded there`)
  }
  if (!apiKey)
    throw new Error(`a weft server (${url}) holds the catalog; pass an admin key with WEFT_API_KEY or --api-key to manage keys through it`)
  const res = await fetch(url + p, {
    method,
    headers: { authorization: `Bearer ${apiKey}`, 'content-type': 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body),
  })
  const json = (await res.json()) as { reason?: string; detail?: unknown }
  if (!res.ok) throw new Error(`server answered ${res.status}: ${json.reason ?? JSON.stringify(json.detail ?? json)}`)
  return json
}

interface KeysArgs {
  sub: 'create' | 'list' | 'revoke'
  id: string | undefined
  flags: Record<string, string>
  dataDir: string
  apiKey: string | undefined
  entities: string[] | null
}

function keysArgs(positional: string[], flags: Record<string, string>): KeysArgs {
  const [sub, id] = positional
  const known = new Set(['user', 'name', 'entities', 'admin', 'data-dir', 'api-key'])
  for (const f of Object.keys(flags)) if (!known.has(f)) throw new ConfigError(`unknown flag --${f} for 'weft keys'`)
  if (sub === 'create' && !flags.user) throw new ConfigError("'weft keys create' needs --user USER")
  if (sub === 'revoke' && !id) throw new ConfigError("'weft keys revoke' needs a key id (see 'weft keys list')")
  if (sub !== 'create' && sub !== 'list' && sub !== 'revoke') throw new ConfigError(USAGE)
  const entities = flags.entities
    ? flags.entities
        .split(',')
        .map((s) => s.trim())
        .filter(Boolean)
    : null
  const dataDir = path.resolve(flags['data-dir'] ?? process.env.WEFT_DATA_DIR ?? DEFAULTS.dataDir)
  return { sub, id, flags, dataDir, apiKey: flags['api-key'] ?? process.env.WEFT_API_KEY, entities }
}

/** The key command on the catalog itself, when no server holds it; false when one does. */
async function keysInCatalog({ sub, id, flags, dataDir, entities }: KeysArgs): Promise<boolean> {
  const [{ Catalog, CatalogLockedError }, { KeyError, KeyStore }, { keyInfoJson }] = await Promise.all([
    import('./catalog/db.js'),
    import('./catalog/keys.js'),
    import('./api/admin.js'),
  ])
  let catalog: Catalog
  try {
    catalog = await Catalog.open(dataDir)
  } catch (e) {
    if (e instanceof CatalogLockedError) return false
    throw e
  }
  try {
    const ks = await KeyStore.load(catalog)
    if (sub === 'create') {
      const { key, info } = await ks.create({ userId: flags.user!, name: flags.name, entities, isAdmin: flags.admin === 'true' })
      process.stdout.write(`${key}\n`)
      process.stderr.write(`created ${info.keyId} for user ${info.userId}; the key above is shown this once\n`)
    } else if (sub === 'list') printKeys((await ks.list()).map(keyInfoJson))
    else {
      const info = await ks.revoke(id!)
      if (!info) throw new KeyError(`no key with id ${id}`)
      process.stdout.write(`revoked ${info.keyId}\n`)
    }
  } finally {
    await catalog.close()
  }
  return true
}

/** The key command through the running server that holds the catalog (its admin API). */
async function keysViaServer({ sub, id, flags, dataDir, apiKey, entities }: KeysArgs): Promise<void> {
  if (sub === 'create') {
    const out = (await viaServer(dataDir, apiKey, 'POST', '/admin/keys', {
      user_id: flags.user,
      ...(flags.name ? { name: flags.name } : {}),
      ...(entities ? { entities } : {}),
      is_admin: flags.admin === 'true',
    })) as { key: string; info: { key_id: string; user_id: string } }
    process.stdout.write(`${out.key}\n`)
    process.stderr.write(`created ${out.info.key_id} for user ${out.info.user_id}; the key above is shown this once\n`)
  } else if (sub === 'list') {
    printKeys(((await viaServer(dataDir, apiKey, 'GET', '/admin/keys')) as { keys: ReturnType<typeof keyInfoJson>[] }).keys)
  } else {
    const out = (await viaServer(dataDir, apiKey, 'DELETE', `/admin/keys/${encodeURIComponent(id!)}`)) as KeyInfo & { key_id: string }
    process.stdout.write(`revoked ${out.key_id}\n`)
  }
}

async function keysCommand(positional: string[], flags: Record<string, string>): Promise<void> {
  const args = keysArgs(positional, flags)
  if (!(await keysInCatalog(args))) await keysViaServer(args)
}

async function main(argv: string[]): Promise<void> {
  const { flags, positional } = parseFlags(argv)
  const [cmd, ...rest] = positional
  if (flags.help === 'true' || cmd === 'help') {
    process.stdout.write(USAGE)
    return
  }
  switch (cmd ?? 'serve') {
    case 'serve':
      return serve(flags)
    case 'keys':
      return keysCommand(rest, flags)
    case 'bench':
      return (await import('./bench/index.js')).benchCommand(rest, flags, USAGE)
    case 'version':
      process.stdout.write(`${VERSION}\n`)
      return
    default:
      throw new ConfigError(`unknown command ${JSON.stringify(cmd)}\n\n${USAGE}`)
  }
}

main(process.argv.slice(2)).catch((e: unknown) => {
  const msg = e instanceof Error ? e.message : String(e)
  process.stderr.write(`weft: ${msg}\n`)
  process.exit(e instanceof ConfigError ? 2 : 1)
})
