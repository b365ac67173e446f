import t from 'tap'
import { spawnSync } from 'node:child_process'
import { readFileSync } from 'node:fs'
import path from 'node:path'
import { SERVER_NODE_FLAGS } from '../src/core/node-flags.js'
import { workerExecArgv } from '../src/core/worker-pool-options.js'
import { ROOT, postJson, startServer } from './helpers/server.js'

/**
 * The server's node flags (core/node-flags.ts) are given where it starts: `npm start`, the `weft` command's first
 * line, and (test/helpers/server.ts) every server of the suite. V8 flags apply to the whole process and a worker
 * thread given one throws, so workers get the rest: a server started with them runs its inference, structured-output
 * and ingest workers.
 */

t.test('npm start and the weft command give the flags', async (t) => {
  const pkg = JSON.parse(readFileSync(path.join(ROOT, 'package.json'), 'utf8')) as { scripts: Record<string, string> }
  const entry = readFileSync(path.join(ROOT, 'src', 'weft.cts'), 'utf8').split('\n')[0]!
  for (const flag of SERVER_NODE_FLAGS) {
    t.match(pkg.scripts.start, ` ${flag} `, `npm start gives ${flag}`)
    t.match(entry, new RegExp(`^#!/usr/bin/env -S node .*${flag}`), `weft.cts's first line gives ${flag}`)
  }
})

t.test("the entry sets DuckDB's allocator decay before DuckDB loads, unless the user set it or a memory budget", async (t) => {
  // jemalloc reads DUCKDB_JE_MALLOC_CONF once, when libduckdb loads (main.js's imports): set after that, it is ignored.
  const entry = readFileSync(path.join(ROOT, 'dist', 'src', 'weft.cjs'), 'utf8')
  const set = /if \(!process\.env\.DUCKDB_JE_MALLOC_CONF && !budgetSet\)\s*process\.env\.DUCKDB_JE_MALLOC_CONF = '([^']*)'/.exec(entry)
  const load = entry.search(/import\(['"]\.\/main\.js['"]\)/)
  t.equal(set?.[1], 'dirty_decay_ms:30000,muzzy_decay_ms:30000', 'weft.cjs sets 30 s decays when the user has not')
  t.ok(set && load > set.index, 'and does so before it loads main.js')
})

t.test('jemalloc takes DUCKDB_JE_MALLOC_CONF set from JavaScript before DuckDB loads, and only then', async (t) => {
  // What the entry relies on: process.env reaches the C environment, which jemalloc reads when libduckdb loads.
  // `stats_print:true` makes jemalloc print its settings at exit.
  const conf = 'dirty_decay_ms:30000,muzzy_decay_ms:30000,stats_print:true'
  const open = "const { DuckDBInstance } = await import('@duckdb/node-api'); await (await DuckDBInstance.create(':memory:')).connect();"
  const run = (code: string) =>
    spawnSync(process.execPath, ['--input-type=module', '-e', code], {
      cwd: ROOT,
      encoding: 'utf8',
      env: { ...process.env, DUCKDB_JE_MALLOC_CONF: '' },
    })
  const before = run(`process.env.DUCKDB_JE_MALLOC_CONF = '${conf}'; ${open}`)
  t.match(before.stdout + before.stderr, /opt\.dirty_decay_ms: 30000/, 'set before the import: 30 s')
  const after = run(`${open} process.env.DUCKDB_JE_MALLOC_CONF = '${conf}';`)
  t.notMatch(after.stdout + after.stderr, /opt\.dirty_decay_ms/, 'set after it: not read (no settings printed)')
})

t.test("workers are not given V8's heap flags", async (t) => {
  const saved = process.execArgv.splice(0)
  t.teardown(() => process.execArgv.splice(0, process.execArgv.length, ...saved))
  process.execArgv.push('--initial-old-space-size=128', '--max-semi-space-size=32', '--enable-source-maps', '--max-old-space-size=4096')
  t.same(workerExecArgv(), ['--enable-source-maps'])
})

t.test('a server started with the flags runs its workers', async (t) => {
  const s = await startServer()
  t.teardown(() => s.stop())
  const chat = await postJson(s, '/v1/chat/completions', {
    model: 'weft-tiny',
    messages: [{ role: 'user', content: 'hi' }],
    max_tokens: 4,
    response_format: { type: 'json_object' },
  })
  t.equal(chat.status, 200, `a chat completion with structured output (inference and grammar workers): ${chat.text.slice(0, 200)}`)
  const start = await postJson(s, '/call/start', {
    start: { project_id: 'flags/p', op_name: 'op', started_at: new Date().toISOString(), attributes: {}, inputs: {} },
  })
  t.equal(start.status, 200, 'a call started (ingest worker)')
})
