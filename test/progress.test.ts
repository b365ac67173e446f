import t from 'tap'
import { Writable } from 'node:stream'
import pino from 'pino'
import { Progress, eta } from '../src/core/progress.js'

/** A registry on a clock the test moves, logging into an array. */
function setup(everyMs = 5_000) {
  let now = 1_000_000
  const lines: Record<string, any>[] = []
  const sink = new Writable({
    write(chunk, _enc, cb) {
      for (const l of String(chunk).split('\n').filter(Boolean)) lines.push(JSON.parse(l))
      cb()
    },
  })
  const p = new Progress(() => now, everyMs, pino({ level: 'info' }, sink))
  return { p, lines, tick: (ms: number) => (now += ms) }
}

t.test('a progress line at most every interval, however often the task updates', async (t) => {
  const { p, lines, tick } = setup(5_000)
  const task = p.start('replay', { total: 10_000, unit: 'records', warming: true })
  // 20 s of updates every 10 ms: 2,000 updates.
  for (let i = 1; i <= 2_000; i++) {
    tick(10)
    task.update(i * 5)
  }
  task.finish()
  await new Promise((r) => setImmediate(r))
  const progressLines = lines.filter((l) => / progress /.test(l.msg) || /: progress/.test(l.msg))
  t.equal(progressLines.length, 4, 'one line per 5 s over 20 s')
  t.match(lines[0]!.msg, /replay: started/)
  t.match(lines.at(-1)!.msg, /replay: finished 100\.0% \(10000\/10000 records\), 20 s/)
  // Each progress line: percent and an ETA from the rate so far (5 s: 2,500 of 10,000 done → 15 s left).
  t.equal(progressLines[0]!.percent, 25)
  t.equal(progressLines[0]!.eta_s, 15)
  t.match(progressLines[0]!.msg, /25\.0% \(2500\/10000 records\), ETA 15 s/)
  t.equal(progressLines[1]!.percent, 50)
  t.equal(progressLines[1]!.eta_s, 10)
})

t.test('state: running, warming, finished and failed tasks', async (t) => {
  const { p, tick } = setup()
  const a = p.start('a', { total: 4, unit: 'ranges', warming: true })
  const b = p.start('b')
  tick(2_000)
  a.update(1)
  t.same(
    p.warming().map((x) => x.name),
    ['a'],
  )
  const s = p.tasks().find((x) => x.name === 'a')!
  t.equal(s.percent, 25)
  t.equal(s.eta_s, 6, '2 s for a quarter: 6 s for the rest')
  t.equal(s.elapsed_s, 2)
  t.equal(p.tasks().find((x) => x.name === 'b')!.percent, null, 'unknown total: no percent')
  t.equal(p.tasks().find((x) => x.name === 'b')!.eta_s, null)
  a.finish()
  await t.rejects(
    b.run(async () => {
      throw new Error('disk full')
    }),
  )
  t.same(p.warming(), [])
  t.same(p.tasks(), [])
  const done = p.finishedTasks()
  t.same(
    done.map((x) => [x.name, x.state, x.done, x.error]),
    [
      ['a', 'done', 4, undefined],
      ['b', 'failed', 0, 'disk full'],
    ],
  )
})

t.test('eta', async (t) => {
  t.equal(eta(10, 0, 100), null, 'nothing done yet')
  t.equal(eta(10, 50, null), null, 'unknown total')
  t.equal(eta(10, 25, 100), 30)
  t.equal(eta(10, 100, 100), 0)
})
