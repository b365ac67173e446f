import t from 'tap'
import fc from 'fast-check'
import zlib from 'node:zlib'
import { encodeParts } from '../src/calls/ingest/encode.js'
import { RawJson } from '../src/calls/ingest/raw-json.js'
import type { CallPart } from '../src/calls/model.js'
import { walRecord } from '../src/calls/storage/wal.js'

/**
 * The ingest workers encode a batch (encodeParts: the text built as one string, raw values spliced in as bytes at
 * marks found by character offset in ASCII text and by byte offset in other text) and frame it as a log record
 * (walRecord). The record is checked here against its definition, not against the encoder: a `u32 length | u32 crc32`
 * header (crc32 from node:zlib), and a payload that parses to each part's fields, an exact raw value as the string of
 * its bytes and another as its value.
 */

// ASCII strings, and strings with other characters (lone surrogates included: the encoder makes them well-formed).
const ascii = fc.oneof(fc.string(), fc.constantFrom('', '\u0001', '"\\', '\x7f'))
const unicode = fc.oneof(fc.string({ unit: 'binary' }), fc.constantFrom('é', '日本', '😀', '\ud800'))
// A raw value's bytes: JSON text as a client sends it, compact (exact) or with spaces.
const raw = fc.tuple(fc.jsonValue({ maxDepth: 3 }), fc.boolean()).map(([v, exact]) => {
  const obj = { v }
  return new RawJson(Buffer.from(exact ? JSON.stringify(obj) : JSON.stringify(obj, null, 1)), [], exact)
})
const partOf = (text: fc.Arbitrary<string>) =>
  fc.record(
    {
      kind: fc.constantFrom('start', 'end'),
      project_id: text,
      id: text,
      op_name: text,
      started_us: fc.integer({ min: 0, max: 2 ** 52 }),
      inputs: fc.option(raw, { nil: undefined }),
      output: fc.option(fc.oneof(raw, text), { nil: undefined }),
    },
    { requiredKeys: ['kind', 'project_id', 'id', 'started_us'] },
  ) as fc.Arbitrary<CallPart>
const batch = fc.oneof(
  fc.array(partOf(ascii), { minLength: 1, maxLength: 6 }),
  fc.array(partOf(fc.oneof(ascii, unicode)), { minLength: 1, maxLength: 6 }),
)

/** JSON text with every object's keys sorted: the encoder writes fields in its own order. */
const canonical = (v: unknown) =>
  JSON.stringify(v, (_k, x: unknown) =>
    x && typeof x === 'object' && !Array.isArray(x) ? Object.fromEntries(Object.entries(x).sort(([a], [b]) => (a < b ? -1 : 1))) : x,
  )

const wellFormed = (s: string) => (s as unknown as { toWellFormed(): string }).toWellFormed()

/** What a part's payload must parse to, built from the part alone. */
function expected(p: CallPart): Record<string, unknown> {
  const out: Record<string, unknown> = {}
  for (const [k, v] of Object.entries(p)) {
    if (v === undefined) continue
    if (v instanceof RawJson) {
      const s = Buffer.from(v.bytes).toString('utf8')
      out[k] = v.exact ? s : JSON.parse(s)
    } else out[k] = typeof v === 'string' ? wellFormed(v) : v
  }
  return out
}

t.test('a record is its header and its parts, whatever their text', async (t) => {
  let runs = 0
  let nonAscii = 0
  fc.assert(
    fc.property(batch, (parts) => {
      const record = walRecord(encodeParts(parts))
      const payload = record.subarray(8)
      if (parts.some((p) => Object.values(p).some((v) => typeof v === 'string' && /[^\x00-\x7f]/.test(v)))) nonAscii++
      runs++
      return (
        record.readUInt32LE(0) === payload.length &&
        record.readUInt32LE(4) === zlib.crc32(payload) &&
        record.buffer.byteLength === record.length &&
        canonical(JSON.parse(payload.toString('utf8'))) === canonical(parts.map(expected))
      )
    }),
    { numRuns: 400, seed: 0x5eed },
  )
  t.ok(nonAscii > 50 && runs - nonAscii > 50, `both paths taken: ${nonAscii} of ${runs} batches with non-ASCII text`)
})
