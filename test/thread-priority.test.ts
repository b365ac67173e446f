import t from 'tap'
import { readdirSync, readFileSync } from 'node:fs'
import { requestJson, runCli, startServer } from './helpers/server.js'

// `weft serve` lowers its threads other than the event loop's (--background-nice, default 10) so that the loop gets a
// core first on a loaded machine (src/core/thread-priority.ts). Read back from the kernel: each thread's nice value is
// field 19 of /proc/PID/task/TID/stat (after the command name, which is in parentheses and may hold spaces).

const nice = (pid: number, tid: string) => Number(readFileSync(`/proc/${pid}/task/${tid}/stat`, 'utf8').split(') ')[1]!.split(' ')[16])

function niceValues(pid: number): { main: number; others: number[] } {
  const tids = readdirSync(`/proc/${pid}/task`)
  return { main: nice(pid, String(pid)), others: tids.filter((x) => x !== String(pid)).map((x) => nice(pid, x)) }
}

/** Waits past a sweep (every 2 s) after the server's workers have started. */
const settle = () => new Promise((r) => setTimeout(r, 2_500))

t.test('the server runs its other threads at nice 10 and the event loop at 0', { skip: process.platform !== 'linux' }, async (t) => {
  const s = await startServer({ args: ['--model', 'none'] })
  t.teardown(() => s.stop())
  await settle()
  const v = niceValues(s.proc.pid!)
  t.equal(v.main, 0, 'the main thread keeps its priority')
  t.ok(v.others.length > 10, `${v.others.length} other threads`)
  t.same([...new Set(v.others)], [10], 'every other thread at nice 10')
  const stats = (await requestJson(s, 'GET', '/admin/stats')).json
  t.equal(stats.background_priority.nice, 10, '/admin/stats says so')
  // Threads started by a thread already lowered inherit its value and are not counted.
  const lowered = stats.background_priority.lowered
  t.ok(lowered > v.others.length / 2 && lowered <= v.others.length + 8, `and counts the threads it lowered (${lowered})`)
})

t.test('--background-nice 0 leaves every thread as it was; 5 lowers them to 5', { skip: process.platform !== 'linux' }, async (t) => {
  const off = await startServer({ args: ['--model', 'none', '--background-nice', '0'] })
  t.teardown(() => off.stop())
  const five = await startServer({ args: ['--model', 'none'], env: { WEFT_BACKGROUND_NICE: '5' } })
  t.teardown(() => five.stop())
  await settle()
  const a = niceValues(off.proc.pid!)
  t.same([...new Set([a.main, ...a.others])], [0], 'off: all at 0')
  t.equal((await requestJson(off, 'GET', '/admin/stats')).json.background_priority.nice, 0)
  const b = niceValues(five.proc.pid!)
  t.equal(b.main, 0)
  t.same([...new Set(b.others)], [5], 'the variable: all others at 5')
})

t.test('a value outside 0-19 is refused at start', async (t) => {
  for (const v of ['20', '-1', 'x']) {
    const r = await runCli(['serve', '--port', '0', '--background-nice', v])
    t.not(r.code, 0, `--background-nice ${v} exits with an error`)
    t.match(r.stderr + r.stdout, /background-nice/, 'naming the flag')
  }
})
