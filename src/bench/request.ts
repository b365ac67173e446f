/**
 * One streamed request to an OpenAI-compatible endpoint, timed the way vLLM's `bench serve` times it:
 * TTFT at the first chunk carrying generated content, one ITL gap per later content chunk, the end-to-end
 * latency at the stream's last byte, output tokens from the final `usage` chunk.
 */
export type Endpoint = '/v1/chat/completions' | '/v1/completions'

export interface BenchRequest {
  prompt: string
  /** The prompt's length in tokens when the dataset knows it (random prompts); the server's usage wins. */
  promptLen: number | null
  outputLen: number
}

export interface RequestOutput {
  success: boolean
  error: string
  /** Seconds from the run's start to sending, and to the last byte. */
  sentAt: number
  endedAt: number
  /** Seconds. */
  ttft: number
  itl: number[]
  latency: number
  /** Seconds from the run's start of each content chunk: throughput over time is drawn from them. */
  chunkTimes: number[]
  promptTokens: number | null
  outputTokens: number | null
  generatedText: string
  /** The response's id (`chatcmpl-…`, `cmpl-…`): the server's record of the request carries it. */
  responseId: string | null
}

export interface Target {
  baseUrl: string
  endpoint: Endpoint
  model: string
  headers: Record<string, string>
  ignoreEos: boolean
}

export function requestBody(t: Target, r: BenchRequest): Record<string, unknown> {
  const common = {
    model: t.model,
    stream: true,
    stream_options: { include_usage: true },
    temperature: 0,
    ...(t.ignoreEos ? { ignore_eos: true } : {}),
  }
  if (t.endpoint === '/v1/completions') return { ...common, prompt: r.prompt, max_tokens: r.outputLen }
  return { ...common, messages: [{ role: 'user', content: r.prompt }], max_completion_tokens: r.outputLen }
}

interface Chunk {
  id?: string
  error?: { message?: string } | string
  choices?: {
    text?: string
    delta?: { content?: string | null; reasoning_content?: string | null; reasoning?: string | null; tool_calls?: unknown[] }
  }[]
  usage?: { prompt_tokens?: number; completion_tokens?: number } | null
}

/** The generated text a chunk carries (chat delta or completion text); empty for role-only and usage chunks. */
function chunkText(c: Chunk): string {
  const ch = c.choices?.[0]
  if (!ch) return ''
  if (typeof ch.text === 'string') return ch.text
  const d = ch.delta ?? {}
  return (d.content ?? '') + (d.reasoning_content ?? d.reasoning ?? '') + (d.tool_calls?.length ? JSON.stringify(d.tool_calls) : '')
}

class StreamTimer {
  out: RequestOutput
  private last = 0
  constructor(
    private readonly t0: number,
    sentAt: number,
  ) {
    this.out = {
      success: false,
      error: '',
      sentAt,
      endedAt: sentAt,
      ttft: 0,
      itl: [],
      latency: 0,
      chunkTimes: [],
      promptTokens: null,
      outputTokens: null,
      generatedText: '',
      responseId: null,
    }
  }

  /** One SSE data payload, timed at `now` (ms, performance clock). */
  event(data: string, now: number): void {
    if (data === '[DONE]') return
    const c = JSON.parse(data) as Chunk
    if (c.error) throw new Error(typeof c.error === 'string' ? c.error : (c.error.message ?? JSON.stringify(c.error)))
    this.out.responseId ??= c.id ?? null
    const text = chunkText(c)
    const started = this.out.chunkTimes.length > 0
    // TTFT waits for generated text (a role-only opening chunk is no token); after it, every chunk with a
    // choice is a step, as in vLLM, even one whose token decoded to no text yet (part of a UTF-8 character).
    if (text || (started && c.choices?.length)) {
      const since = (now - this.t0) / 1000
      if (!started) this.out.ttft = since - this.out.sentAt
      else this.out.itl.push((now - this.last) / 1000)
      this.last = now
      this.out.chunkTimes.push(since)
      this.out.generatedText += text
    }
    if (c.usage) {
      this.out.promptTokens = c.usage.prompt_tokens ?? this.out.promptTokens
      this.out.outputTokens = c.usage.completion_tokens ?? this.out.outputTokens
    }
  }
}

/** Reads an SSE body, handing each `data:` payload to the timer as it arrives. */
async function readSse(res: Response, timer: StreamTimer): Promise<void> {
  const decoder = new TextDecoder()
  let buf = ''
  for await (const bytes of res.body as unknown as AsyncIterable<Uint8Array>) {
    const now = performance.now()
    buf += decoder.decode(bytes, { stream: true })
    let nl: number
    while ((nl = buf.indexOf('\n')) >= 0) {
      const line = buf.slice(0, nl).trim()
      buf = buf.slice(nl + 1)
      if (line.startsWith('data:')) timer.event(line.slice(5).trim(), now)
    }
  }
}

/** Sends one request; never throws: a failure is an output with `success: false` and its reason. */
export async function sendRequest(t: Target, r: BenchRequest, t0: number): Promise<RequestOutput> {
  const start = performance.now()
  const timer = new StreamTimer(t0, (start - t0) / 1000)
  const o = timer.out
  try {
    const res = await fetch(t.baseUrl + t.endpoint, {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...t.headers },
      body: JSON.stringify(requestBody(t, r)),
    })
    if (!res.ok) throw new Error(`HTTP ${res.status}: ${(await res.text()).slice(0, 500)}`)
    await readSse(res, timer)
    // As vLLM: a stream with no content (an immediate end of sequence) succeeded, with TTFT 0.
    o.success = true
  } catch (e) {
    o.error = e instanceof Error ? e.message : String(e)
  }
  const end = performance.now()
  o.endedAt = (end - t0) / 1000
  o.latency = (end - start) / 1000
  return o
}
