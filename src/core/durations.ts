/**
 * How long one kind of step took, summed since start or the last reset: count, total and longest, in ms.
 * Cheap enough for every read; /admin/stats reports them so a slow read can be split into its waits.
 */
export class Durations {
  count = 0
  totalMs = 0
  maxMs = 0

  add(ms: number): void {
    this.count++
    this.totalMs += ms
    if (ms > this.maxMs) this.maxMs = ms
  }

  /** Times `p` (from now until it settles, either way). */
  async time<T>(p: Promise<T>): Promise<T> {
    const t0 = performance.now()
    try {
      return await p
    } finally {
      this.add(performance.now() - t0)
    }
  }

  reset(): void {
    this.count = this.totalMs = this.maxMs = 0
  }

  json(): { count: number; total_ms: number; max_ms: number } {
    return { count: this.count, total_ms: Math.round(this.totalMs), max_ms: Math.round(this.maxMs) }
  }
}
