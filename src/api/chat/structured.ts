/**
 * Structured outputs on the request side: the client's constraint from `structured_outputs`, the
 * legacy `guided_*` fields and `response_format` (which overrides the member it maps to), checked
 * with vLLM's messages before anything reaches the engine, and turned into the engine's Constraint.
 */
import { Ajv } from 'ajv'
import type { ChatCompletionReq, SamplingReq, StructuredOutputs } from '../../schemas/chat.js'
import type { Constraint, ConstraintKind } from '../../inference/protocol.js'
import { DomainError } from '../../core/errors.js'

/** What the constraint is read from: the fields every request has, and chat's tool choice when there is one. */
type ConstraintReq = SamplingReq & Partial<Pick<ChatCompletionReq, 'tool_choice'>>

const KINDS: readonly ConstraintKind[] = ['json', 'regex', 'choice', 'grammar', 'json_object', 'structural_tag']
const present = (v: unknown) => v !== undefined && v !== null
const bad = (message: string, param: string) => new DomainError(400, message, { param })

/** Meta-schema checks only (is this a JSON Schema at all); xgrammar decides what it supports. */
const metaAjv = new Ajv({ strict: false, logger: false, validateSchema: true })

/** structured_outputs with the legacy guided_* fields folded in (as vLLM 0.11 did before removing them). */
function requested(b: ConstraintReq): StructuredOutputs | null {
  const legacy: StructuredOutputs = {}
  if (present(b.guided_json)) legacy.json = b.guided_json
  if (present(b.guided_regex)) legacy.regex = b.guided_regex
  if (present(b.guided_choice)) legacy.choice = b.guided_choice
  if (present(b.guided_grammar)) legacy.grammar = b.guided_grammar
  if (present(b.guided_whitespace_pattern)) legacy.whitespace_pattern = b.guided_whitespace_pattern
  if (present(b.guided_decoding_backend)) legacy._backend = b.guided_decoding_backend
  if (!Object.keys(legacy).length) return b.structured_outputs ?? null
  return { ...legacy, ...(b.structured_outputs ?? {}) }
}

/** response_format onto structured_outputs: it replaces the member it maps to. */
function withResponseFormat(so: StructuredOutputs | null, b: ConstraintReq): StructuredOutputs | null {
  const rf = b.response_format
  if (!rf || !rf.type || rf.type === 'text') return so
  if (rf.type === 'json_object') return { ...(so ?? {}), json_object: true }
  if (rf.type === 'structural_tag') return { ...(so ?? {}), structural_tag: JSON.stringify(rf) }
  if (!rf.json_schema) throw bad("When response_format type is 'json_schema', the 'json_schema' field must be provided.", 'response_format')
  const schema = rf.json_schema.schema
  return present(schema) ? { ...(so ?? {}), json: schema } : (so ?? {})
}

/** The constraint members given, in vLLM's order. */
function kindsOf(so: StructuredOutputs): ConstraintKind[] {
  return KINDS.filter((k) => present(so[k]))
}

/** What the client asked for, merged (legacy fields, structured_outputs, response_format); null: nothing. */
function merged(b: ConstraintReq): StructuredOutputs | null {
  const so = requested(b)
  if (so) {
    const basic = (['json', 'regex', 'choice'] as const).filter((k) => present(so[k]))
    if (basic.length > 1)
      throw bad("You can only use one kind of constraints for structured outputs ('json', 'regex' or 'choice').", 'structured_outputs')
  }
  return withResponseFormat(so, b)
}

/** Whether the client asked for a constraint of its own (any of structured_outputs, guided_*, response_format). */
export function hasUserConstraint(b: ConstraintReq): boolean {
  const so = merged(b)
  return so !== null && kindsOf(so).length > 0
}

/**
 * vLLM's checks of the client's constraint, before anything is generated: one kind exactly, no empty
 * grammar or JSON text, a JSON Schema that is one, and not together with a named tool. Call it on the
 * request as the client sent it (before a tool_choice is turned into a constraint).
 */
export function checkStructuredOutputs(b: ConstraintReq): void {
  const so = merged(b)
  if (!so) return
  const kinds = kindsOf(so)
  if (kinds.length && b.tool_choice && typeof b.tool_choice === 'object')
    throw bad('You can only either use constraints for structured outputs or tools, not both.', 'tool_choice')
  const shown = () => JSON.stringify(Object.fromEntries(KINDS.map((k) => [k, so[k] ?? null])))
  if (kinds.length > 1)
    throw bad(`You can only use one kind of structured outputs constraint but multiple are specified: ${shown()}`, 'structured_outputs')
  if (!kinds.length)
    throw bad(`You must use one kind of structured outputs constraint but none are specified: ${shown()}`, 'structured_outputs')
  if (so._backend && !['auto', 'xgrammar'].includes(so._backend))
    throw bad(
      `Request-level structured output backend selection is not supported. The request specified '${so._backend}', but this server uses 'xgrammar'. Remove the backend from the request.`,
      'structured_outputs',
    )
  checkMember(so, kinds[0]!)
}

function checkMember(so: StructuredOutputs, kind: ConstraintKind): void {
  const p = `structured_outputs`
  switch (kind) {
    case 'json':
      if (typeof so.json === 'string' && !so.json.trim()) throw bad('structured_outputs.json cannot be an empty string', p)
      checkSchema(jsonSchemaOf(so.json!))
      return
    case 'grammar':
      if (!so.grammar!.trim()) throw bad('structured_outputs.grammar cannot be an empty string', p)
      return
    case 'regex':
      if (so.regex!.includes('\u0000')) throw bad('structured_outputs.regex cannot contain a NUL character', p)
      return
    case 'choice':
      if (!so.choice!.length) throw bad(`Choice '[]' cannot be an empty list`, p)
      return
    case 'json_object':
      if (so.json_object !== true) throw bad('structured_outputs.json_object must be true when given', p)
      return
    case 'structural_tag':
      try {
        JSON.parse(so.structural_tag!)
      } catch {
        throw bad('Invalid structural tag specification.', p)
      }
  }
}

/** The schema of a `json` member: an object, or JSON text of one. */
function jsonSchemaOf(json: string | Record<string, unknown>): unknown {
  if (typeof json !== 'string') return json
  try {
    return JSON.parse(json)
  } catch {
    throw bad('Invalid JSON grammar specification.', 'structured_outputs')
  }
}

function checkSchema(schema: unknown): void {
  if (typeof schema === 'boolean') return
  if (typeof schema !== 'object' || schema === null || Array.isArray(schema))
    throw bad('Invalid JSON grammar specification. A JSON Schema is an object or a boolean.', 'structured_outputs')
  let ok: boolean
  try {
    ok = metaAjv.validateSchema(schema) as boolean
  } catch (e) {
    throw bad(`Invalid JSON grammar specification. ${(e as Error).message}`, 'structured_outputs')
  }
  if (!ok)
    throw bad(`Invalid JSON grammar specification. ${metaAjv.errorsText(metaAjv.errors, { dataVar: 'schema' })}`, 'structured_outputs')
}

/** Every object schema with properties but no word on others gets `additionalProperties: false`. */
function closeObjects(schema: unknown): unknown {
  if (Array.isArray(schema)) return schema.map(closeObjects)
  if (typeof schema !== 'object' || schema === null) return schema
  const out: Record<string, unknown> = {}
  for (const [k, v] of Object.entries(schema))
    out[k] = k === 'properties' || k === '$defs' || k === 'definitions' ? mapValues(v) : closeObjects(v)
  if ('properties' in out && !('additionalProperties' in out)) out.additionalProperties = false
  return out
}

function mapValues(v: unknown): unknown {
  if (typeof v !== 'object' || v === null) return v
  return Object.fromEntries(Object.entries(v).map(([k, x]) => [k, closeObjects(x)]))
}

/**
 * The constraint a (normalised) request decodes under, or null. It reads structured_outputs,
 * guided_* and response_format as checkStructuredOutputs left them; request normalisation may have
 * put a tool_choice's schema into `structured_outputs.json` by then.
 */
export function constraintOf(b: ConstraintReq): Constraint | null {
  const so = merged(b)
  if (!so) return null
  const kind = kindsOf(so)[0]
  if (!kind) return null
  const anyWhitespace = so.disable_any_whitespace !== true
  switch (kind) {
    case 'json': {
      let schema = jsonSchemaOf(so.json!)
      if (so.disable_additional_properties) schema = closeObjects(schema)
      return { kind, spec: JSON.stringify(schema), anyWhitespace }
    }
    case 'choice':
      return { kind, spec: JSON.stringify(so.choice), anyWhitespace }
    case 'json_object':
      return { kind, spec: '', anyWhitespace }
    default:
      return { kind, spec: so[kind] as string, anyWhitespace }
  }
}
