import type { DuckDBValue } from '@duckdb/node-api'

/** Bound parameters of one statement: every user value goes here, never into SQL text. */
export class Params {
  readonly values: DuckDBValue[] = []
  add(v: DuckDBValue): string {
    this.values.push(v)
    return `$${this.values.length}`
  }
}
