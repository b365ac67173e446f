/**
 * Checks `--load direct` of the both-backends bench against `--load http`: the same generated calls go
 * into four servers (each backend loaded both ways), then every call (the whole project, as
 * /calls/stream_query returns it) and the answer to every request of bench/backends-requests.ts are
 * compared across all four. Exit code 1 on a difference.
 *
 *   npm run build && node dist/bench/backends-direct-check.js [--calls 20000] [--keep]
 */
import { mkdtempSync, rmSync } from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { parseFlags } from '../src/core/config.js'
import { ROOT_DIR } from '../src/core/version.js'
import { directChdb, directEmbedded } from './backends-direct.js'
import { generate, loadAll, removeGenerated } from './backends-load.js'
import { benchRequests, differences, pageFilter, tiesById, type BenchRequest } from './backends-requests.js'
import { startBackend, type BackendServer } from './backends-servers.js'

const { flags } = parseFlags(process.argv.slice(2))
const n = Number(flags.calls ?? 20_000)
const KEY = 'bench-key'
const AUTH = 'Basic ' + Buffer.from('api:' + KEY).toString('base64')
const PROJECT = 'bench/backends'
const OP = `weave:///${PROJECT}/op/op_3:v1`
const CHDB_FROM = [ROOT_DIR, path.join(ROOT_DIR, 'bench', 'peer-deps')].map((d) => path.join(d, 'package.json'))

async function ask(s: BackendServer, r: BenchRequest): Promise<unknown> {
  const res = await fetch(s.url + r.path, {
    method: 'POST',
    headers: { authorization: AUTH, 'content-type': 'application/json' },
    body: JSON.stringify(r.body),
  })
  const text = await res.text()
  if (res.status !== 200) throw new Error(`${r.path} answered ${res.status}: ${text.slice(0, 300)}`)
  if (!r.lines) return JSON.parse(text)
  return tiesById(
    text
      .split('\n')
      .filter(Boolean)
      .map((l) => JSON.parse(l) as { id: string; started_at: string }),
  )
}

const end = Math.floor(Date.now() / 1000) * 1000
const g = await generate(n, PROJECT, end - 1000, 30, 'admin')
const root = mkdtempSync(path.join(os.tmpdir(), 'weft-direct-check-'))
const servers: [string, BackendServer][] = []
let bad = 0
try {
  for (const k of ['embedded', 'chdb'] as const)
    servers.push([`${k} http`, await startBackend(ROOT_DIR, k, path.join(root, 'http-' + k), KEY)])
  await loadAll(g, n, Object.fromEntries(servers.map(([, s]) => [s.kind, s.url])), AUTH)
  servers.push(['embedded direct', (await directEmbedded(ROOT_DIR, g, path.join(root, 'direct-embedded'), KEY)).server])
  servers.push(['chdb direct', (await directChdb(ROOT_DIR, g, path.join(root, 'direct-chdb'), KEY, CHDB_FROM)).server])
  const first = servers[0]![1]
  const roots = (await ask(first, {
    path: '/calls/stream_query',
    lines: true,
    body: { project_id: PROJECT, filter: { trace_roots_only: true }, sort_by: [{ field: 'started_at', direction: 'desc' }], limit: 100 },
  })) as { id: string; trace_id: string }[]
  const count = (await ask(first, { path: '/calls/query_stats', body: pageFilter({ project: PROJECT, op: OP }) })) as { count: number }
  const reqs: Record<string, BenchRequest> = {
    every_call: {
      path: '/calls/stream_query',
      lines: true,
      body: { project_id: PROJECT, sort_by: [{ field: 'started_at', direction: 'asc' }] },
    },
    ...benchRequests({
      project: PROJECT,
      op: OP,
      user: 'admin',
      end,
      roots: roots.map((r) => r.id),
      traceId: roots[50]!.trace_id,
      deepOffset: Math.floor(count.count * 0.9),
    }),
  }
  for (const [name, r] of Object.entries(reqs)) {
    const answers = await Promise.all(servers.map(([, s]) => ask(s, r)))
    const diffs = answers.slice(1).flatMap((a, i) => differences(answers[0], a).map((d) => `${servers[i + 1]![0]}: ${d}`))
    const size = Array.isArray(answers[0]) ? ` (${answers[0].length} items)` : ''
    process.stdout.write(`  ${name}${size}: ${diffs.length ? 'DIFFER ' + diffs.slice(0, 3).join('; ') : 'equal on all four'}\n`)
    if (diffs.length) bad++
  }
} finally {
  for (const [, s] of servers) await s.stop()
  if (flags.keep) process.stdout.write(`kept ${root}\n`)
  else rmSync(root, { recursive: true, force: true })
  removeGenerated(g)
}
process.stdout.write(bad ? `${bad} requests differ\n` : `${n} calls: http and direct loads answer the same on both backends\n`)
process.exitCode = bad ? 1 : 0
