#!/usr/bin/env node
import fs from 'node:fs/promises'
import path from 'node:path'
import { ConfigError, DEFAULTS, loadConfig, parseFlags } from './core/config.js'
import { createLogger } from './core/log.js'
import { SERVER_FILE, startServer } from './server.js'
import { Catalog, CatalogLockedError } from './catalog/db.js'
import { KeyError, KeyStore, type KeyInfo } from './catalog/keys.js'
import { keyInfoJson } from './api/admin.js'
import { VERSION } from './core/version.js'

const USAGE = `weft ${VERSION}

Usage:
  weft serve [--host H] [--port P] [--data-dir D] [--api-key K] [--max-body-bytes N] [--max-file-bytes N]
             [--cors-origins a,b] [--trusted-proxies ip,ip] [--geo-deny CC,CC]
             [--log-level L] [--access-log true|false] [--shutdown-grace-ms N]
             [--calls-flush-rows N] [--calls-flush-interval-ms N] [--query-timeout-ms N] [--max-query-rows N]
             [--ingest-workers N] [--ingest-queue N] [--prices 'model=prompt,completion;…']
             [--model DIR,DIR|none] [--served-model-name a,b] [--scheduling-policy fcfs|priority]
             [--max-num-seqs N] [--kv-cache-tokens N] [--max-waiting-requests N] [--prefill-chunk N]
             [--inference-backend auto|tensorflow|wasm|cpu] [--model-replicas N]
             [--tool-call-parser hermes|llama3_json] [--reasoning-parser deepseek_r1|qwen3]
  weft keys create --user USER [--name NAME] [--entities e1,e2] [--admin] [--data-dir D]
  weft keys list [--data-dir D]
  weft keys revoke KEY_ID [--data-dir D]
  weft version

Environment: WEFT_HOST (${DEFAULTS.host}), WEFT_PORT (${DEFAULTS.port}), WEFT_DATA_DIR (${DEFAULTS.dataDir}),
WEFT_API_KEY, WEFT_MAX_BODY_BYTES, WEFT_MAX_FILE_BYTES, WEFT_CORS_ORIGINS, WEFT_TRUSTED_PROXIES, WEFT_GEO_DENY,
WEFT_LOG_LEVEL, WEFT_ACCESS_LOG, WEFT_SHUTDOWN_GRACE_MS, WEFT_CALLS_FLUSH_ROWS,
WEFT_CALLS_FLUSH_INTERVAL_MS, WEFT_QUERY_TIMEOUT_MS, WEFT_MAX_QUERY_ROWS, WEFT_INGEST_WORKERS,
WEFT_INGEST_QUEUE, WEFT_PRICES, WEFT_MODEL, WEFT_SERVED_MODEL_NAME, WEFT_SCHEDULING_POLICY, WEFT_MAX_NUM_SEQS,
WEFT_KV_CACHE_TOKENS, WEFT_MAX_WAITING_REQUESTS, WEFT_PREFILL_CHUNK, WEFT_INFERENCE_BACKEND,
WEFT_MODEL_REPLICAS, WEFT_TOOL_CALL_PARSER, WEFT_REASONING_PARSER. Flags win over the environment; the README's configuration table has every default.

The first start (with no WEFT_API_KEY) creates an admin key, prints it once and keeps it in
<data dir>/admin-key, readable only by its owner: KEY=$(cat data/admin-key). 'weft keys create' makes more.

While a server runs it holds the catalog; 'weft keys' then goes through its admin API and needs an
admin key in WEFT_API_KEY or --api-key.
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
  const server = await startServer(config, log)
  if (server.createdAdminKey) process.stdout.write(firstKeyMessage(server.createdAdminKey, server.adminKeyFile))
  process.stdout.write(`weft ${VERSION} listening on ${server.url} (data in ${config.dataDir})\n`)
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
  process.on('SIGINT', () => stop('SIGINT'))
  process.on('SIGTERM', () => stop('SIGTERM'))
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

async function keysCommand(positional: string[], flags: Record<string, string>): Promise<void> {
  const [sub, ...rest] = positional
  const known = new Set(['user', 'name', 'entities', 'admin', 'data-dir', 'api-key'])
  for (const f of Object.keys(flags)) if (!known.has(f)) throw new ConfigError(`unknown flag --${f} for 'weft keys'`)
  const dataDir = path.resolve(flags['data-dir'] ?? process.env.WEFT_DATA_DIR ?? DEFAULTS.dataDir)
  const apiKey = flags['api-key'] ?? process.env.WEFT_API_KEY
  const entities = flags.entities
    ? flags.entities
        .split(',')
        .map((s) => s.trim())
        .filter(Boolean)
    : null
  if (sub === 'create' && !flags.user) throw new ConfigError("'weft keys create' needs --user USER")
  if (sub === 'revoke' && !rest[0]) throw new ConfigError("'weft keys revoke' needs a key id (see 'weft keys list')")
  if (sub !== 'create' && sub !== 'list' && sub !== 'revoke') throw new ConfigError(USAGE)

  let catalog: Catalog | undefined
  try {
    catalog = await Catalog.open(dataDir)
  } catch (e) {
    if (!(e instanceof CatalogLockedError)) throw e
  }
  if (catalog) {
    try {
      const ks = await KeyStore.load(catalog)
      if (sub === 'create') {
        const { key, info } = await ks.create({ userId: flags.user!, name: flags.name, entities, isAdmin: flags.admin === 'true' })
        process.stdout.write(`${key}\n`)
        process.stderr.write(`created ${info.keyId} for user ${info.userId}; the key above is shown this once\n`)
      } else if (sub === 'list') printKeys((await ks.list()).map(keyInfoJson))
      else {
        const info = await ks.revoke(rest[0]!)
        if (!info) throw new KeyError(`no key with id ${rest[0]}`)
        process.stdout.write(`revoked ${info.keyId}\n`)
      }
    } finally {
      await catalog.close()
    }
    return
  }
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
    const out = (await viaServer(dataDir, apiKey, 'DELETE', `/admin/keys/${encodeURIComponent(rest[0]!)}`)) as KeyInfo & { key_id: string }
    process.stdout.write(`revoked ${out.key_id}\n`)
  }
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
    case 'version':
      process.stdout.write(`${VERSION}\n`)
      return
    default:
      throw new ConfigError(`unknown command ${JSON.stringify(cmd)}\n\n${USAGE}`)
  }
}

main(process.argv.slice(2)).catch((e: unknown) => {
  const msg = e instanceof ConfigError || e instanceof KeyError || e instanceof Error ? e.message : String(e)
  process.stderr.write(`weft: ${msg}\n`)
  process.exit(e instanceof ConfigError ? 2 : 1)
})
