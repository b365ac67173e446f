import fc from 'fast-check'

/**
 * Property-based fuzzing of HTTP routes from their OpenAPI description: a JSON Schema → fast-check arbitrary
 * converter for request bodies and query parameters, and the mutations that turn a valid request into hostile
 * ones. The runner that sends them lives in fuzz-runner.ts.
 */
export type Schema = Record<string, any>

/** Arbitraries for properties known by name (project ids, seeded call ids), so valid requests reach the handler. */
export type Hints = Record<string, fc.Arbitrary<unknown>>

const MAX_DEPTH = 5

/** Values that validators, SQL builders, path resolvers and ref parsers must all treat as plain data. */
export const HOSTILE_STRINGS = [
  'weave:///../../etc/passwd',
  'weave:///fuzz/p1/object/../../x:latest',
  'weave:///fuzz/p1/object/seed:*',
  'weave:///%2e%2e/%2e%2e/object/x:1',
  "x'; DROP TABLE calls; --",
  '" OR 1=1 --',
  "') UNION SELECT * FROM duckdb_tables() --",
  '%00',
  'a\u0000b',
  '\u0000',
  '../../../../etc/passwd',
  '..',
  '$..*',
  'inputs.$[?(@.x)]',
  '${jndi:ldap://x/a}',
  '{{7*7}}',
  '\u202e\u202dRTL',
  '\ud800',
  '\udfff\ud800',
  '🙂'.repeat(50),
  'a'.repeat(5000),
  '',
  ' ',
  '\r\nX-Injected: 1',
  'null',
  '*',
  '%',
  '\\',
]

/** Replacements of the wrong type (or an absurd value of the right one) for any field. */
const WRONG_VALUES: unknown[] = [
  null,
  true,
  0,
  -1,
  -9007199254740993,
  2 ** 63,
  1e308,
  -1e308,
  0.5,
  '',
  'not-a-number',
  [],
  [null],
  {},
  { $expr: { $eq: [1, 1] } },
  { __proto__: { polluted: true } },
]

/** JSON text that JSON.stringify never makes: numbers past double range, long digit strings. */
const RAW_NUMBERS = ['1e999', '-1e999', '123456789012345678901234567890', '-0', '1E-400']

/** The arbitrary of values `schema` accepts (approximately: formats and patterns are honoured where cheap). */
export function arbitraryOf(schema: Schema | boolean | undefined, hints: Hints, depth = 0, name?: string): fc.Arbitrary<unknown> {
  if (name !== undefined && hints[name]) return hints[name]!
  if (schema === undefined || schema === true || (typeof schema === 'object' && Object.keys(schema).length === 0)) {
    return fc.jsonValue({ maxDepth: 2 })
  }
  if (schema === false) return fc.constant(null)
  if ('const' in schema) return fc.constant(schema.const)
  if (Array.isArray(schema.enum)) return fc.constantFrom(...(schema.enum as unknown[]))
  const alts = schema.anyOf ?? schema.oneOf
  if (Array.isArray(alts)) {
    if (depth >= MAX_DEPTH) return arbitraryOf(alts.find((a: Schema) => a.type === 'null') ?? alts[0], hints, depth + 1)
    return fc.oneof(...alts.map((a: Schema) => arbitraryOf(a, hints, depth + 1)))
  }
  if (Array.isArray(schema.allOf)) return arbitraryOf(Object.assign({}, ...schema.allOf), hints, depth, name)
  if (Array.isArray(schema.type))
    return fc.oneof(...schema.type.map((t: string) => arbitraryOf({ ...schema, type: t }, hints, depth, name)))
  switch (schema.type) {
    case 'string':
      return stringOf(schema)
    case 'integer':
      return fc.integer({ min: Math.max(schema.minimum ?? -1000, -(2 ** 31)), max: Math.min(schema.maximum ?? 1000, 2 ** 31) })
    case 'number':
      return fc.double({ min: schema.minimum ?? -1e6, max: schema.maximum ?? 1e6, noNaN: true, noDefaultInfinity: true })
    case 'boolean':
      return fc.boolean()
    case 'null':
      return fc.constant(null)
    case 'array': {
      const min = schema.minItems ?? 0
      const max = Math.max(min, Math.min(schema.maxItems ?? 3, 3))
      if (depth >= MAX_DEPTH && min === 0) return fc.constant([])
      return fc.array(arbitraryOf(schema.items, hints, depth + 1), { minLength: min, maxLength: max })
    }
    case 'object':
      return objectOf(schema, hints, depth)
    default:
      return schema.properties ? objectOf(schema, hints, depth) : fc.jsonValue({ maxDepth: 2 })
  }
}

function stringOf(schema: Schema): fc.Arbitrary<string> {
  const min = schema.minLength ?? 0
  const max = Math.min(schema.maxLength ?? 40, Math.max(min, 40))
  if (typeof schema.format === 'string' && schema.format.includes('date-time')) {
    return fc.date({ min: new Date('2000-01-01'), max: new Date('2100-01-01'), noInvalidDate: true }).map((d) => d.toISOString())
  }
  if (typeof schema.pattern === 'string') {
    try {
      const re = new RegExp(schema.pattern)
      // fast-check 4 has no `.noShrink()` method (calling it threw, and every pattern fell back to plain strings).
      return fc.noShrink(fc.stringMatching(re).filter((s) => s.length >= min && s.length <= (schema.maxLength ?? Infinity)))
    } catch {
      // A pattern JavaScript cannot compile: plain strings, which the server rejects as it should.
    }
  }
  return fc.string({ minLength: min, maxLength: max, unit: 'grapheme' })
}

function objectOf(schema: Schema, hints: Hints, depth: number): fc.Arbitrary<unknown> {
  const props: Record<string, fc.Arbitrary<unknown>> = {}
  const required: string[] = schema.required ?? []
  for (const [k, s] of Object.entries<Schema>(schema.properties ?? {})) {
    // Optional fields past the depth limit are left out rather than generated ever deeper.
    if (depth >= MAX_DEPTH && !required.includes(k)) continue
    props[k] = arbitraryOf(s, hints, depth + 1, k)
  }
  const fixed = fc.record(props, { requiredKeys: required.filter((k) => k in props) })
  const extraSchema =
    schema.additionalProperties && typeof schema.additionalProperties === 'object'
      ? schema.additionalProperties
      : schema.patternProperties
        ? Object.values<Schema>(schema.patternProperties)[0]
        : undefined
  if (!extraSchema || depth >= MAX_DEPTH) return fixed
  const key = fc.string({ minLength: 1, maxLength: 12 })
  const extra = fc.dictionary(key, arbitraryOf(extraSchema, hints, depth + 1), { maxKeys: 3 })
  return fc.tuple(extra, fixed).map(([e, f]) => ({ ...e, ...(f as object) }))
}

/** One way to spoil a request. */
export const BODY_MUTATIONS = [
  'valid',
  'wrong-type',
  'drop-field',
  'extra-field',
  'hostile-string',
  'huge-number',
  'deep-nesting',
  'long-string',
  'lone-surrogate',
  'invalid-utf8',
  'nul',
  'truncated',
  'not-json',
  'content-type',
  'absurd-headers',
] as const
export type BodyMutation = (typeof BODY_MUTATIONS)[number]

/** The random choices a mutation makes, drawn by fast-check so that a seed replays a run exactly. */
export interface Dice {
  pick: number
  pick2: number
  hostile: string
}

export const diceArb: fc.Arbitrary<Dice> = fc.record({
  pick: fc.nat(),
  pick2: fc.nat(),
  hostile: fc.constantFrom(...HOSTILE_STRINGS),
})

/** A request body and the headers that go with it. */
export interface BodyCase {
  body: string | Buffer
  headers: Record<string, string>
}

const CONTENT_TYPES = [
  'text/plain',
  'application/x-www-form-urlencoded',
  'multipart/form-data; boundary=xyz',
  'application/json; charset=utf-16',
  'application/x-protobuf',
  '',
  'a'.repeat(2000),
]

type Path = (string | number)[]

/** Every path to a value inside `v`, the root included. */
function paths(v: unknown, at: Path = [], out: Path[] = []): Path[] {
  out.push(at)
  if (out.length > 400) return out
  if (Array.isArray(v)) v.forEach((x, i) => paths(x, [...at, i], out))
  else if (v && typeof v === 'object') for (const [k, x] of Object.entries(v)) paths(x, [...at, k], out)
  return out
}

function setAt(v: unknown, p: Path, value: unknown): unknown {
  if (p.length === 0) return value
  const copy: any = Array.isArray(v) ? [...v] : { ...(v as object) }
  copy[p[0]!] = setAt(copy[p[0]!], p.slice(1), value)
  return copy
}

function getAt(v: unknown, p: Path): unknown {
  return p.reduce<any>((x, k) => (x == null ? undefined : x[k]), v)
}

function deleteAt(v: unknown, p: Path): unknown {
  if (p.length === 0) return undefined
  if (p.length === 1) {
    if (Array.isArray(v)) return v.filter((_, i) => i !== p[0])
    const { [p[0]!]: _, ...rest } = v as Record<string, unknown>
    return rest
  }
  const copy: any = Array.isArray(v) ? [...v] : { ...(v as object) }
  copy[p[0]!] = deleteAt(copy[p[0]!], p.slice(1))
  return copy
}

const MARK = '__FUZZ_RAW__'

/** JSON text of `v` with the leaf at `p` replaced by raw JSON text (for what JSON.stringify cannot write). */
function withRaw(v: unknown, p: Path, raw: string): string {
  return JSON.stringify(setAt(v, p, MARK)).replace(JSON.stringify(MARK), raw)
}

function nested(depth: number): string {
  return '['.repeat(depth) + ']'.repeat(depth)
}

/** `value` (a valid request body) spoiled as `kind` says. */
// house: long because one switch over every mutation reads better than fifteen tiny functions
export function mutateBody(value: unknown, kind: BodyMutation, d: Dice): BodyCase {
  const json = { 'content-type': 'application/json' }
  const all = paths(value)
  const at = all[d.pick % all.length]!
  const leaves = all.filter((p) => {
    const x = getAt(value, p)
    return x === null || typeof x !== 'object'
  })
  const leaf = leaves.length ? leaves[d.pick % leaves.length]! : at
  const strings = all.filter((p) => typeof getAt(value, p) === 'string')
  const str = strings.length ? strings[d.pick % strings.length]! : leaf
  const text = JSON.stringify(value) ?? 'null'
  switch (kind) {
    case 'valid':
      return { body: text, headers: json }
    case 'wrong-type':
      return { body: JSON.stringify(setAt(value, at, WRONG_VALUES[d.pick2 % WRONG_VALUES.length])) ?? 'null', headers: json }
    case 'drop-field':
      return { body: JSON.stringify(deleteAt(value, at.length ? at : [Object.keys(value ?? {})[0] ?? 'x'])) ?? '{}', headers: json }
    case 'extra-field': {
      const obj = all.filter((p) => {
        const x = getAt(value, p)
        return x !== null && typeof x === 'object' && !Array.isArray(x)
      })
      const p = obj.length ? obj[d.pick % obj.length]! : []
      const key = ['__proto__', 'constructor', 'zz_unknown', d.hostile, '$where'][d.pick2 % 5]!
      return { body: withRaw(value, [...p, MARK + 'k'], '1').replace(JSON.stringify(MARK + 'k'), JSON.stringify(key)), headers: json }
    }
    case 'hostile-string':
      return { body: JSON.stringify(setAt(value, str, d.hostile)), headers: json }
    case 'huge-number': {
      const nums = all.filter((p) => typeof getAt(value, p) === 'number')
      const p = nums.length ? nums[d.pick % nums.length]! : leaf
      return { body: withRaw(value, p, RAW_NUMBERS[d.pick2 % RAW_NUMBERS.length]!), headers: json }
    }
    case 'deep-nesting':
      return { body: withRaw(value, at, nested([50, 2000, 200_000][d.pick2 % 3]!)), headers: json }
    case 'long-string':
      return { body: JSON.stringify(setAt(value, str, 'x'.repeat([10_000, 1_000_000][d.pick2 % 2]!))), headers: json }
    case 'lone-surrogate':
      return { body: withRaw(value, str, '"a\\ud800b\\udc00\\udfff"'), headers: json }
    case 'invalid-utf8': {
      const raw = Buffer.from(withRaw(value, str, '"ab__X__cd"'))
      const i = raw.indexOf('__X__')
      const bad = [Buffer.from([0xff, 0xfe]), Buffer.from([0xc3]), Buffer.from([0xed, 0xa0, 0x80])][d.pick2 % 3]!
      return { body: Buffer.concat([raw.subarray(0, i), bad, raw.subarray(i + 5)]), headers: json }
    }
    case 'nul':
      return d.pick2 % 2
        ? { body: JSON.stringify(setAt(value, str, 'a\u0000b')), headers: json }
        : { body: Buffer.concat([Buffer.from(text.slice(0, -1)), Buffer.from([0]), Buffer.from(text.slice(-1))]), headers: json }
    case 'truncated':
      return { body: text.slice(0, d.pick2 % Math.max(1, text.length)), headers: json }
    case 'not-json':
      return { body: ['', 'null', '[]', '"x"', '1e999', '{', '{"a":1,"a":2}', '\u0000', 'undefined', '{,}'][d.pick2 % 10]!, headers: json }
    case 'content-type':
      return { body: text, headers: { 'content-type': CONTENT_TYPES[d.pick2 % CONTENT_TYPES.length]! } }
    case 'absurd-headers':
      return { body: text, headers: { ...json, ...absurdHeaders(d.pick2) } }
  }
}

/** Headers a client should not send; each still gets an answer. (Underscored names are tested on their own.) */
function absurdHeaders(pick: number): Record<string, string> {
  const options: Record<string, string>[] = [
    { 'x-request-id': 'r'.repeat(2000) },
    { 'x-request-id': "../../%00'; DROP" },
    { authorization: 'Basic ' + 'A'.repeat(3000) },
    { authorization: 'Basic !!!not-base64' },
    { authorization: 'Bearer ' },
    { authorization: 'Digest x' },
    { 'content-encoding': 'gzip' },
    { 'content-encoding': 'br, zstd, x-unknown' },
    { accept: 'text/event-stream;q=0' },
    { 'openai-project': "'; DROP TABLE calls; --" },
    { 'x-forwarded-for': '::ffff:1.2.3.4, 999.1.1.1, garbage' },
    // 30 more headers (fetch adds ~10): under uWebSockets' silent limit (see hostile-clients.test.ts for past it).
    Object.fromEntries(Array.from({ length: 30 }, (_, i) => [`x-junk-${i}`, 'v'.repeat(20)])),
    { 'x-huge': 'h'.repeat(60_000) },
  ]
  return options[pick % options.length]!
}

/** Query-string mutations for GET/DELETE routes. */
export const QUERY_MUTATIONS = ['valid', 'wrong-type', 'hostile', 'repeated', 'unknown', 'bad-encoding', 'huge'] as const
export type QueryMutation = (typeof QUERY_MUTATIONS)[number]

export function mutateQuery(params: Record<string, unknown>, kind: QueryMutation, d: Dice): string {
  const keys = Object.keys(params)
  const k = keys.length ? keys[d.pick % keys.length]! : 'x'
  const q = new URLSearchParams()
  for (const [key, v] of Object.entries(params)) if (v !== undefined) q.append(key, typeof v === 'string' ? v : JSON.stringify(v))
  switch (kind) {
    case 'valid':
      break
    case 'wrong-type':
      q.set(k, ['abc', '-1', '1.5', 'true', '[]', '{}', ''][d.pick2 % 7]!)
      break
    case 'hostile':
      q.set(k, d.hostile)
      break
    case 'repeated':
      q.append(k, q.get(k) ?? '1')
      q.append(k, '2')
      break
    case 'unknown':
      q.append('zz_unknown', d.hostile)
      break
    case 'bad-encoding':
      return q.toString() + `&${k}=%zz%E0%A4%A`
    case 'huge':
      q.set(k, ['99999999999999999999999', '1e999', '-99999999999', 'x'.repeat(4000)][d.pick2 % 4]!)
      break
  }
  return q.toString()
}

/** A path parameter as sent: usually valid, sometimes hostile (percent-encoded), sometimes badly encoded. */
export function pathParam(valid: string, d: Dice, spoil: boolean): string {
  if (!spoil) return encodeSegment(valid)
  const options = [encodeSegment(d.hostile), '%zz', '%E0%A4%A', '..', '.', encodeURIComponent('x'.repeat(3000)), '%00', '%2F']
  return options[d.pick2 % options.length] || '_'
}

/** Percent-encoding of a path segment; a lone surrogate (which encodeURIComponent refuses) as its invalid UTF-8. */
export function encodeSegment(v: string): string {
  try {
    return encodeURIComponent(v)
  } catch {
    return [...v].map((ch) => (/[\ud800-\udfff]/.test(ch) ? '%ED%A0%80' : encodeURIComponent(ch))).join('')
  }
}
