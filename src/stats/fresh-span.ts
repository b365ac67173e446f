import type { CallSession, CallSource, IdSpan, TouchedSpec } from '../calls/source.js'
import { Params } from '../query/params.js'
import { FACT_COLUMNS } from './rollup-tables.js'

/**
 * The id span of the calls a correction or a catch-up merges (source.ts IdSpan, touchedSpan), read with `read` (the
 * store's reader for a request, the rollups' own connection in a catch-up), or null when no call has such a part.
 */
export async function readSpan(
  store: Pick<CallSource, 'touchedSpan'>,
  spec: TouchedSpec,
  read: (sql: string, params: Params) => Promise<unknown[][]>,
): Promise<IdSpan | null> {
  const params = new Params()
  const [lo, hi] = (await read(store.touchedSpan(spec, params), params))[0] ?? []
  return lo === null || lo === undefined ? null : [String(lo), String(hi)]
}

/**
 * A catch-up's or a flush's merge (Rollups.advance): the calls with parts in (from, to], merged as they are at `to`
 * (`merged_now`) and as they were at `from` (`merged_before`), in temporary tables of the caller's transaction `c`.
 */
export async function mergeTouched(store: Pick<CallSource, 'touchedSpan' | 'mergedSince'>, c: CallSession, from: number, to: number) {
  const span = await readSpan(store, { after: from, upTo: to }, (sql, q) => c.read(sql, q))
  for (const table of ['merged_now', 'merged_before'] as const) {
    // Each statement its own parameters (the merge's items bind the span).
    const p = new Params()
    const f = store.mergedSince({ after: from, upTo: to, span }, FACT_COLUMNS, p, 'mt')
    await c.run(
      `CREATE OR REPLACE TEMP TABLE ${table} AS WITH ${f.withs.join(', ')} SELECT * FROM ${table === 'merged_now' ? f.now : f.atMark}`,
      p,
    )
  }
}
