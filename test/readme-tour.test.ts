import { spawn } from 'node:child_process'
import { existsSync, readFileSync, statSync } from 'node:fs'
import { rm } from 'node:fs/promises'
import path from 'node:path'
import t from 'tap'
import { ROOT, startServer, tempDir, type TestServer } from './helpers/server.js'

// No chat in this file: its servers start without the built-in model (about 1 s of CPU less per start).
process.env.WEFT_MODEL ??= 'none'

/**
 * The README's three-request tour, run as pasted: the fenced block after `<!-- tour -->`, against a
 * fresh server whose admin key the first start created. Only what the README tells a user to set is
 * set: WEFT_PORT and WEFT_DATA_DIR. Each numbered step runs on its own (after the block's opening
 * lines, which set KEY and URL) so its answer can be checked.
 */
function tourBlock(): string {
  const readme = readFileSync(path.join(ROOT, 'README.md'), 'utf8')
  const m = /<!-- tour -->\s*```sh\n([\s\S]*?)\n```/.exec(readme)
  if (!m) throw new Error('README.md has no ```sh block after <!-- tour -->')
  return m[1]!
}

function bash(script: string, env: Record<string, string>, cwd: string): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    const p = spawn('bash', ['-c', script], { cwd, env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] })
    let stdout = ''
    let stderr = ''
    p.stdout.on('data', (d) => (stdout += d))
    p.stderr.on('data', (d) => (stderr += d))
    p.on('exit', (code) => resolve({ code, stdout, stderr }))
  })
}

let s: TestServer
t.before(async () => {
  // No WEFT_API_KEY: the first start creates the admin key, as for a newcomer.
  s = await startServer({ key: null })
})
t.teardown(() => s.stop())

t.test('the README tour works as pasted', async (t) => {
  const [prelude, ...steps] = tourBlock().split(/\n\s*\n/)
  t.equal(steps.length, 3, 'the tour has a setup paragraph and three steps')
  t.match(prelude, /admin-key/, 'the tour reads the admin key from its file')

  const keyFile = path.join(s.dataDir, 'admin-key')
  const created = /shown this once[^\n]*\n\n\s+(weft_\S+)/.exec(s.output())?.[1]
  t.ok(created, 'the first start printed the admin key')
  t.ok(existsSync(keyFile), 'the first start kept the key in <data dir>/admin-key')
  t.equal(readFileSync(keyFile, 'utf8').trim(), created, 'the key file holds the printed key')
  t.equal(statSync(keyFile).mode & 0o077, 0, 'readable only by its owner')
  t.match(s.output(), keyFile, 'the start says where the key file is')

  const env = { WEFT_PORT: new URL(s.url).port, WEFT_DATA_DIR: s.dataDir }
  // Not the checkout: a `data` directory there must not stand in for WEFT_DATA_DIR.
  const cwd = tempDir('weft-tour-')
  t.teardown(() => rm(cwd, { recursive: true, force: true }))
  const answers: any[] = []
  for (const step of steps) {
    const r = await bash(`${prelude}\n${step}`, env, cwd)
    t.equal(r.code, 0, `step exits 0: ${step.split('\n')[0]}`)
    t.equal(r.stderr, '', 'and prints nothing on stderr')
    answers.push(JSON.parse(r.stdout))
  }
  const [written, queried, stats] = answers

  t.equal(written.res.length, 2, 'the start and the end are each answered')
  t.equal(written.res[0].id, '0c0ffee000000001', 'the call is stored under its id')
  t.notOk(
    written.res.some((r: any) => r.error),
    'no item is rejected',
  )

  t.equal(queried.calls.length, 1, 'the query finds the call')
  const call = queried.calls[0]
  t.equal(call.id, '0c0ffee000000001')
  t.equal(call.op_name, 'hello')
  t.same(call.inputs, { question: 'hi?' })
  t.equal(call.output, 'hello!')
  t.equal(call.summary.weave.status, 'success')
  t.equal(call.summary.weave.latency_ms, 1500)

  t.equal(stats.granularity, 86400)
  t.equal(stats.call_buckets.length, 1, 'one bucket for the day')
  t.equal(stats.call_buckets[0].sum_call_count, 1, 'the statistics count the call')
  t.equal(stats.call_buckets[0].avg_latency_ms, 1500, 'with its latency')
  const usage = stats.usage_buckets.filter((b: any) => b.model === 'gpt-4o')
  t.equal(usage.length, 1)
  t.equal(usage[0].sum_total_tokens, 15, 'and its tokens')
})
