/**
 * Tool calling at the request's side: vLLM's `tool_choice` rules and how each choice is produced —
 * `required` and a named function by a structured-outputs JSON constraint, `auto` by the server's
 * tool-call parser (tools-output.ts turns the generated text into `tool_calls`).
 */
import type { ChatCompletionReq, Tool } from '../../schemas/chat.js'
import type { ToolParserName } from '../../inference/parsers/tool-parsers.js'
import { DomainError } from '../../core/errors.js'
import { hasUserConstraint } from './structured.js'

const bad = (message: string, param: string) => new DomainError(400, message, { param })

export type ToolMode = { kind: 'none' } | { kind: 'auto'; parser: ToolParserName } | { kind: 'required' } | { kind: 'named'; name: string }

const NAMED_USAGE = 'Correct usage: `{"type": "function", "function": {"name": "my_function"}}`'

/** The request's tool choice, checked as vLLM checks it (§ tool_choice rules); `parser`: the server's auto parser. */
export function toolMode(b: ChatCompletionReq, parser: ToolParserName | null): ToolMode {
  const tools = b.tools
  if (tools && tools.length === 0)
    throw bad('`tools` must not be an empty array. Either provide at least one tool or omit the field entirely.', 'tools')
  const choice = b.tool_choice ?? (tools ? 'auto' : 'none')
  if (choice === 'none') return { kind: 'none' }
  if (!tools) throw bad('When using `tool_choice`, `tools` must be set.', 'tool_choice')
  if (choice === 'auto') {
    if (!parser) throw bad('"auto" tool choice requires --enable-auto-tool-choice and --tool-call-parser to be set', 'tool_choice')
    return { kind: 'auto', parser }
  }
  if (choice === 'required') return { kind: 'required' }
  const fn = (choice as { function?: unknown }).function
  if (!fn || typeof fn !== 'object')
    throw bad(`Invalid value for \`function\`: \`${JSON.stringify(fn)}\` in \`tool_choice\`! ${NAMED_USAGE}`, 'tool_choice')
  const name = (fn as { name?: unknown }).name
  if (typeof name !== 'string' || !name)
    throw bad(`Expected field \`name\` in \`function\` in \`tool_choice\`! ${NAMED_USAGE}`, 'tool_choice')
  if (!tools.some((t) => t.function.name === name))
    throw bad('The tool specified in `tool_choice` does not match any of the specified `tools`', 'tool_choice')
  return { kind: 'named', name }
}

/**
 * The JSON Schema `required` generates by (vLLM's exactly): an array of at least one
 * `{name, parameters}`, one alternative per tool, every tool's `$defs` moved to the root.
 */
export function requiredSchema(tools: Tool[]): Record<string, unknown> {
  const defs: Record<string, unknown> = {}
  const alternatives = tools.map((t) => {
    let parameters: Record<string, unknown> = t.function.parameters ?? { type: 'object', properties: {} }
    if (t.function.parameters && '$defs' in parameters) {
      const { $defs, ...rest } = parameters
      for (const [k, v] of Object.entries(($defs ?? {}) as Record<string, unknown>)) {
        if (k in defs && JSON.stringify(defs[k]) !== JSON.stringify(v))
          throw bad(`Tool definition '${k}' has multiple schemas, which is not supported.`, 'tools')
        defs[k] = v
      }
      parameters = rest
    }
    return {
      properties: { name: { type: 'string', enum: [t.function.name] }, parameters },
      required: ['name', 'parameters'],
    }
  })
  const schema: Record<string, unknown> = { type: 'array', minItems: 1, items: { type: 'object', anyOf: alternatives } }
  if (Object.keys(defs).length) schema.$defs = defs
  return schema
}

/**
 * The request with the tool choice's constraint as `structured_outputs.json` — only where the
 * request sets no constraint of its own (then its own applies, as in vLLM); a named tool without
 * parameters is not constrained.
 */
export function withToolConstraint(b: ChatCompletionReq, mode: ToolMode): ChatCompletionReq {
  if (mode.kind !== 'required' && mode.kind !== 'named') return b
  if (hasUserConstraint(b)) return b
  let json: Record<string, unknown> | null
  if (mode.kind === 'required') json = requiredSchema(b.tools!)
  else json = b.tools!.find((t) => t.function.name === mode.name)!.function.parameters ?? null
  if (!json) return b
  return { ...b, structured_outputs: { ...(b.structured_outputs ?? {}), json } }
}
