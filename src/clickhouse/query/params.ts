/**
 * Bound parameters of one ClickHouse statement: each value is named in the SQL as `{pN:Type}` and
 * sent apart from it (HTTP `param_pN`, chdb's binding). The types are ours, never a user's.
 */
export class ChParams {
  readonly values: Record<string, unknown> = {}
  private n = 0

  add(value: unknown, type: string): string {
    const name = `p${++this.n}`
    this.values[name] = value
    return `{${name}:${type}}`
  }

  /** A copy to go on from: statements that share conditions built once (their placeholders) each add their own values. */
  clone(): ChParams {
    const c = new ChParams()
    Object.assign(c.values, this.values)
    c.n = this.n
    return c
  }
}
