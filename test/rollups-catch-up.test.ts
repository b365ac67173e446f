import t, { type Test } from 'tap'
import { spawn } from 'node:child_process'
import { readdir, readFile, rm, writeFile } from 'node:fs/promises'
import path from 'node:path'
import { fileURLToPath } from 'node:url'
import { tempDir } from './helpers/server.js'
import { openAnalytics } from '../src/index.js'
import { catchUp, rollupCheckpoint } from '../src/stats/rollups.js'
import { CATCH_UP_PROJECT as P, CATCH_UP_REQ as req, catchUpCalls, catchUpId, endOf, type Sent } from './helpers/catch-up-calls.js'

// Reads have the rollups catch up on the tail (src/stats/rollups.ts, wanted): `x` moves into the tail, so the
// correction a read adds covers only the parts since. Here every read with a part past `x` sets one off.
catchUp.minParts = 1
catchUp.minIntervalMs = 0
catchUp.share = 1

const DAY = 86_400_000
const day0 = Date.parse(req.start!)

/** Per day: calls, their latency count and sum, computed here from what was sent (live calls with a start). */
function expected(sent: Map<string, Sent>) {
  return [0, 1].map((d) => {
    const cs = [...sent.values()].filter((c) => !c.deleted && c.started >= day0 + d * DAY && c.started < day0 + (d + 1) * DAY)
    const lat = cs.filter((c) => c.ended !== null).map((c) => c.ended! - c.started)
    return { count: cs.length, sum_latency_ms: lat.reduce((a, b) => a + b, 0), count_latency_ms: lat.length, sum_call_count: cs.length }
  })
}

function check(t: Test, got: Record<string, unknown>, sent: Map<string, Sent>, label: string) {
  const buckets = got.call_buckets as Record<string, unknown>[]
  const want = expected(sent)
  t.same(
    buckets.map((b) => ({
      count: b.count,
      sum_latency_ms: b.sum_latency_ms,
      count_latency_ms: b.count_latency_ms,
      sum_call_count: b.sum_call_count,
    })),
    want,
    `${label}: counts and latency sums per day as sent`,
  )
}

t.test('the rollups catch up on the tail; answers stay exact through later parts, deletes, flushes and compactions', async (t) => {
  const dir = tempDir()
  t.teardown(() => rm(dir, { recursive: true, force: true }))
  const a = await openAnalytics(dir, { flushIntervalMs: 0 })
  t.teardown(() => a.close())
  await a.ready()
  const sent = new Map<string, Sent>()
  await a.store.ingest(catchUpCalls(sent, 0, 120))
  const first = await a.stats.run(req)
  t.equal(first.path, 'rollup')
  check(t, first.result, sent, 'the tail corrected for')
  await a.rollups.caughtUp()
  t.equal(a.rollups.x, a.store.lastSeq, 'the read had the rollups catch up on every part')
  t.equal(a.store.flushedSeq, 0, 'nothing was flushed: x lies in the tail')
  t.equal(a.rollups.catchUps.count, 1)
  const caught = await a.stats.run(req)
  t.same(caught, first, 'the same answer from the tables alone')

  // Calls started before `x` and ended after it (their state at x is subtracted), deleted ones, and new ones.
  const later = catchUpCalls(sent, 120, 40)
  for (let k = 0; k < 30; k++) {
    const c = sent.get(catchUpId(k))!
    c.ended = c.started + 50_000 + k
    later.push(endOf(c.id, c.ended, k))
  }
  for (let k = 30; k < 36; k++) {
    sent.get(catchUpId(k))!.deleted = true
    later.push({ kind: 'delete', project_id: P, id: catchUpId(k), deleted_us: String(BigInt(Date.now()) * 1000n) })
  }
  await a.store.ingest(later)
  check(t, (await a.stats.run(req)).result, sent, 'later parts corrected for past x')
  await a.rollups.caughtUp()
  t.equal(a.rollups.x, a.store.lastSeq, 'caught up again')
  check(t, (await a.stats.run(req)).result, sent, 'after the second catch-up')
  await a.store.flush()
  check(t, (await a.stats.run(req)).result, sent, 'after a flush (x was past it already)')
  await a.store.ingest(catchUpCalls(sent, 160, 20))
  await a.stats.run(req)
  await a.rollups.caughtUp()
  await a.store.compact()
  t.equal(a.rollups.origin, 'rebuilt', 'a compaction kept the tables (no rebuild)')
  check(t, (await a.stats.run(req)).result, sent, 'after a compaction')
  t.equal(await a.stats.count(P, null), [...sent.values()].filter((c) => !c.deleted).length, 'the count of live calls')

  // Catch-ups take at most `share` of the time: after one, the next waits (1 / share - 1) times as long.
  catchUp.share = 0.0001
  await a.store.ingest(catchUpCalls(sent, 200, 10))
  await a.stats.run(req)
  await a.rollups.caughtUp()
  const x = a.rollups.x
  t.equal(x, a.store.lastSeq, 'a catch-up ran (the one before asked for no wait)')
  await a.store.ingest(catchUpCalls(sent, 210, 10))
  check(t, (await a.stats.run(req)).result, sent, 'corrected for while the next catch-up waits')
  await a.rollups.caughtUp()
  t.equal(a.rollups.x, x, 'no catch-up within ~10,000 times the last one')
  t.equal(a.rollups.catchUps.count, 4)
  catchUp.share = 1
})

const here = path.dirname(fileURLToPath(import.meta.url))

/** Runs test/helpers/catch-up-child in a process of its own; its last line of output, parsed. */
function child(dir: string, mode: string, env: Record<string, string> = {}): Promise<Record<string, unknown>> {
  return new Promise((resolve, reject) => {
    const p = spawn(process.execPath, [path.join(here, 'helpers', 'catch-up-child.js'), dir, mode], {
      env: { ...process.env, ...env },
      stdio: ['ignore', 'pipe', 'inherit'],
    })
    let out = ''
    p.stdout.on('data', (d) => (out += d))
    p.on('exit', (code, signal) => {
      const last = out.trim().split('\n').pop() ?? ''
      try {
        resolve({ ...JSON.parse(last), code, signal })
      } catch {
        reject(new Error(`child ${mode} exited ${code ?? signal} with ${JSON.stringify(out)}`))
      }
    })
  })
}

t.test('SIGKILL after a catch-up into the tail: the restart loads the tables (no rebuild) and answers as sent', async (t) => {
  const dir = tempDir()
  t.teardown(() => rm(dir, { recursive: true, force: true }))
  const died = await child(dir, 'crash')
  t.equal(died.signal, 'SIGKILL', 'the child was killed after its catch-up committed')
  t.ok(Number(died.x) > Number(died.flushed), `x (${died.x}) lay in the tail (flushed up to ${died.flushed})`)
  const a = await openAnalytics(dir, { flushIntervalMs: 0 })
  t.teardown(() => a.close())
  await a.ready()
  t.equal(a.rollups.origin, 'loaded', 'the tables were loaded: the replayed tail has the seqs they cover')
  t.equal(a.rollups.x, Number(died.x))
  const sent = new Map<string, Sent>()
  catchUpCalls(sent, 0, 200)
  check(t, (await a.stats.run(req)).result, sent, 'after the restart')
})

t.test('a log record set aside at the restart (a flipped bit): tables covering the tail are rebuilt, not loaded', async (t) => {
  const dir = tempDir()
  t.teardown(() => rm(dir, { recursive: true, force: true }))
  const died = await child(dir, 'crash-more')
  t.ok(Number(died.x) > Number(died.flushed), 'x lay in the tail')
  // The tail's log holds three records (the child's last three batches): a bit flipped inside the first. The replay
  // then numbers the other two from where it began, past x again: only the quarantine says the tables do not match.
  const calls = path.join(dir, 'calls')
  const logs = (await readdir(calls)).filter((f) => /^wal-\d{6}\.log$/.test(f)).sort()
  const log = path.join(calls, logs[logs.length - 1]!)
  const data = await readFile(log)
  data[64]! ^= 0x20
  await writeFile(log, data)
  const a = await openAnalytics(dir, { flushIntervalMs: 0 })
  t.teardown(() => a.close())
  await a.ready()
  t.equal(a.store.replayQuarantined, 1, 'the damaged record was set aside')
  t.equal(a.rollups.origin, 'rebuilt', 'the tables were rebuilt rather than loaded')
  const answer = await a.stats.run(req)
  const counted = (answer.result.call_buckets as { count: number }[]).reduce((s, b) => s + b.count, 0)
  t.equal(counted, await a.stats.count(P, null), 'statistics count what the store holds')
  t.equal(counted, await a.store.count(P, {}), 'as its merged calls')
  t.equal(counted, 250, 'the 50 calls of the damaged record are gone from both')
  const sent = new Map<string, Sent>()
  catchUpCalls(sent, 0, 300)
  for (let k = 100; k < 150; k++) sent.delete(catchUpId(k))
  check(t, answer.result, sent, 'the calls left, as sent')
})

t.test('a failed log append leaves a gap a replay would close: no catch-up past it until a flush takes it', async (t) => {
  const dir = tempDir()
  t.teardown(() => rm(dir, { recursive: true, force: true }))
  const seen = await child(dir, 'gap', { WEFT_FAILPOINTS: 'wal.append:enospc*1' })
  t.equal(seen.code, 0)
  t.equal(seen.refused, true, 'the first append failed')
  t.equal(seen.stableBefore, null, 'no stable seq while the gap lies past the flushed seq')
  t.equal(seen.xBefore, 0, 'so the read set off no catch-up')
  t.ok(Number(seen.stableAfter) > 0, 'a flush took the parts after the gap: stable again')
  t.equal(seen.xAfter, seen.last, 'and the next read caught up')
  t.equal(seen.answerMatches, true, 'the answer is the one computed from what was acknowledged')
})

t.test('SIGKILL after a gap: the restart counts every acknowledged call (x never passed the gap)', async (t) => {
  const dir = tempDir()
  t.teardown(() => rm(dir, { recursive: true, force: true }))
  const died = await child(dir, 'gap-crash', { WEFT_FAILPOINTS: 'wal.append:enospc*1' })
  t.equal(died.signal, 'SIGKILL')
  t.equal(died.x, 0, 'no catch-up past the gap')
  const a = await openAnalytics(dir, { flushIntervalMs: 0 })
  t.teardown(() => a.close())
  await a.ready()
  const sent = new Map<string, Sent>()
  catchUpCalls(sent, 0, 100)
  check(t, (await a.stats.run(req)).result, sent, 'after the restart')
})

t.test('an advance is timed step by step (merges, inserts, commit) for /admin/stats', async (t) => {
  const dir = tempDir()
  t.teardown(() => rm(dir, { recursive: true, force: true }))
  const a = await openAnalytics(dir, { flushIntervalMs: 0 })
  t.teardown(() => a.close())
  await a.ready()
  const before = Object.fromEntries(Object.entries(a.rollups.timings).map(([k, d]) => [k, d.count]))
  await a.store.ingest(catchUpCalls(new Map(), 0, 200))
  await a.store.flush()
  const after = Object.fromEntries(Object.entries(a.rollups.timings).map(([k, d]) => [k, d.count]))
  t.equal(after.merges! - before.merges!, 1, "the flush's advance merged once")
  t.equal(after.inserts! - before.inserts!, 1, 'and added its rows once')
  t.ok(after.commits! - before.commits! >= 1, 'and committed')
})

t.test("the rollups' file is checkpointed once its log passes a bound, so their changes do not pile up in memory", async (t) => {
  const dir = tempDir()
  t.teardown(() => rm(dir, { recursive: true, force: true }))
  const bound = rollupCheckpoint.logBytes
  t.teardown(() => (rollupCheckpoint.logBytes = bound))
  rollupCheckpoint.logBytes = 1
  const a = await openAnalytics(dir, { flushIntervalMs: 0 })
  t.teardown(() => a.close())
  await a.ready()
  const before = a.rollups.timings.checkpoints.count
  await a.store.ingest(catchUpCalls(new Map(), 0, 500))
  await a.store.flush()
  t.ok(a.rollups.timings.checkpoints.count > before, 'the flush advance checkpointed')
  const wal = await readFile(path.join(dir, 'rollups', 'rollups.duckdb.wal')).catch(() => Buffer.alloc(0))
  t.ok(wal.length <= 1, `the log is empty after it (${wal.length} bytes)`)
})
