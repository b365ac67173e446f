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
}
