/**
 * A choice's generated text shaped into the message the client sees: reasoning split off first
 * (with a reasoning parser), then tool calls taken out of the rest as the tool choice says — whole
 * for a completion, step by step for a stream (OpenAI's deltas: a call's index, id, type and name
 * first, then its arguments in pieces).
 */
import { randomUUID } from 'node:crypto'
import { ReasoningStream, splitReasoning, type ReasoningParserName } from '../../inference/parsers/reasoning.js'
import {
  requiredCalls,
  toolParser,
  type CallPiece,
  type StreamOut,
  type ToolParser,
  type ToolStreamParser,
} from '../../inference/parsers/tool-parsers.js'
import type { ToolMode } from './tools.js'

export interface OutputSpec {
  mode: ToolMode
  reasoning: ReasoningParserName | null
  includeReasoning: boolean
  /** `parallel_tool_calls`: false keeps only the first call. */
  parallel: boolean
}

export interface ToolCallOut {
  id: string
  type: 'function'
  function: { name: string; arguments: string }
}

export interface ShapedMessage {
  content: string | null
  reasoning: string | null
  tool_calls: ToolCallOut[]
}

export interface ToolCallDelta {
  index: number
  id?: string
  type?: 'function'
  function: { name?: string; arguments?: string }
}

export interface DeltaOut {
  content?: string
  reasoning?: string
  tool_calls?: ToolCallDelta[]
}

export const newToolCallId = () => `chatcmpl-tool-${randomUUID().replaceAll('-', '')}`

/** Whether the text goes out as it is (no parser, no tool choice to honour). */
export const isPlain = (s: OutputSpec) => s.mode.kind === 'none' && s.reasoning === null

function parserOf(mode: ToolMode): ToolParser | null {
  if (mode.kind === 'auto') return toolParser(mode.parser)
  if (mode.kind === 'required') return requiredCalls
  return null
}

/** A finished choice's text as its message. */
export function shapeWhole(spec: OutputSpec, text: string): ShapedMessage {
  let reasoning: string | null = null
  let content: string | null = text
  if (spec.reasoning) ({ reasoning, content } = splitReasoning(spec.reasoning, text))
  if (!spec.includeReasoning) reasoning = null
  let calls: ToolCallOut[] = []
  const mode = spec.mode
  if (mode.kind === 'named') {
    calls = [{ id: newToolCallId(), type: 'function', function: { name: mode.name, arguments: content ?? '' } }]
    content = ''
  } else if (mode.kind === 'auto' || mode.kind === 'required') {
    const found = parserOf(mode)!.extract(content ?? '')
    calls = found.calls.map((c) => ({ id: newToolCallId(), type: 'function' as const, function: { ...c } }))
    if (mode.kind === 'required') content = ''
    else if (calls.length) content = found.content
  }
  if (!spec.parallel) calls = calls.slice(0, 1)
  return { content, reasoning, tool_calls: calls }
}

/** vLLM's finish reasons with tools: `tool_calls` when auto found calls, or required ended normally. */
export function finishReasonOf(spec: OutputSpec, engine: string, calls: number): string {
  if (spec.mode.kind === 'auto' && calls > 0) return 'tool_calls'
  if (spec.mode.kind === 'required' && engine === 'stop') return 'tool_calls'
  return engine
}

/** One choice's stream: each step's text in, the step's delta out; what went out is kept for the record. */
export class ChoiceStream {
  private readonly reasoning: ReasoningStream | null
  private readonly tools: ToolStreamParser | null
  private readonly ids = new Map<number, string>()
  readonly message: ShapedMessage = { content: null, reasoning: null, tool_calls: [] }

  constructor(private readonly spec: OutputSpec) {
    this.reasoning = spec.reasoning ? new ReasoningStream(spec.reasoning) : null
    this.tools = parserOf(spec.mode)?.stream() ?? null
  }

  push(text: string): DeltaOut {
    const r = this.reasoning ? this.reasoning.push(text) : { reasoning: '', content: text }
    return this.shape(r.reasoning, r.content, false)
  }

  /** The text is over: whatever the parsers held back. */
  end(): DeltaOut {
    const r = this.reasoning ? this.reasoning.end() : { reasoning: '', content: '' }
    return this.shape(r.reasoning, r.content, true)
  }

  private shape(reasoning: string, content: string, last: boolean): DeltaOut {
    const out: DeltaOut = {}
    if (reasoning && this.spec.includeReasoning) {
      out.reasoning = reasoning
      this.message.reasoning = (this.message.reasoning ?? '') + reasoning
    }
    const t = this.toolStep(content, last)
    if (t.content && this.spec.mode.kind !== 'required') {
      out.content = t.content
      this.message.content = (this.message.content ?? '') + t.content
    }
    const deltas = this.callDeltas(t.calls)
    if (deltas.length) out.tool_calls = deltas
    return out
  }

  private toolStep(content: string, last: boolean): StreamOut {
    const mode = this.spec.mode
    if (mode.kind === 'named') {
      const calls: CallPiece[] = []
      if (!this.ids.has(0)) calls.push({ index: 0, name: mode.name })
      if (content) calls.push({ index: 0, arguments: content })
      return { content: '', calls }
    }
    if (!this.tools) return { content, calls: [] }
    const a = this.tools.push(content)
    if (!last) return a
    const b = this.tools.end()
    return { content: a.content + b.content, calls: [...a.calls, ...b.calls] }
  }

  /** Pieces merged per call; a call's first delta carries its new id, type and name. */
  private callDeltas(pieces: CallPiece[]): ToolCallDelta[] {
    const byIndex = new Map<number, ToolCallDelta>()
    for (const p of pieces) {
      if (!this.spec.parallel && p.index > 0) continue
      let d = byIndex.get(p.index)
      if (!d) byIndex.set(p.index, (d = { index: p.index, function: {} }))
      if (p.name !== undefined && !this.ids.has(p.index)) {
        const id = newToolCallId()
        this.ids.set(p.index, id)
        Object.assign(d, { id, type: 'function' })
        d.function.name = p.name
        d.function.arguments ??= ''
        this.message.tool_calls[p.index] = { id, type: 'function', function: { name: p.name, arguments: '' } }
      }
      if (p.arguments) {
        d.function.arguments = (d.function.arguments ?? '') + p.arguments
        this.message.tool_calls[p.index]!.function.arguments += p.arguments
      }
    }
    return [...byIndex.values()]
  }
}

/** Whether a delta says anything. */
export const isEmptyDelta = (d: DeltaOut) => d.content === undefined && d.reasoning === undefined && d.tool_calls === undefined
