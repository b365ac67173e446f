import { pythonDumps, respace, topLevelMembers } from './json-text.js'

/** A tool call found in generated text: the function's name and its arguments as JSON text. */
export interface FoundCall {
  name: string
  arguments: string
}

/** A piece of a streamed tool call: the name once (first), then the arguments in pieces. */
export interface CallPiece {
  /** The call's place among this choice's calls (0, 1, …). */
  index: number
  name?: string
  arguments?: string
}

/** What a step of streamed text turns into: plain content, and pieces of tool calls. */
export interface StreamOut {
  content: string
  calls: CallPiece[]
}

/** One call object `{"name": …, "arguments"|"parameters": {…}}` → a FoundCall; throws when it is not one. */
export function callOf(obj: unknown): FoundCall {
  const o = obj as Record<string, unknown> | null
  if (!o || typeof o !== 'object' || typeof o.name !== 'string') throw new Error('not a tool call')
  const args = 'arguments' in o ? o.arguments : o.parameters
  if (args === undefined) throw new Error('a tool call without arguments')
  return { name: o.name, arguments: pythonDumps(args) }
}

/**
 * One tool call's JSON text as it grows: its name goes out as soon as it is complete, then its
 * arguments in pieces, re-spaced as the final text will be; `close` sends what the pieces missed.
 */
export class CallStream {
  raw = ''
  private name: string | null = null
  private sent = ''

  /** `index`: the number the call gets once its name goes out. */
  constructor(private readonly nextIndex: () => number) {}

  index = -1

  get started(): boolean {
    return this.index >= 0
  }

  push(text: string): CallPiece[] {
    this.raw += text
    const members = topLevelMembers(this.raw)
    const out: CallPiece[] = []
    if (this.name === null) {
      const m = members.get('name')
      if (!m || m.end < 0 || this.raw[m.start] !== '"') return out
      this.name = JSON.parse(this.raw.slice(m.start, m.end)) as string
      this.index = this.nextIndex()
      out.push({ index: this.index, name: this.name })
    }
    const a = members.get('arguments') ?? members.get('parameters')
    if (!a) return out
    const args = respace(this.raw.slice(a.start, a.end < 0 ? this.raw.length : a.end))
    if (args.length > this.sent.length && args.startsWith(this.sent)) {
      out.push({ index: this.index, arguments: args.slice(this.sent.length) })
      this.sent = args
    }
    return out
  }

  /** The call is complete: the arguments' remainder, or null when its text is no tool call. */
  close(): CallPiece[] | null {
    let call: FoundCall
    try {
      call = callOf(JSON.parse(this.raw))
    } catch {
      return null
    }
    const out: CallPiece[] = []
    if (!this.started) {
      this.index = this.nextIndex()
      out.push({ index: this.index, name: call.name })
    }
    if (call.arguments.startsWith(this.sent) && call.arguments.length > this.sent.length)
      out.push({ index: this.index, arguments: call.arguments.slice(this.sent.length) })
    return out
  }
}

/** The longest end of `s` that could begin `tag`: held back until the next text says whether it does. */
export function partialTagAt(s: string, tag: string): number {
  for (let k = Math.min(tag.length - 1, s.length); k > 0; k--) if (tag.startsWith(s.slice(s.length - k))) return s.length - k
  return s.length
}
