/**
 * Keeps the rollup tables still while a statistics request reads them in several statements (CallStats.gather):
 * DuckDB shows each statement the tables as committed when it starts, so a commit between two of them (a flush's
 * advance, seconds apart under ingest) would count the parts it moved twice or not at all. A commit waits for the
 * reads in flight (at most `maxWaitMs`: a slow read does not hold up the flushes behind it), and reads wait for a
 * commit in progress or waiting. A read a commit overtook says so (`consistent` false) and is read again.
 */
import { Durations } from '../core/durations.js'

export class CommitGate {
  /** Bumped before and after each commit: odd while one runs. */
  private epoch = 0
  private readers = 0
  /** A commit running, or waiting for the reads in flight. */
  private pending: Promise<void> | null = null
  private drained: (() => void) | null = null
  /** For /admin/stats: reads, reads a commit overtook, commits, commits that waited for reads, and of those, the ones that waited the whole bound. */
  private readonly counts = { reads: 0, overtaken: 0, commits: 0, waited: 0, waited_full: 0 }
  /** Time reads waited for a commit, and commits for the reads in flight (since start or the last reset). */
  readonly waits = { reads: new Durations(), commits: new Durations() }

  /** `maxWaitMs`: how long a commit waits for the reads in flight. */
  constructor(public maxWaitMs = 2_000) {}

  stats(): Record<keyof CommitGate['counts'], number> {
    return { ...this.counts }
  }

  /** Runs fn (a read in several statements) between commits. */
  async read<T>(fn: () => Promise<T>): Promise<{ value: T; consistent: boolean }> {
    if (this.pending) {
      const t0 = performance.now()
      while (this.pending) await this.pending
      this.waits.reads.add(performance.now() - t0)
    }
    const epoch = this.epoch
    this.readers++
    this.counts.reads++
    try {
      const value = await fn()
      if (this.epoch !== epoch) this.counts.overtaken++
      return { value, consistent: this.epoch === epoch }
    } finally {
      if (--this.readers === 0) this.drained?.()
    }
  }

  /** Runs fn (a COMMIT of the tables) once the reads in flight are done or have had maxWaitMs; new reads wait for it. */
  async commit(fn: () => Promise<void>): Promise<void> {
    while (this.pending) await this.pending
    let release!: () => void
    this.pending = new Promise<void>((r) => (release = r))
    this.counts.commits++
    try {
      if (this.readers > 0) {
        this.counts.waited++
        let timer: NodeJS.Timeout | undefined
        const full = await this.waits.commits.time(
          new Promise<boolean>((r) => {
            this.drained = () => r(false)
            timer = setTimeout(() => r(true), this.maxWaitMs)
          }),
        )
        clearTimeout(timer)
        this.drained = null
        if (full) this.counts.waited_full++
      }
      this.epoch++
      try {
        await fn()
      } finally {
        this.epoch++
      }
    } finally {
      this.pending = null
      release()
    }
  }
}
