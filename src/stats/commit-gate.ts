/**
 * Keeps the rollup tables still while a statistics request reads them in several statements (CallStats.gather):
 * DuckDB shows each statement the tables as committed when it starts, so a commit between two of them (a flush's
 * advance, seconds apart under ingest) would count the parts it moved twice or not at all. A commit waits for the
 * reads in flight (at most `maxWaitMs`: a slow read does not hold up the flushes behind it), and reads wait for a
 * commit in progress or waiting. A read a commit overtook says so (`consistent` false) and is read again.
 */
export class CommitGate {
  /** Bumped before and after each commit: odd while one runs. */
  private epoch = 0
  private readers = 0
  /** A commit running, or waiting for the reads in flight. */
  private pending: Promise<void> | null = null
  private drained: (() => void) | null = null

  constructor(private readonly maxWaitMs = 2_000) {}

  /** Runs fn (a read in several statements) between commits. */
  async read<T>(fn: () => Promise<T>): Promise<{ value: T; consistent: boolean }> {
    while (this.pending) await this.pending
    const epoch = this.epoch
    this.readers++
    try {
      const value = await fn()
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
    try {
      if (this.readers > 0) {
        let timer: NodeJS.Timeout | undefined
        await new Promise<void>((r) => {
          this.drained = r
          timer = setTimeout(r, this.maxWaitMs)
        })
        clearTimeout(timer)
        this.drained = null
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
