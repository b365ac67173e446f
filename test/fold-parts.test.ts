import t from 'tap'
import fc from 'fast-check'
import type { CallPart } from '../src/calls/model.js'
import { foldParts } from '../src/calls/ingest/parts.js'
import { RawJson } from '../src/calls/ingest/raw-json.js'

// The fold by its definition, field by field and independent of the code under test: for each call (project, id), in
// order of first appearance, every field takes the value of the call's last part that has one (not null, not
// undefined), the ref lists are the union of the parts' lists in order of first appearance, deleted_us is the latest
// delete, and a call of several parts is of kind 'merged'.
const PLAIN = [
  'trace_id',
  'parent_id',
  'thread_id',
  'turn_id',
  'op_name',
  'display_name',
  'started_us',
  'ended_us',
  'attributes',
  'inputs',
  'output',
  'summary',
  'exception',
  'user_id',
  'run_id',
  'run_step',
  'run_step_end',
  'usage',
] as const

type Expected = Record<string, unknown>

function byDefinition(parts: CallPart[]): Expected[] {
  const calls = new Map<string, CallPart[]>()
  for (const p of parts) {
    const key = JSON.stringify([p.project_id, p.id])
    calls.set(key, [...(calls.get(key) ?? []), p])
  }
  return [...calls.values()].map((ps) => {
    const e: Expected = { kind: ps.length > 1 ? 'merged' : ps[0]!.kind, project_id: ps[0]!.project_id, id: ps[0]!.id }
    for (const f of PLAIN) {
      const has = ps.filter((p) => p[f] !== undefined && p[f] !== null)
      if (has.length) e[f] = has[has.length - 1]![f]
    }
    const deletes = ps.map((p) => p.deleted_us).filter((d) => d !== undefined && d !== null)
    if (deletes.length) e.deleted_us = deletes.reduce((a, b) => (BigInt(b!) >= BigInt(a!) ? b : a))
    for (const f of ['input_refs', 'output_refs'] as const) {
      const lists = ps.map((p) => p[f]).filter((l) => l !== undefined && l !== null)
      if (lists.length) e[f] = [...new Set(lists.flat())]
    }
    return e
  })
}

/** A part's fields that have a value (the fold may leave a field it has no value for as undefined). */
const valued = (p: CallPart): Expected => Object.fromEntries(Object.entries(p).filter(([, v]) => v !== undefined && v !== null))

const maybe = <T>(a: fc.Arbitrary<T>) => fc.option(a, { nil: undefined, freq: 2 })
const ids = fc.constantFrom('a', 'b', 'c', 'd')
// A part's own list holds each ref once (refsIn).
const refs = fc.uniqueArray(fc.constantFrom('weave:///e/p/object/x:1', 'weave:///e/p/object/y:2', 'weave:///e/p/op/z:3'), { maxLength: 3 })
const part: fc.Arbitrary<CallPart> = fc.record(
  {
    kind: fc.constantFrom('start', 'end', 'update', 'delete') as fc.Arbitrary<CallPart['kind']>,
    project_id: fc.constantFrom('e/p', 'e/q'),
    id: ids,
    trace_id: maybe(fc.option(fc.constantFrom('t1', 't2', 't3'), { nil: null })),
    parent_id: maybe(fc.option(ids, { nil: null })),
    op_name: maybe(fc.constantFrom('op1', 'op2')),
    display_name: maybe(fc.option(fc.string({ maxLength: 4 }), { nil: null })),
    started_us: maybe(fc.bigInt({ min: 1n, max: 10n ** 15n }).map(String)),
    ended_us: maybe(fc.bigInt({ min: 1n, max: 10n ** 15n }).map(String)),
    deleted_us: maybe(fc.option(fc.bigInt({ min: 1n, max: 10n ** 17n }).map(String), { nil: null })),
    inputs: maybe(fc.oneof(fc.json(), fc.constant(new RawJson(Buffer.from('{"raw":1}'), [])))),
    output: maybe(fc.json()),
    summary: maybe(fc.json()),
    exception: maybe(fc.option(fc.string({ maxLength: 4 }), { nil: null })),
    user_id: maybe(fc.constantFrom('u1', 'u2')),
    run_step: maybe(fc.option(fc.integer(), { nil: null })),
    run_step_end: maybe(fc.integer()),
    input_refs: maybe(refs),
    output_refs: maybe(refs),
    usage: maybe(fc.array(fc.record({ model: fc.constantFrom('m1', 'm2'), prompt_tokens: fc.nat() }), { maxLength: 2 })),
  },
  { requiredKeys: ['kind', 'project_id', 'id'] },
)

t.test('foldParts agrees with the field-by-field definition on generated batches', async (t) => {
  let runs = 0
  let foldedCalls = 0
  fc.assert(
    fc.property(fc.array(part, { maxLength: 12 }), (parts) => {
      const before = JSON.stringify(parts, (_k, v) => (v instanceof RawJson ? 'raw' : v))
      const got = foldParts(parts)
      runs++
      foldedCalls += got.filter((p) => p.kind === 'merged').length
      const want = byDefinition(parts)
      t.equal(got.length, want.length)
      for (let i = 0; i < want.length; i++) {
        const g = valued(got[i]!)
        if (JSON.stringify(g, Object.keys(g).sort()) !== JSON.stringify(want[i], Object.keys(want[i]!).sort()))
          throw new Error(`call ${i}: got ${JSON.stringify(g)}, want ${JSON.stringify(want[i])}`)
      }
      // The caller's parts are not changed.
      if (JSON.stringify(parts, (_k, v) => (v instanceof RawJson ? 'raw' : v)) !== before) throw new Error('the fold changed its input')
    }),
    { numRuns: 400, seed: 16 },
  )
  t.ok(foldedCalls > 200, `${foldedCalls} calls folded from several parts in ${runs} batches`)
})

t.test('a call with one part is passed on as the same object; RawJson values survive a fold', async (t) => {
  const raw = new RawJson(Buffer.from('{"a":1}'), ['weave:///e/p/object/x:1'], true)
  const start: CallPart = { kind: 'start', project_id: 'e/p', id: '1', op_name: 'op', started_us: '5', inputs: raw, input_refs: raw.refs }
  const lone: CallPart = { kind: 'start', project_id: 'e/p', id: '2', op_name: 'op', started_us: '6' }
  const end: CallPart = { kind: 'end', project_id: 'e/p', id: '1', ended_us: '9', output: 'null', summary: '{}' }
  const [a, b] = foldParts([start, lone, end])
  t.equal(b, lone)
  t.equal(a!.kind, 'merged')
  t.equal(a!.inputs, raw)
  t.same([a!.started_us, a!.ended_us, a!.output, a!.input_refs], ['5', '9', 'null', ['weave:///e/p/object/x:1']])
  t.equal(start.kind, 'start')
})
