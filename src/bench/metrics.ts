import { summarize } from './stats.js'
import type { RequestOutput } from './request.js'

/** SLOs for goodput, in milliseconds: a request is good when it meets every one given. */
export type Goodput = Partial<Record<'ttft' | 'tpot' | 'e2el', number>>

export function parseGoodput(spec: string | undefined): Goodput | null {
  if (!spec) return null
  const out: Goodput = {}
  for (const part of spec.split(/[\s,]+/).filter(Boolean)) {
    const [name, value] = part.split(':')
    const ms = Number(value)
    if ((name !== 'ttft' && name !== 'tpot' && name !== 'e2el') || !Number.isFinite(ms) || ms < 0)
      throw new Error(`--goodput takes ttft:MS tpot:MS e2el:MS, not ${JSON.stringify(part)}`)
    out[name] = ms
  }
  return out
}

/** TPOT as vLLM defines it: time after the first token per further token; 0 for one token or none. */
const tpotOf = (o: RequestOutput) => ((o.outputTokens ?? 0) > 1 ? (o.latency - o.ttft) / (o.outputTokens! - 1) : 0)

/** The most of something per whole second of the run (vLLM's `max_output_tokens_per_s` counts content chunks so). */
function maxPerSecond(times: number[]): number {
  const per = new Map<number, number>()
  for (const t of times) per.set(Math.floor(t), (per.get(Math.floor(t)) ?? 0) + 1)
  return Math.max(0, ...per.values())
}

function maxConcurrent(outputs: RequestOutput[]): number {
  const events = outputs.flatMap((o) => [
    [o.sentAt, 1],
    [o.endedAt, -1],
  ]) as [number, number][]
  events.sort((a, b) => a[0] - b[0] || a[1] - b[1])
  let now = 0
  let most = 0
  for (const [, d] of events) most = Math.max(most, (now += d))
  return most
}

function goodCount(done: RequestOutput[], slo: Goodput): number {
  return done.filter(
    (o) =>
      (slo.ttft === undefined || o.ttft * 1000 <= slo.ttft) &&
      (slo.tpot === undefined || tpotOf(o) * 1000 <= slo.tpot) &&
      (slo.e2el === undefined || o.latency * 1000 <= slo.e2el),
  ).length
}

/**
 * The run's result under vLLM's key names. Latency statistics are over completed requests only; ITL pools the
 * gaps of all of them; TPOT counts requests with more than one output token.
 */
export function computeResult(
  outputs: RequestOutput[],
  duration: number,
  percentiles: number[],
  slo: Goodput | null,
): Record<string, unknown> {
  const done = outputs.filter((o) => o.success)
  const totalIn = done.reduce((s, o) => s + (o.promptTokens ?? 0), 0)
  const totalOut = done.reduce((s, o) => s + (o.outputTokens ?? 0), 0)
  const tpots = done.filter((o) => (o.outputTokens ?? 0) > 1).map(tpotOf)
  return {
    duration,
    completed: done.length,
    failed: outputs.length - done.length,
    total_input_tokens: totalIn,
    total_output_tokens: totalOut,
    request_throughput: done.length / duration,
    request_goodput: slo ? goodCount(done, slo) / duration : null,
    output_throughput: totalOut / duration,
    total_token_throughput: (totalIn + totalOut) / duration,
    max_output_tokens_per_s: maxPerSecond(done.flatMap((o) => o.chunkTimes)),
    max_concurrent_requests: maxConcurrent(outputs),
    ...summarize(
      'ttft',
      done.map((o) => o.ttft),
      percentiles,
    ),
    ...summarize('tpot', tpots, percentiles),
    ...summarize(
      'itl',
      done.flatMap((o) => o.itl),
      percentiles,
    ),
    ...summarize(
      'e2el',
      done.map((o) => o.latency),
      percentiles,
    ),
    input_lens: outputs.map((o) => o.promptTokens ?? 0),
    output_lens: outputs.map((o) => (o.success ? (o.outputTokens ?? 0) : 0)),
    ttfts: outputs.map((o) => o.ttft),
    itls: outputs.map((o) => o.itl),
    e2els: outputs.map((o) => o.latency),
    generated_texts: outputs.map((o) => o.generatedText),
    errors: outputs.map((o) => o.error),
    response_ids: outputs.map((o) => o.responseId),
  }
}
