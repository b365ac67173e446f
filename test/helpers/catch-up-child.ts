/**
 * A process of its own for test/rollups-catch-up (it dies by SIGKILL, or runs with a failpoint armed from its
 * start): `node catch-up-child.js DIR crash|crash-more|gap|gap-crash`. Prints one JSON line of what it saw.
 */
import { openAnalytics } from '../../src/index.js'
import { catchUp } from '../../src/stats/rollups.js'
import { CATCH_UP_REQ, catchUpCalls, type Sent } from './catch-up-calls.js'

catchUp.minParts = 1
catchUp.minIntervalMs = 0
catchUp.share = 1
const [dir, mode] = process.argv.slice(2)

async function crash(): Promise<void> {
  const a = await openAnalytics(dir!, { flushIntervalMs: 0 })
  await a.ready()
  const sent = new Map<string, Sent>()
  // Half flushed, half in the tail; then a read sets off a catch-up on the tail, and the process dies after it.
  await a.store.ingest(catchUpCalls(sent, 0, 100))
  await a.store.flush()
  await a.store.ingest(catchUpCalls(sent, 100, 50))
  await a.store.ingest(catchUpCalls(sent, 150, 50))
  await a.stats.run(CATCH_UP_REQ)
  await a.rollups.caughtUp()
  // crash-more: parts past the catch-up too, as many as the first tail record holds and more.
  if (mode === 'crash-more') await a.store.ingest(catchUpCalls(sent, 200, 100))
  process.stdout.write(JSON.stringify({ x: a.rollups.x, flushed: a.store.flushedSeq, last: a.store.lastSeq }) + '\n', () =>
    process.kill(process.pid, 'SIGKILL'),
  )
}

async function gap(): Promise<void> {
  const a = await openAnalytics(dir!, { flushIntervalMs: 0 })
  await a.ready()
  const sent = new Map<string, Sent>()
  // The failpoint refuses the first append: its seqs are given and never logged.
  const refused = await a.store.ingest(catchUpCalls(new Map(), 500, 10)).then(
    () => false,
    () => true,
  )
  await a.store.ingest(catchUpCalls(sent, 0, 50))
  const stableBefore = a.store.stableSeq
  await a.stats.run(CATCH_UP_REQ)
  await a.rollups.caughtUp()
  const xBefore = a.rollups.x
  await a.store.flush()
  await a.store.ingest(catchUpCalls(sent, 50, 50))
  const stableAfter = a.store.stableSeq
  const answer = await a.stats.run(CATCH_UP_REQ)
  await a.rollups.caughtUp()
  const xAfter = a.rollups.x
  const again = await a.stats.run(CATCH_UP_REQ)
  const counted = (again.result.call_buckets as { count: number }[]).reduce((s, b) => s + b.count, 0)
  const answerMatches = JSON.stringify(again) === JSON.stringify(answer) && counted === sent.size
  process.stdout.write(JSON.stringify({ refused, stableBefore, xBefore, stableAfter, xAfter, last: a.store.lastSeq, answerMatches }) + '\n')
  await a.close()
}

/** A gap, parts after it, a read, more parts, and death: what a restart finds must be what was acknowledged. */
async function gapCrash(): Promise<void> {
  const a = await openAnalytics(dir!, { flushIntervalMs: 0 })
  await a.ready()
  const sent = new Map<string, Sent>()
  await a.store.ingest(catchUpCalls(new Map(), 500, 10)).catch(() => {})
  await a.store.ingest(catchUpCalls(sent, 0, 50))
  await a.stats.run(CATCH_UP_REQ)
  await a.rollups.caughtUp()
  await a.store.ingest(catchUpCalls(sent, 50, 50))
  process.stdout.write(JSON.stringify({ x: a.rollups.x, last: a.store.lastSeq }) + '\n', () => process.kill(process.pid, 'SIGKILL'))
}

await (mode === 'crash' || mode === 'crash-more' ? crash() : mode === 'gap' ? gap() : gapCrash())
