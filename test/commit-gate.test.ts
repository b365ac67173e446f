import t from 'tap'
import { CommitGate } from '../src/stats/commit-gate.js'

// The rollup tables' commits and the statistics reads that take several statements (src/stats/commit-gate.ts):
// each read must see the tables of one commit. Real timers, no stand-ins: each case orders events and checks them.
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms))

t.test('a commit waits for the reads in flight, and a read started meanwhile waits for the commit', async (t) => {
  const gate = new CommitGate(5_000)
  const events: string[] = []
  const first = gate.read(async () => {
    events.push('read 1 starts')
    await sleep(80)
    events.push('read 1 ends')
  })
  await sleep(5)
  const commit = gate.commit(async () => {
    events.push('commit')
    await sleep(40)
    events.push('commit ends')
  })
  await sleep(5)
  const second = gate.read(async () => events.push('read 2'))
  const [a, , b] = await Promise.all([first, commit, second])
  t.same(events, ['read 1 starts', 'read 1 ends', 'commit', 'commit ends', 'read 2'])
  t.ok(a.consistent, 'the read the commit waited for saw one state')
  t.ok(b.consistent, 'the read after the commit saw one state')
})

t.test('a read longer than the wait is overtaken by the commit, and says so', async (t) => {
  const gate = new CommitGate(30)
  let committed = false
  const slow = gate.read(async () => {
    await sleep(150)
    return committed
  })
  await sleep(5)
  const t0 = performance.now()
  await gate.commit(async () => {
    committed = true
  })
  const waited = performance.now() - t0
  t.ok(waited >= 25 && waited < 140, `the commit waited its bound, not the read (${waited.toFixed(0)} ms)`)
  const r = await slow
  t.equal(r.value, true, 'the commit ran during the read')
  t.equal(r.consistent, false, 'the read knows it')
  t.ok((await gate.read(async () => 1)).consistent, 'a read after it is consistent')
})

t.test('commits run one at a time, and reads queued behind them all see one state each', async (t) => {
  const gate = new CommitGate(1_000)
  let state = 0
  let running = 0
  let most = 0
  const commits = Array.from({ length: 5 }, () =>
    gate.commit(async () => {
      most = Math.max(most, ++running)
      await sleep(10)
      // The tables change in two steps inside a commit: a read between them would see half of it.
      state++
      await sleep(5)
      state++
      running--
    }),
  )
  const reads = Array.from({ length: 20 }, (_, i) =>
    sleep(i * 4).then(() =>
      gate.read(async () => {
        const before = state
        await sleep(3)
        return before === state && state % 2 === 0
      }),
    ),
  )
  const results = await Promise.all(reads)
  await Promise.all(commits)
  t.equal(most, 1, 'never two commits at once')
  t.equal(state, 10)
  t.ok(
    results.every((r) => r.value && r.consistent),
    'no read saw a commit half done or a change during it',
  )
})
