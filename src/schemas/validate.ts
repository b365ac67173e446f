import { Ajv, type ErrorObject, type ValidateFunction } from 'ajv'
import formatsModule from 'ajv-formats'
import type { TSchema } from '@sinclair/typebox'
import type { Detail } from '../core/errors.js'

// ajv-formats is CommonJS with a default export; under NodeNext the function sits on `.default`.
const addFormats = (formatsModule as unknown as { default: (ajv: Ajv) => Ajv }).default

export type Location = 'body' | 'query' | 'path'

export type Validator = (value: unknown) => Detail[] | null

function makeAjv(coerce: boolean) {
  const ajv = new Ajv({
    allErrors: true,
    strict: false,
    useDefaults: true,
    // Query strings arrive as text; repeated params (`?digests=a&digests=b`) become arrays.
    coerceTypes: coerce ? 'array' : false,
  })
  addFormats(ajv)
  return ajv
}

const bodyAjv = makeAjv(false)
const queryAjv = makeAjv(true)

/**
 * The returned function lists every problem, or null when the value is valid. The schema is compiled at its
 * first use, not here: compiling every route's schemas took ~0.6 s of CPU at each start (more in each ingest
 * worker), most of it for routes a given process never sees; a first request pays a few milliseconds instead.
 */
export function compileValidator(schema: TSchema, where: Location): Validator {
  let fn: ValidateFunction | null = null
  return (value) => {
    fn ??= (where === 'body' ? bodyAjv : queryAjv).compile(schema)
    return fn(value) ? null : toDetails(fn.errors ?? [], where)
  }
}

const TYPE_NAMES: Record<string, string> = {
  string: 'a valid string',
  integer: 'a valid integer',
  number: 'a valid number',
  boolean: 'a valid boolean',
  object: 'a valid dictionary or object',
  array: 'a valid list',
  null: 'null',
}

function pathToLoc(where: Location, instancePath: string): (string | number)[] {
  const loc: (string | number)[] = [where]
  if (instancePath === '') return loc
  for (const raw of instancePath.slice(1).split('/')) {
    const part = raw.replace(/~1/g, '/').replace(/~0/g, '~')
    loc.push(/^(0|[1-9]\d*)$/.test(part) ? Number(part) : part)
  }
  return loc
}

/**
 * ajv errors → pydantic-style entries (`loc`, `msg`, `type`), one per problem. A failed union
 * (anyOf/oneOf) is reported by what its branches say: when every branch failed on the value's
 * type, as the first non-null type's error (so `int | null` given "x" says "valid integer"); when
 * exactly one branch accepted the type but failed inside, by that branch's own errors; otherwise
 * as one "matches no allowed shape" entry.
 */
export function toDetails(errors: ErrorObject[], where: Location): Detail[] {
  const unions = errors.filter((e) => e.keyword === 'anyOf' || e.keyword === 'oneOf')
  const replaced = new Map<ErrorObject, ErrorObject[]>()
  const hidden = new Set<ErrorObject>()
  for (const u of unions) {
    const prefix = u.schemaPath + '/'
    const inner = errors.filter((e) => e.schemaPath.startsWith(prefix))
    for (const e of inner) hidden.add(e)
    const branchOf = (e: ErrorObject) => e.schemaPath.slice(prefix.length).split('/')[0]
    const typeOnly = inner.filter((e) => e.keyword === 'type' && e.instancePath === u.instancePath)
    const deeper = inner.filter((e) => !(e.keyword === 'type' && e.instancePath === u.instancePath))
    const deeperBranches = new Set(deeper.map(branchOf))
    if (deeper.length === 0 && typeOnly.length > 0) {
      replaced.set(u, [typeOnly.find((e) => e.params.type !== 'null') ?? typeOnly[0]!])
    } else if (deeperBranches.size === 1) {
      replaced.set(u, deeper)
    }
  }
  const out: Detail[] = []
  const seen = new Set<string>()
  const emit = (e: ErrorObject) => {
    const d = toDetail(e, where)
    const key = JSON.stringify(d)
    if (!seen.has(key)) {
      seen.add(key)
      out.push(d)
    }
  }
  for (const e of errors) {
    if (hidden.has(e) && !replaced.has(e)) continue
    const r = replaced.get(e)
    if (r) r.forEach(emit)
    else emit(e)
  }
  return out
}

function toDetail(e: ErrorObject, where: Location): Detail {
  const loc = pathToLoc(where, e.instancePath)
  const p = e.params as Record<string, unknown>
  switch (e.keyword) {
    case 'required':
      return { loc: [...loc, String(p.missingProperty)], msg: 'Field required', type: 'missing' }
    case 'additionalProperties':
      return { loc: [...loc, String(p.additionalProperty)], msg: 'Extra inputs are not permitted', type: 'extra_forbidden' }
    case 'type': {
      const t = String(p.type).split(',')[0]!
      return {
        loc,
        msg: `Input should be ${TYPE_NAMES[t] ?? t}`,
        type: `${t === 'integer' ? 'int' : t === 'boolean' ? 'bool' : t === 'object' ? 'dict' : t === 'array' ? 'list' : t === 'number' ? 'float' : t}_type`,
      }
    }
    case 'enum':
      return { loc, msg: `Input should be ${(p.allowedValues as unknown[]).map((v) => JSON.stringify(v)).join(' or ')}`, type: 'enum' }
    case 'const':
      return { loc, msg: `Input should be ${JSON.stringify(p.allowedValue)}`, type: 'literal_error' }
    case 'minimum':
      return { loc, msg: `Input should be greater than or equal to ${p.limit}`, type: 'greater_than_equal' }
    case 'exclusiveMinimum':
      return { loc, msg: `Input should be greater than ${p.limit}`, type: 'greater_than' }
    case 'maximum':
      return { loc, msg: `Input should be less than or equal to ${p.limit}`, type: 'less_than_equal' }
    case 'exclusiveMaximum':
      return { loc, msg: `Input should be less than ${p.limit}`, type: 'less_than' }
    case 'minItems':
      return { loc, msg: `List should have at least ${p.limit} item${p.limit === 1 ? '' : 's'}`, type: 'too_short' }
    case 'maxItems':
      return { loc, msg: `List should have at most ${p.limit} item${p.limit === 1 ? '' : 's'}`, type: 'too_long' }
    case 'minLength':
      return { loc, msg: `String should have at least ${p.limit} character${p.limit === 1 ? '' : 's'}`, type: 'string_too_short' }
    case 'maxLength':
      return { loc, msg: `String should have at most ${p.limit} character${p.limit === 1 ? '' : 's'}`, type: 'string_too_long' }
    case 'pattern':
      return { loc, msg: `String should match pattern '${p.pattern}'`, type: 'string_pattern_mismatch' }
    case 'format':
      return { loc, msg: `Input should be a valid ${p.format}`, type: `${String(p.format).replace(/-/g, '_')}_parsing` }
    case 'anyOf':
    case 'oneOf':
      return { loc, msg: 'Input does not match any of the allowed shapes', type: 'union_tag_invalid' }
    default:
      return { loc, msg: e.message ?? 'Invalid input', type: e.keyword }
  }
}
