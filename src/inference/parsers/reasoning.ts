/**
 * Reasoning parsers (vLLM's `--reasoning-parser`): split `<think>…</think>` off the generated text,
 * whole or as it streams. Both take a `<think>` the output opens with; they differ on a reply
 * without one:
 * - `deepseek_r1`: DeepSeek-R1's template puts `<think>` in the prompt, so the reply starts inside
 *   the reasoning: everything up to `</think>` is reasoning, and with no `</think>` all of it is.
 * - `qwen3`: Qwen3 writes `<think>` itself (and with `enable_thinking: false` its template closes an
 *   empty block in the prompt): a reply that does not open with `<think>` is all content.
 */
import { partialTagAt } from './tool-call.js'
import { REASONING_PARSERS, type ReasoningParserName } from '../../core/config.js'

export { REASONING_PARSERS, type ReasoningParserName }

export const THINK_START = '<think>'
export const THINK_END = '</think>'

export interface ReasoningOut {
  reasoning: string
  content: string
}

/** The reasoning split of a growing text. */
export class ReasoningStream {
  private state: 'start' | 'reasoning' | 'content' = 'start'
  private buf = ''
  /** Whether any reasoning section was entered. */
  entered = false

  constructor(private readonly kind: ReasoningParserName) {}

  push(text: string): ReasoningOut {
    this.buf += text
    const out: ReasoningOut = { reasoning: '', content: '' }
    if (this.state === 'start') {
      if (this.buf.startsWith(THINK_START)) {
        this.buf = this.buf.slice(THINK_START.length)
        this.enter()
      } else if (THINK_START.startsWith(this.buf)) return out
      else if (this.kind === 'deepseek_r1') this.enter()
      else this.state = 'content'
    }
    if (this.state === 'reasoning') {
      const at = this.buf.indexOf(THINK_END)
      const cut = at >= 0 ? at : partialTagAt(this.buf, THINK_END)
      out.reasoning = this.buf.slice(0, cut)
      this.buf = this.buf.slice(at >= 0 ? at + THINK_END.length : cut)
      if (at < 0) return out
      this.state = 'content'
    }
    out.content = this.buf
    this.buf = ''
    return out
  }

  private enter(): void {
    this.state = 'reasoning'
    this.entered = true
  }

  end(): ReasoningOut {
    const held = this.buf
    this.buf = ''
    if (this.state === 'start' && this.kind === 'deepseek_r1') this.enter()
    if (this.state === 'reasoning') return { reasoning: held, content: '' }
    return { reasoning: '', content: held }
  }
}

/** The whole text split: reasoning null when there is none, content null when nothing follows it. */
export function splitReasoning(kind: ReasoningParserName, text: string): { reasoning: string | null; content: string | null } {
  const s = new ReasoningStream(kind)
  const a = s.push(text)
  const b = s.end()
  const reasoning = a.reasoning + b.reasoning
  const content = a.content + b.content
  if (!s.entered) return { reasoning: null, content }
  return { reasoning, content: content || null }
}

/**
 * Reasoning tokens among generated token ids, given the ids of the two markers (each one token):
 * the tokens inside the reasoning section, markers not counted.
 */
export function countReasoningTokens(kind: ReasoningParserName, ids: number[], startId: number, endId: number): number {
  let i = 0
  if (ids[0] === startId) i = 1
  else if (kind === 'qwen3') return 0
  let n = 0
  for (; i < ids.length && ids[i] !== endId; i++) n++
  return n
}
