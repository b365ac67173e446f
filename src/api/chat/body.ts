/**
 * Request bodies of the chat routes, read from the raw bytes so that integer fields can be
 * range-checked on the number the client wrote rather than the double JSON.parse made of it:
 * `seed` must fit a signed 64-bit integer, and 2^63 - 1 and 2^63 are the same double. Node 20's
 * JSON.parse has no access to a number's source text (the reviver's `context.source` came in
 * Node 21), so the text is scanned — only when it holds a run of 16 or more digits, since every
 * integer literal of 15 digits or fewer is below 2^53 and exact as a double.
 */
import type { TSchema } from '@sinclair/typebox'
import { parseJson } from '../../core/json.js'
import { validationError, type Detail } from '../../core/errors.js'
import { compileValidator } from '../../schemas/validate.js'
import type { Ctx } from '../route.js'

export type ExactRanges = Record<string, readonly [min: bigint, max: bigint]>

export const INT64: readonly [bigint, bigint] = [-(2n ** 63n), 2n ** 63n - 1n]

/** Top-level integer fields checked on their exact value, as vLLM's pydantic model bounds them. */
export const SEED_RANGE: ExactRanges = { seed: INT64 }

const LONG_DIGITS = /\d{16}/
const NUMBER = /-?(?:0|[1-9]\d*)(?:\.\d+)?(?:[eE][+-]?\d+)?/y

/** Index just past the string literal starting at `i` (text is valid JSON). */
function stringEnd(text: string, i: number): number {
  let j = i + 1
  while (text[j] !== '"') j += text[j] === '\\' ? 2 : 1
  return j + 1
}

/** The source text of the number literals at the top level of a JSON object, by key (the last one wins, as in JSON.parse). */
export function topLevelNumbers(text: string, keys: ReadonlySet<string>): Map<string, string> {
  const out = new Map<string, string>()
  let depth = 0
  let key: string | null = null
  let inValue = false
  for (let i = 0; i < text.length;) {
    const c = text[i]!
    if (c === '"') {
      const end = stringEnd(text, i)
      if (depth === 1 && !inValue) key = JSON.parse(text.slice(i, end)) as string
      i = end
      continue
    }
    if (c === '{' || c === '[') depth++
    else if (c === '}' || c === ']') depth--
    else if (depth === 1 && c === ':') inValue = true
    else if (depth === 1 && c === ',') inValue = false
    else if (depth === 1 && inValue && (c === '-' || (c >= '0' && c <= '9'))) {
      NUMBER.lastIndex = i
      const m = NUMBER.exec(text)![0]
      if (key !== null && keys.has(key)) out.set(key, m)
      i += m.length
      continue
    }
    i++
  }
  return out
}

/** Problems with the exact values of the ranged fields (integer literals only; others were checked as doubles). */
export function exactRangeProblems(text: string, ranges: ExactRanges): Detail[] {
  if (!LONG_DIGITS.test(text)) return []
  const problems: Detail[] = []
  for (const [key, literal] of topLevelNumbers(text, new Set(Object.keys(ranges)))) {
    if (!/^-?\d+$/.test(literal)) continue
    const [min, max] = ranges[key]!
    const v = BigInt(literal)
    if (v > max) problems.push({ loc: ['body', key], msg: `Input should be less than or equal to ${max}`, type: 'less_than_equal' })
    if (v < min) problems.push({ loc: ['body', key], msg: `Input should be greater than or equal to ${min}`, type: 'greater_than_equal' })
  }
  return problems
}

/**
 * A reader of a route's JSON body (the route declares `rawBody`): parsed and validated against the
 * schema as the HTTP layer would, then the ranged integers checked on their text.
 */
export function jsonBody<T>(schema: TSchema, ranges: ExactRanges): (ctx: Ctx) => T {
  const validate = compileValidator(schema, 'body')
  return (ctx) => {
    const raw = ctx.rawBody ?? Buffer.alloc(0)
    const body = parseJson(raw)
    const problems = validate(body)
    if (problems) throw validationError(problems)
    const exact = exactRangeProblems(raw.toString('utf8'), ranges)
    if (exact.length) throw validationError(exact)
    return body as T
  }
}
