import { compareRows, type Key, type KeyOrder } from './keys.js'

/** A run of answer rows in order: their payload (an Arrow batch, a page of calls) and their sort keys, a column array each. */
export interface Run<P> {
  rows: number
  keys: Key[][]
  payload: P
}

/** How to cut a payload: rows [from, to). */
export type Slice<P> = (p: P, from: number, to: number) => P

/** The first row of `run` at or after `from` that sorts after row j of `other` (binary search: runs are sorted). */
function firstAfter<P>(orders: readonly KeyOrder[], run: Run<P>, from: number, other: Run<P>, j: number): number {
  let lo = from
  let hi = run.rows
  while (lo < hi) {
    const mid = (lo + hi) >> 1
    if (compareRows(orders, run.keys, mid, other.keys, j) <= 0) lo = mid + 1
    else hi = mid
  }
  return lo
}

/** A cursor over a stream of runs, skipping empty ones. */
class Cursor<P> {
  run: Run<P> | null = null
  at = 0
  constructor(private readonly it: AsyncIterator<Run<P>>) {}
  async advance(): Promise<void> {
    this.at = 0
    for (let r = await this.it.next(); ; r = await this.it.next()) {
      if (r.done) return void (this.run = null)
      if (r.value.rows > 0) return void (this.run = r.value)
    }
  }
}

/**
 * Two sorted streams of runs (the pool's segments and the tail's calls; no call is in both) as one
 * sorted stream of payloads, cut where they interleave. Rows are compared only at the cuts (a
 * binary search per cut), so a stream that does not interleave passes through whole. With no sort
 * keys the answer has no order: the first stream, then the second.
 */
export async function* mergeRuns<P>(
  orders: readonly KeyOrder[],
  a: AsyncIterable<Run<P>>,
  b: AsyncIterable<Run<P>>,
  slice: Slice<P>,
): AsyncGenerator<P> {
  const x = new Cursor(a[Symbol.asyncIterator]())
  const y = new Cursor(b[Symbol.asyncIterator]())
  await x.advance()
  await y.advance()
  while (orders.length && x.run && y.run) {
    // The rows of one side up to the other's next row go out together; one side's head is always the lesser.
    const [from, to] = compareRows(orders, x.run.keys, x.at, y.run.keys, y.at) <= 0 ? [x, y] : [y, x]
    const end = firstAfter(orders, from.run!, from.at, to.run!, to.at)
    yield whole(from, end, slice)
    if (end === from.run!.rows) await from.advance()
    else from.at = end
  }
  for (const c of [x, y]) {
    while (c.run) {
      yield whole(c, c.run.rows, slice)
      await c.advance()
    }
  }
}

/** Rows [at, end) of the cursor's run: the payload itself when that is all of it. */
function whole<P>(c: Cursor<P>, end: number, slice: Slice<P>): P {
  const r = c.run!
  return c.at === 0 && end === r.rows ? r.payload : slice(r.payload, c.at, end)
}

/** Leaves out the first `offset` rows and stops after `limit` (the sides each read offset + limit). */
export async function* window<P>(
  payloads: AsyncIterable<P>,
  rows: (p: P) => number,
  slice: Slice<P>,
  offset: number,
  limit: number | null,
): AsyncGenerator<P> {
  let skip = offset
  let left = limit ?? Infinity
  for await (const p of payloads) {
    if (left <= 0) return
    const n = rows(p)
    if (skip >= n) {
      skip -= n
      continue
    }
    const to = Math.min(n, skip + left)
    yield skip === 0 && to === n ? p : slice(p, skip, to)
    left -= to - skip
    skip = 0
  }
}
