import t from 'tap'
import { randomBytes } from 'node:crypto'
import { rm } from 'node:fs/promises'
import path from 'node:path'
import { requestJson, startServer, tempDir } from './helpers/server.js'

const hex = (n: number) => randomBytes(n / 2).toString('hex')

/** One upsert_batch of `n` calls, each started and ended. */
function batchOf(project: string, n: number) {
  const trace = hex(32)
  return Array.from({ length: n }, () => hex(16)).flatMap((id) => [
    {
      mode: 'start',
      req: {
        start: {
          project_id: project,
          id,
          trace_id: trace,
          op_name: 'load',
          started_at: new Date().toISOString(),
          attributes: {},
          inputs: { x: 'y'.repeat(300) },
        },
      },
    },
    { mode: 'end', req: { end: { project_id: project, id, ended_at: new Date().toISOString(), output: 1, summary: {} } } },
  ])
}

t.test('a start replaying a large log reports its progress; /ready says when the server is warm', async (t) => {
  const dataDir = tempDir()
  t.teardown(() => rm(dataDir, { recursive: true, force: true }))
  const project = 'acme/replay'
  const PER_BATCH = 100
  const ingest = async (url: string, headers: Record<string, string>, batches: number) => {
    let sent = 0
    const writer = async () => {
      while (sent < batches) {
        sent++
        const r = await fetch(url + '/call/upsert_batch', {
          method: 'POST',
          headers,
          body: JSON.stringify({ batch: batchOf(project, PER_BATCH) }),
        })
        if (r.status !== 200) throw new Error(`${r.status} ${await r.text()}`)
        await r.arrayBuffer()
      }
    }
    await Promise.all(Array.from({ length: 4 }, writer))
  }
  // First some segments (flushes every 2,000 parts), for the rollups to be rebuilt from at the last start.
  const flushed = await startServer({ dataDir, env: { WEFT_CALLS_FLUSH_ROWS: '2000' } })
  const FLUSHED = 100
  await ingest(flushed.url, { ...flushed.basic(), 'content-type': 'application/json' }, FLUSHED)
  // This one loads the built-in model: its load is reported too.
  const loads = (await requestJson(flushed, 'GET', '/admin/stats')).json.tasks.finished.filter(
    (x: any) => x.name === 'model load weft-tiny',
  )
  t.same(
    loads.map((x: any) => [x.state, x.warming]),
    [['done', true]],
    'the model load is reported',
  )
  await flushed.stop()
  // Then no flush before the kill: everything stays in the write-ahead log for the next start to replay.
  const env = { WEFT_CALLS_FLUSH_ROWS: '10000000', WEFT_CALLS_FLUSH_INTERVAL_MS: '3600000' }
  const first = await startServer({ dataDir, env, args: ['--model', 'none'] })
  const BATCHES = 240
  await ingest(first.url, { ...first.basic(), 'content-type': 'application/json' }, BATCHES)
  first.proc.kill('SIGKILL')
  await first.exited()
  // Without their file the rollups are rebuilt from the segments: the server listens meanwhile, warming up.
  await rm(path.join(dataDir, 'rollups'), { recursive: true, force: true })

  const s = await startServer({ dataDir, env: { ...env, WEFT_LOG_LEVEL: 'info', WEFT_PROGRESS_LOG_MS: '20' }, args: ['--model', 'none'] })
  t.teardown(() => s.stop())
  // Poll readiness from the moment it listens: 503 while something warms up (the rollups' first build), then 200.
  const seen: { status: number; body: any }[] = []
  const deadline = Date.now() + 60_000
  for (;;) {
    const r = await requestJson(s, 'GET', '/ready', undefined, {})
    seen.push({ status: r.status, body: r.json })
    if (r.status === 200 || Date.now() > deadline) break
    await new Promise((res) => setTimeout(res, 20))
  }
  const last = seen.at(-1)!
  t.equal(last.status, 200, 'ready in the end')
  t.same(last.body, { ready: true, warming: [] })
  const warming = seen.filter((x) => x.status === 503)
  t.ok(warming.length > 0, 'not ready while the rollups are rebuilt')
  t.ok(
    warming.some((w) => w.body.warming.some((x: any) => x.name === 'rollups warm-up')),
    'the rollups warm-up is what is warming',
  )
  for (const w of warming) {
    t.equal(w.body.ready, false)
    t.ok(w.body.warming.length > 0 && w.body.warming.every((x: any) => x.warming && x.state === 'running'), 'a 503 says what is warming')
  }
  t.comment(`readiness answers: ${seen.map((x) => x.status).join(' ')}`)
  const health = await requestJson(s, 'GET', '/health?ready=1', undefined, {})
  t.equal(health.status, 200)
  t.same(health.json, { ready: true, warming: [] })
  t.same((await requestJson(s, 'GET', '/health', undefined, {})).json, { status: 'ok' }, '/health stays liveness')

  const stats = await requestJson(s, 'GET', '/admin/stats')
  t.equal(stats.status, 200)
  const replay = stats.json.tasks.finished.find((x: any) => x.name === 'calls log replay')
  t.ok(replay, 'the replay is reported in /admin/stats')
  t.equal(replay.state, 'done')
  t.equal(replay.unit, 'records')
  t.ok(replay.total >= BATCHES, 'a log record per acknowledged batch not yet flushed')
  t.equal(replay.done, replay.total)
  t.equal(replay.percent, 100)
  t.ok(replay.warming)
  const names = [...stats.json.tasks.finished, ...stats.json.tasks.running].map((x: any) => x.name)
  t.ok(names.includes('rollups warm-up'), 'the rollups warm-up is reported')
  t.same(stats.json.warming, [])

  // The log: a line per few milliseconds here (WEFT_PROGRESS_LOG_MS), with percent done.
  const lines = s
    .output()
    .split('\n')
    .filter((l) => l.startsWith('{'))
    .map((l) => JSON.parse(l))
  const replayLines = lines.filter((l) => l.task === 'calls log replay')
  t.ok(
    replayLines.some((l) => /^calls log replay: finished 100\.0% \((\d+)\/\1 records\)/.test(l.msg)),
    'the finished line says 100% of the records',
  )
  const progressLines = replayLines.filter((l) => /: progress /.test(l.msg))
  t.comment(`${progressLines.length} progress lines: ${progressLines.map((l) => l.percent).join(', ')}`)
  t.ok(progressLines.length > 0, 'progress lines during the replay')
  for (const l of progressLines) t.match(l.msg, /progress \d+(\.\d)?% \(\d+\/\d+ records\), ETA [\d.]+ s/)

  // And the replay lost nothing.
  const count = await requestJson(s, 'POST', '/calls/query_stats', { project_id: project }, s.basic())
  t.equal(count.json.count, (FLUSHED + BATCHES) * PER_BATCH)
})
