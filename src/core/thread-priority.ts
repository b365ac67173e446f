import fs from 'node:fs'
import os from 'node:os'

/**
 * The event loop's claim on the CPU. Every request, acknowledgement and stream goes through the main thread,
 * and on a small machine it competes with some 75 threads of the same process (ingest and model workers,
 * DuckDB's, libuv's and V8's) and with whatever else runs there. Under sustained ingest on 2 cores (a load
 * generator beside the server) the main thread waited 445-565 ms of every second for a core (its
 * schedstat run delay), and 84-94 of 151 seconds had an event-loop delay p99 of 20 ms or more; with the
 * other threads at nice 5 none of the seconds outside a compaction did (bench/README, 2026-12-07).
 *
 * Raising the main thread's priority needs privileges, so the other threads are lowered instead: Linux
 * keeps a nice value per thread, and a process may raise the nice value of its own threads (not lower it).
 * A thread inherits its creator's value, so a sweep every few seconds catches the threads started since
 * (workers that Piscina starts again after an idle spell run at the normal priority until then). The
 * server's command turns it on (`--background-nice`, 0: off); an embedder's process is left as it is.
 */
export interface BackgroundPriorityState {
  /** The nice value given to the process's threads other than the main thread (0: off). */
  nice: number
  /** Threads given it so far. */
  lowered: number
}

const state: BackgroundPriorityState = { nice: 0, lowered: 0 }
let timer: NodeJS.Timeout | undefined
const seen = new Set<number>()

/** What the sweeps have done (for /admin/stats). */
export function backgroundPriority(): Readonly<BackgroundPriorityState> {
  return state
}

/**
 * Lowers the priority of the process's other threads to `nice` now and every `everyMs`. A no-op where threads have
 * no priority of their own (other systems than Linux) and for nice 0.
 */
export function lowerBackgroundThreads(nice: number, everyMs = 2_000): void {
  if (process.platform !== 'linux' || nice <= 0) return
  state.nice = Math.min(19, Math.floor(nice))
  sweep()
  timer ??= setInterval(sweep, everyMs).unref()
}

function sweep(): void {
  let tids: number[]
  try {
    tids = fs.readdirSync('/proc/self/task').map(Number)
  } catch {
    return
  }
  const live = new Set(tids)
  for (const tid of seen) if (!live.has(tid)) seen.delete(tid)
  for (const tid of tids) {
    // The main thread's id is the process's.
    if (tid === process.pid || seen.has(tid)) continue
    seen.add(tid)
    try {
      // Only ever lowered: a thread someone set lower still stays as it is.
      if (os.getPriority(tid) < state.nice) {
        os.setPriority(tid, state.nice)
        state.lowered++
      }
    } catch {
      // Gone meanwhile.
    }
  }
}
