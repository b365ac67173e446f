/**
 * The stats bench's answer checks: weft's answers against the peers' of the same request. Sums and
 * counts must be equal; latency percentiles within the sketch's stated error (1% of the exact
 * interpolated value, see docs/statistics.md) of DuckDB's exact `quantile_cont` (ClickHouse's
 * `quantiles` samples, so only its sums and counts are compared). Each check returns what differs.
 */

/** One peer's bucketed answer: per bucket start (ms), calls and errors and percentiles; per bucket and model, token sums. */
export interface Bucketed {
  calls: Map<number, { n: number; e: number; p?: (number | null)[] }>
  usage: Map<string, { i: number; o: number; t: number }>
}

const PCTS = [50, 95, 99]
/** The sketch's bins are 0.95% wide; the interpolation adds a little: 1% and half a millisecond. */
const within = (got: number, want: number) => Math.abs(got - want) <= 0.01 * Math.abs(want) + 0.5
const num = (x: unknown) => (x === null || x === undefined ? 0 : Number(x))
const ms = (x: unknown) =>
  x instanceof Date ? x.getTime() : typeof x === 'string' ? Date.parse(x.includes('T') ? x : x.replace(' ', 'T') + 'Z') : Number(x)
/** A bucket's start on the peers' grid (weft's first bucket of a range starting mid-bucket is that partial bucket). */
const floorTo = (t: number, g: number) => Math.floor(t / (g * 1000)) * g * 1000

/** weft's /calls/stats answer in the peers' shape. */
export function weftBucketed(json: Record<string, unknown>, g: number): Bucketed {
  const out: Bucketed = { calls: new Map(), usage: new Map() }
  for (const b of json.call_buckets as Record<string, unknown>[])
    out.calls.set(floorTo(ms(b.timestamp), g), {
      n: num(b.sum_call_count),
      e: num(b.sum_error_count),
      p: PCTS.map((p) => (b[`p${p}_latency_ms`] === null ? null : num(b[`p${p}_latency_ms`]))),
    })
  for (const b of json.usage_buckets as Record<string, unknown>[])
    out.usage.set(`${new Date(floorTo(ms(b.timestamp), g)).toISOString()} ${b.model}`, {
      i: num(b.sum_input_tokens),
      o: num(b.sum_output_tokens),
      t: num(b.sum_total_tokens),
    })
  return out
}

/** Rows of (bucket, n, errors[, percentiles]) and (bucket, model, input, output, total), as the peers' queries return them. */
export function peerBucketed(calls: unknown[][], usage: unknown[][]): Bucketed {
  const out: Bucketed = { calls: new Map(), usage: new Map() }
  for (const [b, n, e, p] of calls)
    out.calls.set(ms(b), { n: num(n), e: num(e), p: Array.isArray(p) ? p.map((x) => (x === null ? null : num(x))) : undefined })
  for (const [b, model, i, o, t] of usage) out.usage.set(`${new Date(ms(b)).toISOString()} ${model}`, { i: num(i), o: num(o), t: num(t) })
  return out
}

/** What differs between weft's bucketed answer and a peer's (buckets weft has and the peer lacks must be empty). */
export function compareBucketed(weft: Bucketed, peer: Bucketed): string[] {
  const bad: string[] = []
  for (const [b, w] of weft.calls) {
    const p = peer.calls.get(b) ?? { n: 0, e: 0, p: PCTS.map(() => null) }
    const at = new Date(b).toISOString()
    if (w.n !== p.n || w.e !== p.e) bad.push(`${at}: calls ${w.n}/${p.n}, errors ${w.e}/${p.e}`)
    p.p?.forEach((want, k) => {
      const got = w.p?.[k] ?? null
      if ((want === null) !== (got === null) || (want !== null && got !== null && !within(got, want)))
        bad.push(`${at}: p${PCTS[k]} ${got} vs ${want}`)
    })
  }
  for (const b of peer.calls.keys()) if (!weft.calls.has(b)) bad.push(`${new Date(b).toISOString()}: missing from weft`)
  for (const [k, w] of weft.usage) {
    const p = peer.usage.get(k) ?? { i: 0, o: 0, t: 0 }
    if (w.i !== p.i || w.o !== p.o || w.t !== p.t) bad.push(`${k}: tokens ${[w.i, w.o, w.t]} vs ${[p.i, p.o, p.t]}`)
  }
  for (const k of peer.usage.keys()) if (!weft.usage.has(k)) bad.push(`${k}: usage missing from weft`)
  return bad
}

/** weft's /calls/usage answer against rows of (root id, model, prompt, completion). */
export function compareUsage100(json: Record<string, unknown>, rows: unknown[][]): string[] {
  const weft = json.call_usage as Record<string, Record<string, Record<string, unknown>>>
  const bad: string[] = []
  const seen = new Set<string>()
  for (const [id, model, p, c] of rows) {
    const w = weft[String(id)]?.[String(model)]
    seen.add(`${id} ${model}`)
    if (!w || num(w.prompt_tokens) !== num(p) || num(w.completion_tokens) !== num(c))
      bad.push(`${id} ${model}: ${w ? [w.prompt_tokens, w.completion_tokens] : 'missing'} vs ${[p, c]}`)
  }
  for (const [id, models] of Object.entries(weft))
    for (const [model, u] of Object.entries(models))
      if (!seen.has(`${id} ${model}`) && (num(u.prompt_tokens) || num(u.completion_tokens))) bad.push(`${id} ${model}: only in weft`)
  return bad
}
