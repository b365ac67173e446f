import { VERSION } from '../core/version.js'
import { runChart } from './chart.js'
import { firstModel, loadRequests } from './dataset.js'
import { traceAuth } from './http.js'
import { computeResult } from './metrics.js'
import { resultTable, writeResult } from './report.js'
import { sendRequest, type Target } from './request.js'
import { fillTokenCounts, requestCall, runLoad } from './serve-run.js'
import { serveOptions, type ServeOptions } from './serve-options.js'
import { TraceSink } from './trace-sink.js'

/** What the result records about the run besides its measurements, so two runs can be compared. */
function runArgs(o: ServeOptions, model: string, date: string): Record<string, unknown> {
  return {
    date,
    weft_version: VERSION,
    backend: o.endpoint === '/v1/completions' ? 'openai' : 'openai-chat',
    base_url: o.baseUrl,
    endpoint: o.endpoint,
    model_id: model,
    num_prompts: o.numPrompts,
    request_rate: Number.isFinite(o.requestRate) ? o.requestRate : 'inf',
    burstiness: o.burstiness,
    max_concurrency: o.maxConcurrency,
    dataset: o.dataset,
    input_len: o.inputLen,
    output_len: o.outputLen,
    range_ratio: o.rangeRatio,
    seed: o.seed,
    ignore_eos: o.ignoreEos,
    goodput: o.goodput,
    percentiles: o.percentiles,
  }
}

/** The result without its per-request lists: what the run's traced call keeps as its output. */
const scalars = (r: Record<string, unknown>) => Object.fromEntries(Object.entries(r).filter(([, v]) => !Array.isArray(v)))

/** `weft bench serve`: load-tests an OpenAI-compatible endpoint as vLLM's `bench serve` does, optionally traced. */
export async function benchServe(flags: Record<string, string>): Promise<void> {
  const o = serveOptions(flags)
  const model = o.model ?? (await firstModel(o.baseUrl, o.headers))
  const target: Target = { baseUrl: o.baseUrl, endpoint: o.endpoint, model, headers: o.headers, ignoreEos: o.ignoreEos }
  const requests = await loadRequests({
    ...o,
    model,
    traceUrl: o.traceTo ?? o.baseUrl,
    traceHeaders: traceAuth(o.traceApiKey),
  })
  const date = new Date().toISOString()
  const args = runArgs(o, model, date)
  // As vLLM: one request first, untimed, so a wrong URL, model or key stops the run before it starts.
  const probe = await sendRequest(target, requests[0]!, performance.now())
  if (!probe.success) throw new Error(`the initial test request failed, check the arguments: ${probe.error}`)
  const sink = o.traceTo && o.project ? new TraceSink(o.traceTo, o.project, o.traceApiKey) : null
  await sink?.start('weft.bench.serve', args, Date.now())
  const run = await runLoad({ target, requests, ...o })
  await fillTokenCounts(target, run.outputs, requests)
  const result = { ...args, ...computeResult(run.outputs, run.duration, o.percentiles, o.goodput) }
  const tpots = run.outputs
    .filter((x) => x.success && (x.outputTokens ?? 0) > 1)
    .map((x) => ((x.latency - x.ttft) * 1000) / (x.outputTokens! - 1))
  const rate = Number.isFinite(o.requestRate) ? `${o.requestRate}qps` : 'infqps'
  const base = o.resultFilename ?? `bench-serve-${model.replace(/[^\w.-]+/g, '_')}-${rate}-${date.replace(/[:.]/g, '-')}`
  const title = `${model} at ${o.baseUrl}${o.endpoint}, ${o.numPrompts} prompts, rate ${rate}, ${date}`
  if (sink) {
    run.outputs.forEach((x, i) => sink.add(requestCall(target, run.wallStart, x, requests[i]!)))
    const refused = await sink.end(scalars(result), {}, run.wallStart + run.duration * 1000)
    result.trace = { url: o.traceTo, project: o.project, run_call_id: sink.runId, trace_id: sink.traceId, errors: refused }
    if (refused.length) process.stderr.write(`weft bench: the trace server refused some calls: ${refused[0]}\n`)
  }
  const file = await writeResult(o.resultDir, base, result, runChart(title, run.outputs, run.duration, tpots))
  process.stdout.write(resultTable(result, o.percentiles))
  process.stdout.write(`wrote ${file} and ${file.replace(/\.json$/, '.svg')}\n`)
}
