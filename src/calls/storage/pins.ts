import fs from 'node:fs/promises'

/**
 * Segment files a running read holds (the reader pool reads Parquet files outside the store's own
 * DuckDB, so replacing the view does not keep them): a compaction retires the files it replaced,
 * and a retired file is removed only once no read holds it, and not before `delayMs` have passed
 * (reads on the store's own database bound the old view without pinning).
 */
export class SegmentPins {
  private readonly held = new Map<string, number>()
  /** Retired files still held by a read; removed at their last release. */
  private readonly retired = new Set<string>()

  constructor(private readonly delayMs: number) {}

  /** Holds these files until the returned release is called (once; later calls do nothing). */
  pin(files: readonly string[]): () => void {
    for (const f of files) this.held.set(f, (this.held.get(f) ?? 0) + 1)
    let done = false
    return () => {
      if (done) return
      done = true
      for (const f of files) {
        const n = this.held.get(f)! - 1
        if (n > 0) this.held.set(f, n)
        else {
          this.held.delete(f)
          if (this.retired.delete(f)) void remove(f)
        }
      }
    }
  }

  /** How many reads hold a file (tests and /admin/stats). */
  holders(file: string): number {
    return this.held.get(file) ?? 0
  }

  /** Removes these files once the delay has passed and no read holds them. */
  retire(files: readonly string[]): void {
    const later = () => {
      for (const f of files) {
        if (this.held.has(f)) this.retired.add(f)
        else void remove(f)
      }
    }
    if (this.delayMs <= 0) later()
    else setTimeout(later, this.delayMs).unref()
  }
}

const remove = (f: string) => fs.rm(f, { force: true }).catch(() => {})
