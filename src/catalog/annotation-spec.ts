import { Ajv2020, type ValidateFunction } from 'ajv/dist/2020.js'
import { DomainError } from '../core/errors.js'

/**
 * Annotation specs (docs/feedback.md): the object a `wandb.annotation.<name>` feedback names, whose
 * `field_schema` (a JSON Schema) the feedback's `payload.value` must satisfy. Weave validates with
 * Python's `jsonschema`, which picks the newest draft (2020-12) unless the schema says otherwise and
 * does not check `format`s: ajv's 2020 build with formats off and unknown keywords allowed does the same.
 */
const ajv = new Ajv2020({ strict: false, validateFormats: false, allErrors: false })

/** Compiled schemas by their JSON text: one spec is typically used for many feedback rows. */
const compiled = new Map<string, ValidateFunction>()
const MAX_COMPILED = 256

const invalidSpec = (ref: string) => new DomainError(400, `Annotation ref ${ref} is not a valid annotation spec`)

/** The spec's fields as Weave's AnnotationSpec model reads them; anything else in the object is ignored, as there. */
function fieldSchemaOf(spec: unknown, ref: string): Record<string, unknown> {
  if (!spec || typeof spec !== 'object' || Array.isArray(spec)) throw invalidSpec(ref)
  const s = spec as Record<string, unknown>
  const nullableString = (v: unknown) => v === undefined || v === null || typeof v === 'string'
  if (!nullableString(s.name) || !nullableString(s.description)) throw invalidSpec(ref)
  if (s.unique_among_creators !== undefined && typeof s.unique_among_creators !== 'boolean') throw invalidSpec(ref)
  if (s.op_scope !== undefined && s.op_scope !== null && !(Array.isArray(s.op_scope) && s.op_scope.every((x) => typeof x === 'string')))
    throw invalidSpec(ref)
  const schema = s.field_schema ?? {}
  if (typeof schema !== 'object' || Array.isArray(schema)) throw invalidSpec(ref)
  return schema as Record<string, unknown>
}

function validatorFor(schema: Record<string, unknown>, ref: string): ValidateFunction {
  const key = JSON.stringify(schema)
  let fn = compiled.get(key)
  if (fn) return fn
  try {
    fn = ajv.compile(schema)
  } catch {
    // An invalid JSON Schema (Weave: jsonschema's SchemaError) makes the spec unusable.
    throw invalidSpec(ref)
  } finally {
    // ajv keeps every schema it compiled; the map below is the only cache wanted.
    ajv.removeSchema(schema)
  }
  if (compiled.size >= MAX_COMPILED) compiled.delete(compiled.keys().next().value!)
  compiled.set(key, fn)
  return fn
}

/** Throws 400 unless `value` satisfies the spec's `field_schema`. */
export function checkAnnotationValue(spec: unknown, ref: string, value: unknown): void {
  const validate = validatorFor(fieldSchemaOf(spec, ref), ref)
  if (!validate(value)) throw new DomainError(400, 'Feedback payload does not match annotation spec')
}

/**
 * An annotation's `payload.value` must satisfy the `field_schema` of the spec its `annotation_ref` names
 * (the rules already checked the ref is an object of the row's project). An unknown spec version is 404,
 * a deleted one 400, as in Weave. Each spec is read once per batch (`read`: the value at a ref, null if deleted).
 */
export async function checkAnnotationValues(
  reqs: { annotation_ref?: string | null; payload: Record<string, unknown> }[],
  read: (ref: string) => Promise<unknown>,
): Promise<void> {
  const specs = new Map<string, unknown>()
  for (const req of reqs) {
    const ref = req.annotation_ref
    if (!ref) continue
    if (!specs.has(ref)) specs.set(ref, await read(ref))
    const spec = specs.get(ref)
    if (spec === null) throw new DomainError(400, `Annotation ref ${ref} not found`)
    checkAnnotationValue(spec, ref, req.payload.value)
  }
}
