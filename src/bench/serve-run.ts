import { postJson } from './http.js'
import { ProgressBar } from './progress.js'
import { Rng, arrivalTimes, uuidv7 } from './random.js'
import { requestBody, sendRequest, type BenchRequest, type RequestOutput, type Target } from './request.js'
import type { CallRecord } from './trace-sink.js'

/** A counting semaphore: --max-concurrency, independent of the arrival process. */
class Semaphore {
  private waiting: (() => void)[] = []
  constructor(private free: number) {}
  async acquire(): Promise<void> {
    if (this.free > 0) {
      this.free--
      return
    }
    await new Promise<void>((r) => this.waiting.push(r))
  }
  release(): void {
    const next = this.waiting.shift()
    if (next) next()
    else this.free++
  }
}

export interface LoadPlan {
  target: Target
  requests: BenchRequest[]
  requestRate: number
  burstiness: number
  maxConcurrency: number | null
  seed: number
}

export interface LoadRun {
  outputs: RequestOutput[]
  /** Seconds from the first request sent to the last response finished. */
  duration: number
  /** Wall-clock ms of the run's clock zero. */
  wallStart: number
}

const sleepUntil = (t0: number, seconds: number) => {
  const wait = t0 + seconds * 1000 - performance.now()
  return wait > 0 ? new Promise((r) => setTimeout(r, wait)) : Promise.resolve()
}

/** Sends the requests at their arrival times (at most `maxConcurrency` in flight) and waits for them all. */
export async function runLoad(p: LoadPlan): Promise<LoadRun> {
  const arrivals = arrivalTimes(p.requests.length, p.requestRate, p.burstiness, new Rng(p.seed))
  const sem = p.maxConcurrency ? new Semaphore(p.maxConcurrency) : null
  const bar = new ProgressBar(p.requests.length, 'bench serve')
  const wallStart = Date.now()
  const t0 = performance.now()
  const running: Promise<RequestOutput>[] = []
  for (let i = 0; i < p.requests.length; i++) {
    await sleepUntil(t0, arrivals[i]!)
    const r = p.requests[i]!
    const one = async () => {
      await sem?.acquire()
      try {
        const o = await sendRequest(p.target, r, t0)
        bar.tick(o.success)
        return o
      } finally {
        sem?.release()
      }
    }
    running.push(one())
  }
  const outputs = await Promise.all(running)
  const first = Math.min(...outputs.map((o) => o.sentAt))
  const last = Math.max(...outputs.map((o) => o.endedAt))
  return { outputs, duration: last - first, wallStart }
}

/**
 * Token counts the stream did not give (a server without `include_usage`): the server's own tokenizer through
 * /tokenize when it has one, else the dataset's prompt length and the number of content chunks.
 */
export async function fillTokenCounts(t: Target, outputs: RequestOutput[], requests: BenchRequest[]): Promise<void> {
  const count = async (text: string, special: boolean): Promise<number | null> => {
    try {
      const r = await postJson<{ count?: number; tokens?: number[] }>(
        t.baseUrl + '/tokenize',
        { model: t.model, prompt: text, add_special_tokens: special },
        t.headers,
      )
      return r.count ?? r.tokens?.length ?? null
    } catch {
      return null
    }
  }
  for (const [i, o] of outputs.entries()) {
    if (!o.success) continue
    if (o.outputTokens === null) o.outputTokens = (await count(o.generatedText, false)) ?? o.chunkTimes.length
    if (o.promptTokens === null) o.promptTokens = requests[i]!.promptLen ?? (await count(requests[i]!.prompt, true)) ?? 0
  }
}

/** A finished request as a traced call: the request as inputs, the reply and usage as output, the timings in attributes. */
export function requestCall(t: Target, wallStart: number, o: RequestOutput, r: BenchRequest): CallRecord {
  const usage = {
    prompt_tokens: o.promptTokens ?? 0,
    completion_tokens: o.outputTokens ?? 0,
    total_tokens: (o.promptTokens ?? 0) + (o.outputTokens ?? 0),
  }
  const tokens = o.outputTokens ?? 0
  const started = wallStart + o.sentAt * 1000
  return {
    id: uuidv7(started),
    started,
    ended: wallStart + o.endedAt * 1000,
    opName: t.endpoint === '/v1/completions' ? 'openai.completions.create' : 'openai.chat.completions.create',
    inputs: requestBody(t, r),
    output: o.success ? { id: o.responseId, model: t.model, text: o.generatedText, usage } : null,
    attributes: {
      weft: {
        kind: 'bench.request',
        base_url: t.baseUrl,
        endpoint: t.endpoint,
        response_id: o.responseId,
        ttft_ms: o.ttft * 1000,
        itl_ms: o.itl.map((s) => s * 1000),
        e2el_ms: o.latency * 1000,
        ...(tokens > 1 ? { tpot_ms: ((o.latency - o.ttft) * 1000) / (tokens - 1) } : {}),
      },
    },
    summary: o.success ? { usage: { [t.model]: { requests: 1, ...usage } } } : {},
    exception: o.success ? null : o.error,
  }
}
