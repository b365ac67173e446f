/**
 * Tool-call parsers for `tool_choice: "auto"` (vLLM's `--tool-call-parser`): pure functions on the
 * generated text, whole (`extract`) or as it streams (`stream`). Text that holds no well-formed call
 * is left alone: it stays the message's content.
 */
import { callOf, CallStream, partialTagAt, type CallPiece, type FoundCall, type StreamOut } from './tool-call.js'
import { skipWs, valueEnd } from './json-text.js'
import { TOOL_PARSERS, type ToolParserName } from '../../core/config.js'

export interface Extracted {
  calls: FoundCall[]
  /** The text that is not a call (null when there is none). */
  content: string | null
}

export interface ToolStreamParser {
  push(text: string): StreamOut
  /** The text is over: what was held back. */
  end(): StreamOut
}

export interface ToolParser {
  extract(text: string): Extracted
  stream(): ToolStreamParser
}

export { TOOL_PARSERS, type ToolParserName }

const OPEN = '<tool_call>'
const CLOSE = '</tool_call>'
const PYTHON_TAG = '<|python_tag|>'

/** Hermes / Qwen2.5: `<tool_call>{"name": …, "arguments": {…}}</tool_call>`, text before the first call is content. */
function hermesExtract(text: string): Extracted {
  const first = text.indexOf(OPEN)
  if (first < 0) return { calls: [], content: text }
  try {
    const calls = [...text.matchAll(/<tool_call>([\s\S]*?)<\/tool_call>|<tool_call>([\s\S]*)$/g)].map((m) =>
      callOf(JSON.parse((m[1] ?? m[2] ?? '').trim())),
    )
    const before = text.slice(0, first)
    return { calls, content: before.trim() ? before : null }
  } catch {
    return { calls: [], content: text }
  }
}

/** Hermes as it streams: content until `<tool_call>`; each call's name, then its arguments in pieces. */
class HermesStream implements ToolStreamParser {
  private buf = ''
  private inCall: CallStream | null = null
  private count = 0
  private seenCall = false

  push(text: string): StreamOut {
    this.buf += text
    const out: StreamOut = { content: '', calls: [] }
    for (;;) {
      if (!this.inCall) {
        const at = this.buf.indexOf(OPEN)
        const cut = at >= 0 ? at : partialTagAt(this.buf, OPEN)
        // After the first call, text between calls is not content (as when the whole text is parsed).
        if (!this.seenCall) out.content += this.buf.slice(0, cut)
        this.buf = this.buf.slice(at >= 0 ? at + OPEN.length : cut)
        if (at < 0) return out
        this.inCall = new CallStream(() => this.count++)
        this.seenCall = true
        continue
      }
      const at = this.buf.indexOf(CLOSE)
      const cut = at >= 0 ? at : partialTagAt(this.buf, CLOSE)
      out.calls.push(...this.inCall.push(this.buf.slice(0, cut)))
      this.buf = this.buf.slice(at >= 0 ? at + CLOSE.length : cut)
      if (at < 0) return out
      this.closeCall(out)
    }
  }

  private closeCall(out: StreamOut): void {
    const call = this.inCall!
    this.inCall = null
    const rest = call.close()
    if (rest) out.calls.push(...rest)
    // Not a call after all, and nothing of it sent: it goes out as the text it was.
    else if (!call.started) out.content += OPEN + call.raw + CLOSE
  }

  end(): StreamOut {
    const out: StreamOut = { content: '', calls: [] }
    if (this.inCall) {
      out.calls.push(...this.inCall.push(this.buf))
      this.buf = ''
      this.closeCall(out)
    } else if (!this.seenCall) out.content += this.buf
    this.buf = ''
    return out
  }
}

/**
 * Llama 3.x JSON calls: the reply is one or more `{"name": …, "parameters": {…}}` objects separated
 * by `;`, optionally after `<|python_tag|>`; a reply that starts otherwise is content.
 */
function llama3Extract(text: string): Extracted {
  let i = skipWs(text, 0)
  if (text.startsWith(PYTHON_TAG, i)) i += PYTHON_TAG.length
  else if (text[i] !== '{') return { calls: [], content: text }
  try {
    const calls: FoundCall[] = []
    for (i = skipWs(text, i); i < text.length; i = skipWs(text, i)) {
      const end = valueEnd(text, i)
      calls.push(callOf(JSON.parse(text.slice(i, end < 0 ? text.length : end))))
      if (end < 0) break
      i = skipWs(text, end)
      if (text[i] === ';') i++
    }
    if (!calls.length) throw new Error('no call')
    return { calls, content: null }
  } catch {
    return { calls: [], content: text }
  }
}

/**
 * Calls as a run of JSON objects: Llama 3's (`;` between them, content unless the reply opens with a
 * call) or, with `array`, the elements of the JSON array `tool_choice: "required"` generates.
 */
class JsonCallsStream implements ToolStreamParser {
  private buf = ''
  private mode: 'undecided' | 'content' | 'calls'
  private readonly sep: RegExp
  private call: CallStream | null = null
  private count = 0
  private failed = ''

  constructor(array = false) {
    this.mode = array ? 'calls' : 'undecided'
    this.sep = array ? /^[\s,[\]]+/ : /^[\s;]+/
  }

  push(text: string): StreamOut {
    this.buf += text
    const out: StreamOut = { content: '', calls: [] }
    if (this.mode === 'undecided') this.decide()
    if (this.mode === 'content') {
      out.content = this.buf
      this.buf = ''
    } else if (this.mode === 'calls') this.calls(out)
    return out
  }

  /** The first visible characters say whether the reply is calls. */
  private decide(): void {
    const s = this.buf.trimStart()
    if (!s) return
    if (s.startsWith(PYTHON_TAG)) {
      this.mode = 'calls'
      this.buf = s.slice(PYTHON_TAG.length)
    } else if (s[0] === '{') this.mode = 'calls'
    else if (!PYTHON_TAG.startsWith(s)) this.mode = 'content'
  }

  private calls(out: StreamOut): void {
    for (;;) {
      if (!this.call) {
        this.buf = this.buf.replace(this.sep, '')
        if (!this.buf) return
        this.call = new CallStream(() => this.count++)
      }
      const end = valueEnd(this.call.raw + this.buf, 0)
      if (end < 0) {
        out.calls.push(...this.call.push(this.buf))
        this.buf = ''
        return
      }
      const take = end - this.call.raw.length
      out.calls.push(...this.call.push(this.buf.slice(0, take)))
      this.buf = this.buf.slice(take)
      this.closeCall(out)
    }
  }

  private closeCall(out: StreamOut): void {
    const call = this.call!
    this.call = null
    const rest = call.close()
    if (rest) out.calls.push(...rest)
    else if (!call.started) this.failed += call.raw
  }

  end(): StreamOut {
    const out: StreamOut = { content: '', calls: [] }
    if (this.mode === 'undecided') out.content = this.buf
    else if (this.mode === 'calls') {
      if (this.buf && !this.call) this.call = new CallStream(() => this.count++)
      if (this.call) {
        out.calls.push(...this.call.push(this.buf))
        this.closeCall(out)
      }
      // Text that never made a call, when no call was made at all, is content after all.
      if (this.count === 0) out.content = this.failed
    }
    this.buf = ''
    return out
  }
}

const PARSERS: Record<ToolParserName, ToolParser> = {
  hermes: { extract: hermesExtract, stream: () => new HermesStream() },
  llama3_json: { extract: llama3Extract, stream: () => new JsonCallsStream() },
}

/** The calls of `tool_choice: "required"`'s JSON array `[{"name": …, "parameters": {…}}, …]`, whole or streamed. */
export const requiredCalls: ToolParser = {
  extract(text) {
    try {
      const arr: unknown = JSON.parse(text)
      if (!Array.isArray(arr)) throw new Error('not an array')
      return { calls: arr.map(callOf), content: null }
    } catch {
      return { calls: [], content: null }
    }
  },
  stream: () => new JsonCallsStream(true),
}

export function toolParser(name: ToolParserName): ToolParser {
  return PARSERS[name]
}

/** The parser a chat template's own conventions call for, when they make it clear; else null. */
export function toolParserForTemplate(template: string | null): ToolParserName | null {
  if (!template) return null
  if (template.includes('<tool_call>')) return 'hermes'
  if (template.includes('<|python_tag|>') || /respond with a JSON for a function call/i.test(template)) return 'llama3_json'
  return null
}

export type { CallPiece, FoundCall, StreamOut }
