/**
 * What a sequence sends back as it generates: each sampled token goes through the stop checks
 * (end-of-sequence, stop token ids, stop strings, length), is decoded, and goes out as a delta or
 * finish event; prompt logprobs and the request's closing `done` event are made here too.
 */
import type { TokenLogprob, WorkerEvent } from './protocol.js'
import { now, type Active, type Choice } from './request.js'
import { largest, logSoftmax, type Sampled } from './sampler.js'
import type { ModelTokenizer } from './tokenizer.js'

type Finish = { reason: 'stop' | 'length'; stopReason: string | number | null }

export class Output {
  constructor(
    private readonly tok: ModelTokenizer,
    private readonly maxPositions: number,
    private readonly emit: (e: WorkerEvent) => void,
  ) {}

  /** Takes a sampled token: stop checks, text, events. */
  advance(a: Active, c: Choice, s: Sampled, t: number): void {
    const r = a.req
    c.output.push(s.token)
    if (c.firstAt === 0) c.firstAt = t
    else c.gaps += t - c.lastAt
    c.lastAt = t
    if (s.logprob !== undefined) c.pendingLogprobs.push(this.logprobEntry(s, r.returnTokensAsTokenIds))
    let finish = this.stopToken(a, s.token)
    let text = this.tok.decode(c.output, r.skipSpecialTokens, r.spacesBetweenSpecialTokens)
    // An unfinished UTF-8 sequence decodes to U+FFFD: held until its last byte arrives.
    const complete = finish !== null || c.output.length >= a.maxTokens
    if (!complete) while (text.endsWith('\uFFFD')) text = text.slice(0, -1)
    if (finish === null && r.stop.length && c.output.length >= r.minTokens) {
      const cut = stopString(a, c, text)
      if (cut) [finish, text] = [{ reason: 'stop', stopReason: cut.which }, cut.text]
    }
    if (finish === null && (c.output.length >= a.maxTokens || c.cache.length + 1 >= this.maxPositions))
      finish = { reason: 'length', stopReason: null }
    c.text = text
    if (finish !== null) this.finish(a, c, s, finish)
    else if (r.stream) this.delta(a, c, s)
  }

  /** End-of-sequence (unless ignored) or one of the stop token ids. */
  private stopToken(a: Active, token: number): Finish | null {
    if (!a.req.ignoreEos && this.tok.eosIds.has(token)) return { reason: 'stop', stopReason: null }
    if (a.req.stopTokenIds.includes(token)) return { reason: 'stop', stopReason: token }
    return null
  }

  private finish(a: Active, c: Choice, s: Sampled, f: Finish): void {
    const r = a.req
    c.finished = true
    const piece = r.stream ? c.text.slice(c.sentChars) : c.text
    this.emit({
      type: 'finish',
      id: r.id,
      choice: c.index,
      text: piece,
      tokenIds: r.stream ? c.output.slice(c.sentIds) : c.output,
      logprobs: s.logprob !== undefined ? takeLogprobs(c, r.stream) : null,
      completionTokens: c.output.length,
      finishReason: f.reason,
      stopReason: f.stopReason,
    })
  }

  /** Streams what is new, holding back the characters a stop string might still claim. */
  private delta(a: Active, c: Choice, s: Sampled): void {
    const visible = Math.max(c.sentChars, c.text.length - a.holdBack)
    this.emit({
      type: 'delta',
      id: a.req.id,
      choice: c.index,
      text: c.text.slice(c.sentChars, visible),
      tokenIds: c.output.slice(c.sentIds),
      logprobs: s.logprob !== undefined ? takeLogprobs(c, true) : null,
      completionTokens: c.output.length,
    })
    c.sentChars = visible
    c.sentIds = c.output.length
  }

  private logprobEntry(s: Sampled, asIds: boolean): TokenLogprob {
    const entry = (id: number, lp: number) => {
      const token = asIds ? `token_id:${id}` : this.tok.piece(id)
      return { token, logprob: Math.max(lp, -9999), bytes: [...Buffer.from(asIds ? this.tok.piece(id) : token, 'utf8')] }
    }
    return { ...entry(s.token, s.logprob!), top_logprobs: (s.top ?? []).map(([id, lp]) => entry(id, lp)) }
  }

  /**
   * Log probabilities of the prompt tokens from a prefill chunk's logits (`rows` positions from
   * `from`): the row at position p predicts token p + 1. Raw model output, no sampling processing.
   */
  promptLogprobs(a: Active, data: Float32Array, from: number, rows: number, V: number): void {
    const k = a.req.promptLogprobs ?? 0
    for (let r = 0; r < rows; r++) {
      const p = from + r + 1
      if (p >= a.promptIds.length) break
      const lp = logSoftmax(data.subarray(r * V, (r + 1) * V))
      const actual = a.promptIds[p]!
      const entry: Record<string, { logprob: number; rank: number; decoded_token: string }> = {}
      let rank = 1
      for (let i = 0; i < V; i++) if (lp[i]! > lp[actual]!) rank++
      entry[String(actual)] = { logprob: Math.max(lp[actual]!, -9999), rank, decoded_token: this.tok.piece(actual) }
      largest(lp, k).forEach(([id, v], j) => {
        if (!(String(id) in entry)) entry[String(id)] = { logprob: Math.max(v, -9999), rank: j + 1, decoded_token: this.tok.piece(id) }
      })
      a.promptLogprobs![p] = entry
    }
  }

  done(a: Active): void {
    const end = now()
    const completion = a.choices.reduce((s, c) => s + c.output.length, 0)
    const firsts = a.choices.map((c) => c.firstAt).filter((x) => x > 0)
    const gaps = a.choices.map((c) => (c.output.length > 1 ? c.gaps / (c.output.length - 1) : 0))
    this.emit({
      type: 'done',
      id: a.req.id,
      promptTokens: a.promptIds.length,
      completionTokens: completion,
      promptLogprobs: a.promptLogprobs,
      timings: {
        queued_ms: a.started - a.arrived,
        prefill_ms: (a.prefillDone || end) - a.started,
        time_to_first_token_ms: (firsts.length ? Math.min(...firsts) : end) - a.arrived,
        inter_token_ms: gaps.reduce((x, y) => x + y, 0) / gaps.length,
        total_ms: end - a.arrived,
      },
    })
  }
}

/** The earliest stop string in the new part of the text: the text cut there (or after it, if kept), and which it was. */
function stopString(a: Active, c: Choice, text: string): { text: string; which: string } | null {
  const r = a.req
  const from = Math.max(0, c.text.length - Math.max(...r.stop.map((x) => x.length)))
  let best = -1
  let which = ''
  for (const x of r.stop) {
    const at = text.indexOf(x, from)
    if (at >= 0 && (best < 0 || at < best)) [best, which] = [at, x]
  }
  if (best < 0) return null
  return { text: text.slice(0, r.includeStopStrInOutput ? best + which.length : best), which }
}

function takeLogprobs(c: Choice, stream: boolean): TokenLogprob[] {
  const out = stream ? c.pendingLogprobs.splice(0) : c.pendingLogprobs
  return out
}
