import type { TestServer } from './server.js'

// Helpers for the scheduling tests: streams read chunk by chunk (with arrival times), the engine's state
// from /admin/stats, and polling.

export interface SseChunk {
  at: number
  data: any
}

/** A streamed chat completion read by hand (fetch), so the test can stop reading or abort when it likes. */
export class ChatStream {
  private reader: ReadableStreamDefaultReader<Uint8Array> | null = null
  private buffered = ''
  private readonly decoder = new TextDecoder()
  readonly chunks: SseChunk[] = []
  done = false

  private constructor(
    private readonly res: Promise<Response>,
    private readonly ac: AbortController,
  ) {}

  static open(s: TestServer, body: Record<string, unknown>, headers: Record<string, string> = {}): ChatStream {
    const ac = new AbortController()
    const res = fetch(s.url + '/v1/chat/completions', {
      method: 'POST',
      headers: { ...s.bearer(), 'content-type': 'application/json', ...headers },
      body: JSON.stringify({ model: 'weft-tiny', stream: true, ...body }),
      signal: ac.signal,
    })
    return new ChatStream(res, ac)
  }

  async status(): Promise<number> {
    return (await this.res).status
  }

  /** The next SSE event's data (parsed unless it is [DONE]); null at the end of the body. */
  async next(): Promise<SseChunk | null> {
    this.reader ??= (await this.res).body!.getReader()
    for (;;) {
      const cut = this.buffered.indexOf('\n\n')
      if (cut >= 0) {
        const event = this.buffered.slice(0, cut)
        this.buffered = this.buffered.slice(cut + 2)
        const line = event.split('\n').find((l) => l.startsWith('data: '))
        if (!line) continue
        const raw = line.slice(6)
        const chunk = { at: performance.now(), data: raw === '[DONE]' ? '[DONE]' : JSON.parse(raw) }
        this.chunks.push(chunk)
        return chunk
      }
      const r = await this.reader.read()
      if (r.done) {
        this.done = true
        return null
      }
      this.buffered += this.decoder.decode(r.value, { stream: true })
    }
  }

  /** Reads until `count` chunks carrying generated text have arrived (role chunks do not count). */
  async readTokens(count: number): Promise<void> {
    let seen = this.tokenChunks().length
    while (seen < count) {
      const c = await this.next()
      if (!c) throw new Error(`the stream ended after ${seen} token chunks`)
      if (isTokenChunk(c.data)) seen++
    }
  }

  /** Reads to the end of the body. */
  async drain(): Promise<void> {
    while (await this.next());
  }

  tokenChunks(): SseChunk[] {
    return this.chunks.filter((c) => isTokenChunk(c.data))
  }

  abort(): void {
    this.ac.abort()
  }
}

function isTokenChunk(d: any): boolean {
  const ch = d?.choices?.[0]
  return !!ch && ch.delta?.role === undefined && (typeof ch.delta?.content === 'string' || ch.finish_reason)
}

/** The engine state of the built-in model, from /admin/stats. */
export async function engineState(s: TestServer): Promise<{
  running_requests: number
  waiting_requests: number
  running_sequences: number
  kv_positions_used: number
  kv_positions: number
}> {
  const r = await fetch(s.url + '/admin/stats', { headers: s.bearer() })
  return ((await r.json()) as any).inference['weft-tiny']
}

/** Polls until `ok` holds (true) or `ms` pass (false). */
export async function waitFor(ok: () => Promise<boolean> | boolean, ms: number, every = 10): Promise<boolean> {
  const end = performance.now() + ms
  for (;;) {
    if (await ok()) return true
    if (performance.now() > end) return false
    await new Promise((r) => setTimeout(r, every))
  }
}

/** A non-streamed chat completion by plain fetch: status and parsed body. */
export async function chatOnce(
  s: TestServer,
  body: Record<string, unknown>,
  headers: Record<string, string> = {},
  timeoutMs = 60_000,
): Promise<{ status: number; json: any }> {
  const r = await fetch(s.url + '/v1/chat/completions', {
    method: 'POST',
    headers: { ...s.bearer(), 'content-type': 'application/json', ...headers },
    body: JSON.stringify({ model: 'weft-tiny', ...body }),
    signal: AbortSignal.timeout(timeoutMs),
  })
  const text = await r.text()
  let json: any = null
  try {
    json = JSON.parse(text)
  } catch {}
  return { status: r.status, json }
}
