/** A progress bar on stderr when it is a terminal; nothing otherwise (logs and CI stay clean). */
export class ProgressBar {
  private done = 0
  private failed = 0
  private readonly tty = process.stderr.isTTY === true
  constructor(
    private readonly total: number,
    private readonly label: string,
  ) {}

  tick(ok: boolean): void {
    this.done++
    if (!ok) this.failed++
    if (!this.tty) return
    const width = 30
    const filled = Math.round((this.done / this.total) * width)
    const fail = this.failed ? `, ${this.failed} failed` : ''
    process.stderr.write(`\r${this.label} [${'#'.repeat(filled)}${'.'.repeat(width - filled)}] ${this.done}/${this.total}${fail}`)
    if (this.done === this.total) process.stderr.write('\n')
  }
}
