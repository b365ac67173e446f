import t from 'tap'
import { execFile, execFileSync } from 'node:child_process'
import { postJson, requestJson, startServer, type TestServer } from './helpers/server.js'
import { pointWeaveAt } from './helpers/weave.js'

// The /v2/{entity}/{project} object API (ops, datasets, scorers, evaluations, models) against a real server.
// Expected digests and object ids are computed by Python (json.dumps, hashlib), the language Weave's own
// server is written in, from the object values Weave's v2 creates write, restated here.

let s: TestServer
t.before(async () => {
  s = await startServer()
  pointWeaveAt(s)
})
t.teardown(() => s.stop())

const E = 'acme'
const PR = 'v2proj'
const P = `${E}/${PR}`
const V2 = `/v2/${P}`

const PY = String.raw`
import base64, hashlib, json, sys
def dig(b): return base64.urlsafe_b64encode(hashlib.sha256(b).digest()).decode().rstrip('=').replace('-', 'X').replace('_', 'Y')
def obj(v): return dig(json.dumps(v).encode())
def table(rows): return hashlib.sha256(''.join(obj(r) for r in rows).encode()).hexdigest()
def oid(n): return n.replace(' ', '_').replace('/', '_').replace('<', '').replace('>', '').lower()
task = json.loads(sys.stdin.read())
print(json.dumps({'files': [dig(x.encode()) for x in task.get('files', [])], 'objects': [obj(v) for v in task.get('objects', [])],
  'tables': [table(r) for r in task.get('tables', [])], 'ids': [oid(n) for n in task.get('ids', [])]}))
`
interface Py {
  files: string[]
  objects: string[]
  tables: string[]
  ids: string[]
}
// The interpreter itself, asked once: a version manager's `python3` shim (pyenv) spends about a second of shell
// per spawn on a loaded machine, and this file spawns Python dozens of times.
const PYTHON = execFileSync('python3', ['-c', 'import sys; print(sys.executable)'], { encoding: 'utf8' }).trim()
// Asynchronous on purpose: a blocked event loop keeps idle keep-alive sockets past the server's timeout.
const py = (task: Partial<Record<keyof Py, unknown[]>>): Promise<Py> =>
  new Promise((resolve, reject) => {
    const child = execFile(PYTHON, ['-c', PY], (err, stdout) => (err ? reject(err) : resolve(JSON.parse(stdout))))
    child.stdin!.end(JSON.stringify(task))
  })
const fileDigest = async (text: string) => (await py({ files: [text] })).files[0]!
const objDigest = async (val: unknown) => (await py({ objects: [val] })).objects[0]!
const opValOf = (file: string) => ({ _type: 'CustomWeaveType', weave_type: { type: 'Op' }, files: { 'obj.py': file } })
const opVal = async (code: string) => opValOf(await fileDigest(code))
const opDigest = async (code: string) => objDigest(await opVal(code))
/** Op digests of many sources in two Python runs (file digests, then the op values' digests). */
async function opDigests(codes: string[]): Promise<string[]> {
  const { files } = await py({ files: codes })
  return (await py({ objects: files.map(opValOf) })).objects
}
const bases = (cls: string) => ({ _type: cls, _class_name: cls, _bases: ['Object', 'BaseModel'] })

// Weave's placeholder sources, restated.
const PLACEHOLDER = 'def func(*args, **kwargs):\n    ... # Code-capture unavailable for this op\n'
const EVALUATE =
  'import weave\n@weave.op\ndef evaluate(evaluation, model):\n    """Placeholder evaluate function."""\n' +
  '    # TODO: Implement actual evaluation logic\n    return {"status": "not_implemented"}\n'

const call = (method: string, path: string, body?: unknown, auth?: Record<string, string>) => requestJson(s, method, path, body, auth)
async function ok(method: string, path: string, body?: unknown) {
  const r = await call(method, path, body)
  if (r.status !== 200) throw new Error(`${method} ${path} answered ${r.status}: ${r.text.slice(0, 400)}`)
  return r.json
}
async function list(kind: string, query = '') {
  const r = await call('GET', `${V2}/${kind}${query}`)
  if (r.status !== 200) throw new Error(`list ${kind} answered ${r.status}: ${r.text}`)
  return {
    type: r.headers.get('content-type'),
    text: r.text,
    items: r.text
      .split('\n')
      .filter(Boolean)
      .map((l) => JSON.parse(l)),
  }
}
const readV = (kind: string, id: string, digest: string, q = '') => call('GET', `${V2}/${kind}/${id}/versions/${digest}${q}`)
const del = (kind: string, id: string, digests: string[] = []) =>
  call(
    'DELETE',
    `${V2}/${kind}/${encodeURIComponent(id)}${digests.length ? '?' + digests.map((d) => 'digests=' + encodeURIComponent(d)).join('&') : ''}`,
  )
const rawObj = async (id: string, digest: string) => (await ok('POST', '/obj/read', { project_id: P, object_id: id, digest })).obj.val

t.test('ops: object id, value and digest, versions, exact code round trip', async (t) => {
  const name = 'My Op/v<1>'
  const id = (await py({ ids: [name] })).ids[0]!
  t.equal(id, 'my_op_v1')
  const a = await ok('POST', `${V2}/ops`, { name, source_code: 'def f():\n    return 1\n' })
  t.same(a, { digest: await opDigest('def f():\n    return 1\n'), object_id: id, version_index: 0 })
  const b = await ok('POST', `${V2}/ops`, { name, source_code: 'def f():\n    return 2\n' })
  t.equal(b.version_index, 1)
  t.not(b.digest, a.digest)
  t.same(await ok('POST', `${V2}/ops`, { name, source_code: 'def f():\n    return 1\n' }), a, 'same content: same version')
  t.same(await rawObj(id, a.digest), await opVal('def f():\n    return 1\n'), 'the stored value is the op value the SDKs write')

  const placeholder = await ok('POST', `${V2}/ops`, {})
  t.same(placeholder, { digest: await opDigest(PLACEHOLDER), object_id: 'Op', version_index: 0 }, 'no name, no code')
  t.equal((await readV('ops', 'Op', 'latest')).json.code, PLACEHOLDER)

  const codes: Record<string, string> = {
    quotes: `def q():\n    return "double" + 'single' + """triple""" + '\\'escaped\\''\n`,
    tabs: 'def t():\n\tif True:\n\t\treturn "\\t"\n',
    cr: 'line one\rline two\r',
    crlf: 'def w():\r\n    return 1\r\n',
    unicode: 'def ü():\n    return "naïve café — ∑ 中文"\n',
    emoji: 'def e():\n    return "🎉👩‍💻 \u{1F600}"\n',
    empty: '',
    nul_and_controls: 'a\u0000b\u0007c\u001f',
  }
  const digests = await opDigests(Object.values(codes))
  for (const [n, [key, code]] of Object.entries(codes).entries()) {
    const made = await ok('POST', `${V2}/ops`, { name: `code_${key}`, source_code: code })
    t.equal(made.digest, digests[n], `${key}: digest`)
    for (const [v, q] of [
      [made.digest, ''],
      ['latest', '?eager=true'],
      ['v0', '?eager=false'],
    ] as const) {
      const r = await readV('ops', `code_${key}`, v, q)
      t.equal(r.status, 200)
      t.equal(r.json.code, code, `${key}: code read back by ${v}${q}`)
      t.same(Object.keys(r.json).sort(), ['code', 'created_at', 'digest', 'object_id', 'version_index'])
    }
  }
  t.equal((await readV('ops', id, 'v1')).json.digest, b.digest, 'v<N> alias')
  t.equal((await readV('ops', id, 'nope')).status, 404)
  t.equal((await readV('ops', 'no_such_op', 'latest')).status, 404)
  t.equal((await readV('ops', id, 'latest', '?eager=maybe')).status, 422)
})

t.test('ops: JSONL listing and paging', async (t) => {
  const all = await list('ops')
  t.equal(all.type, 'application/jsonl')
  t.ok(all.text.endsWith('\n'))
  const live = (await ok('POST', '/objs/query', { project_id: P, filter: { is_op: true } })).objs
  t.equal(all.items.length, live.length, 'one line per live op version')
  t.same(
    all.items.map((i) => i.digest),
    live.map((o: any) => o.digest),
    'unpaged: oldest first',
  )
  const quotes = all.items.find((i) => i.object_id === 'code_quotes')
  t.match(quotes.code, /"""triple"""/, 'listing carries the code')
  const byId = [...all.items].sort((x, y) => (x.object_id < y.object_id ? -1 : x.object_id > y.object_id ? 1 : 0))
  const page = await list('ops', '?limit=3&offset=2')
  t.same(
    page.items.map((i) => i.object_id),
    byId.slice(2, 5).map((i) => i.object_id),
    'paged ops go by object id',
  )
  t.equal((await list('ops', '?limit=0')).text, '', 'limit 0: empty body')
  t.equal((await call('GET', `${V2}/ops?limit=-1`)).status, 422)
  t.equal((await call('GET', `${V2}/ops?offset=x`)).status, 422)
})

t.test('datasets: table, object value, read by version, SDK reads it back', async (t) => {
  const rows = [
    { q: 'What is 2+2?', a: 4, tags: ['math'] },
    { q: 'Ünïcödé ✓', a: null, nested: { x: [1, 2.5, 'three'] } },
  ]
  const body = { name: 'My Dataset', description: 'questions', rows }
  const made = await ok('POST', `${V2}/datasets`, body)
  const expected = await py({ tables: [rows], ids: ['My Dataset'] })
  const tableRef = `weave:///${P}/table/${expected.tables[0]}`
  const val = { ...bases('Dataset'), name: 'My Dataset', description: 'questions', rows: tableRef }
  t.same(made, { digest: await objDigest(val), object_id: expected.ids[0], version_index: 0 })
  t.same(await rawObj('my_dataset', made.digest), val)

  const read = await readV('datasets', 'my_dataset', made.digest)
  t.equal(read.status, 200)
  t.same(
    { ...read.json, created_at: undefined },
    {
      object_id: 'my_dataset',
      digest: made.digest,
      version_index: 0,
      created_at: undefined,
      name: 'My Dataset',
      description: 'questions',
      rows: tableRef,
    },
  )
  const q = await ok('POST', '/table/query', { project_id: P, digest: expected.tables[0] })
  t.same(
    q.rows.map((r: any) => r.val),
    rows,
    'the rows are in the table',
  )

  const weave = await import('weave')
  const client = await weave.init(P)
  const ds: any = await client.get(weave.ObjectRef.fromUri(`weave:///${P}/object/my_dataset:${made.digest}`))
  t.equal(ds.length, rows.length, 'the weave SDK loads the dataset')
  const { __savedRef, ...row } = ds.getRow(1)
  t.same(row, rows[1])

  const changed = await ok('POST', `${V2}/datasets`, { ...body, rows: [rows[0], { q: 'changed' }] })
  t.equal(changed.version_index, 1)
  t.same(await ok('POST', `${V2}/datasets`, body), made, 'same rows again: same version')
  const unnamed = await ok('POST', `${V2}/datasets`, { rows: [] })
  t.equal(unnamed.object_id, 'Dataset')
  t.equal(
    unnamed.digest,
    await objDigest({
      ...bases('Dataset'),
      name: 'Dataset',
      description: null,
      rows: `weave:///${P}/table/${(await py({ tables: [[]] })).tables[0]}`,
    }),
  )
  t.equal((await readV('datasets', 'my_dataset', 'v1')).json.digest, changed.digest)
  t.equal((await readV('datasets', 'code_quotes', 'latest')).status, 404, 'an op is not a dataset')
  t.equal((await readV('ops', 'my_dataset', 'latest')).status, 404, 'a dataset is not an op')
})

t.test('datasets: listing pages, delete rules', async (t) => {
  for (const n of ['page a', 'page b', 'page c']) await ok('POST', `${V2}/datasets`, { name: n, rows: [{ n }] })
  const all = await list('datasets')
  t.equal(all.type, 'application/jsonl')
  t.same(
    all.items.map((i) => i.object_id),
    ['my_dataset', 'my_dataset', 'Dataset', 'page_a', 'page_b', 'page_c'],
    'every live version, oldest first',
  )
  t.same((await list('datasets', '?limit=2&offset=3')).items, all.items.slice(3, 5))
  t.same((await list('datasets', '?offset=5')).items, all.items.slice(5))

  const [v0, v1] = all.items.filter((i) => i.object_id === 'my_dataset')
  const partial = await del('datasets', 'my_dataset', [v0.digest, 'unknown-digest'])
  t.equal(partial.status, 404)
  t.match(partial.json.reason, /unknown-digest/)
  t.equal((await readV('datasets', 'my_dataset', v0.digest)).status, 200, 'a partly unknown delete deletes nothing')
  t.equal((await del('datasets', 'my_dataset', ['nope'])).status, 404)
  t.equal((await del('datasets', 'no_such', [])).status, 404)
  t.equal((await del('datasets', 'code_quotes', [])).status, 404, 'an op is not deleted through /datasets')
  t.equal((await readV('ops', 'code_quotes', 'latest')).status, 200)
  const many = await del(
    'datasets',
    'my_dataset',
    Array.from({ length: 101 }, (_, i) => `d${i}`),
  )
  t.equal(many.status, 400)

  t.same((await del('datasets', 'my_dataset', [v0.digest, v0.digest])).json, { num_deleted: 1 }, 'duplicates count once')
  const gone = await readV('datasets', 'my_dataset', v0.digest)
  t.equal(gone.status, 404)
  t.ok(gone.json.deleted_at, 'deleted: 404 with deleted_at')
  t.equal((await readV('datasets', 'my_dataset', 'latest')).json.digest, v1.digest)
  t.same((await del('datasets', 'page_a')).json, { num_deleted: 1 }, 'no digests: every version')
  t.same(
    (await list('datasets')).items.map((i) => i.object_id),
    ['my_dataset', 'Dataset', 'page_b', 'page_c'],
  )
  t.equal((await del('datasets', 'page_a')).status, 404, 'nothing left to delete')
})

t.test('scorers: two ops and the Scorer object', async (t) => {
  const src = 'def score(output, expected):\n    return output == expected\n'
  const made = await ok('POST', `${V2}/scorers`, { name: 'Exact Match', op_source_code: src })
  const score = await opDigest(src)
  const summarize = (await readV('ops', 'exact_match_summarize', 'latest')).json
  t.equal((await readV('ops', 'exact_match_score', score)).json.code, src)
  t.match(summarize.code, /auto_summarize\(score_rows\)/)
  t.equal(summarize.digest, await opDigest(summarize.code))
  const val = {
    ...bases('Scorer'),
    name: 'Exact Match',
    description: null,
    score: `weave:///${P}/op/exact_match_score:${score}`,
    summarize: `weave:///${P}/op/exact_match_summarize:${summarize.digest}`,
    column_map: null,
  }
  const digest = await objDigest(val)
  t.same(made, { digest, object_id: 'exact_match', version_index: 0, scorer: `weave:///${P}/object/exact_match:${digest}` })
  const read = (await readV('scorers', 'exact_match', 'latest')).json
  t.equal(read.score_op, val.score)
  t.equal(read.name, 'Exact Match')
  const listed = await list('scorers')
  t.equal(listed.items.length, 1)
  t.same(listed.items[0], read)
  const v1 = await ok('POST', `${V2}/scorers`, { name: 'Exact Match', description: 'strict', op_source_code: src })
  t.equal(v1.version_index, 1)
  t.same((await del('scorers', 'exact_match', [made.digest])).json, { num_deleted: 1 })
  t.same(
    (await list('scorers')).items.map((i) => i.digest),
    [v1.digest],
  )
})

t.test('evaluations: placeholder ops, refs, attributes', async (t) => {
  const ds = await ok('POST', `${V2}/datasets`, { name: 'eval rows', rows: [{ x: 1 }] })
  const sc = await ok('POST', `${V2}/scorers`, { name: 'close', op_source_code: 'def score(output):\n    return True\n' })
  const dsRef = `weave:///${P}/object/${ds.object_id}:${ds.digest}`
  const body = { name: 'Sum Eval', dataset: dsRef, scorers: [sc.scorer], eval_attributes: { team: 'ml', rev: 3 } }
  const made = await ok('POST', `${V2}/evaluations`, body)
  const opRef = async (suffix: string) => {
    const r = (await readV('ops', `sum_eval_${suffix}`, 'latest')).json
    t.equal(r.digest, await opDigest(r.code), `${suffix}: an op holding its code`)
    return `weave:///${P}/op/sum_eval_${suffix}:${r.digest}`
  }
  t.equal((await readV('ops', 'sum_eval_evaluate', 'latest')).json.code, EVALUATE)
  const [evaluate, pas, summarize] = [await opRef('evaluate'), await opRef('predict_and_score'), await opRef('summarize')]
  // The fields the evaluation read repeats from the object.
  const fields = { name: 'Sum Eval', description: null, dataset: dsRef, scorers: [sc.scorer], trials: 1, evaluation_name: null }
  const val = {
    ...bases('Evaluation'),
    ...fields,
    metadata: null,
    preprocess_model_input: null,
    on_complete: null,
    evaluate,
    predict_and_score: pas,
    summarize,
    team: 'ml',
    rev: 3,
  }
  const digest = await objDigest(val)
  t.same(made, { digest, object_id: 'sum_eval', version_index: 0, evaluation_ref: `weave:///${P}/object/sum_eval:${digest}` })
  t.same(Object.keys(await rawObj('sum_eval', digest)), Object.keys(val), 'keys in order, attributes last')
  const read = (await readV('evaluations', 'sum_eval', digest)).json
  t.same(
    { ...read, created_at: undefined },
    {
      object_id: 'sum_eval',
      digest,
      version_index: 0,
      created_at: undefined,
      ...fields,
      evaluate_op: evaluate,
      predict_and_score_op: pas,
      summarize_op: summarize,
    },
  )
  const v1 = await ok('POST', `${V2}/evaluations`, { ...body, trials: 3, evaluation_name: 'run' })
  t.equal(v1.version_index, 1)
  t.same(
    (await list('evaluations')).items.map((i) => [i.version_index, i.trials]),
    [
      [0, 1],
      [1, 3],
    ],
  )
  t.same(
    (await list('evaluations', '?limit=1&offset=1')).items.map((i) => i.digest),
    [v1.digest],
  )
  t.same((await del('evaluations', 'sum_eval')).json, { num_deleted: 2 })
  t.equal((await readV('evaluations', 'sum_eval', 'latest')).status, 404)
})

t.test('evaluations: refs in the body are checked before anything is written', async (t) => {
  const ds = (await list('datasets')).items[0]
  const dsRef = `weave:///${P}/object/${ds.object_id}:${ds.digest}`
  const before = (await ok('POST', '/objs/query', { project_id: P, metadata_only: true })).objs.length
  const cases: [string, Record<string, unknown>, number][] = [
    ['malformed dataset ref', { dataset: 'not a ref' }, 400],
    ['dataset ref without a digest', { dataset: `weave:///${P}/object/x` }, 400],
    ['dataset in another project', { dataset: `weave:///other/proj/object/${ds.object_id}:${ds.digest}` }, 400],
    ['dataset ref by alias', { dataset: `weave:///${P}/object/${ds.object_id}:latest` }, 400],
    ['dataset ref with a path', { dataset: `${dsRef}/attr/rows` }, 400],
    ['dataset ref to nothing', { dataset: `weave:///${P}/object/${ds.object_id}:${'A'.repeat(43)}` }, 404],
    ['a table ref as dataset', { dataset: ds.rows }, 400],
    ['an op ref as dataset', { dataset: `weave:///${P}/op/exact_match_score:x` }, 400],
    ['internal scorer ref', { dataset: dsRef, scorers: [`weave-trace-internal:///${P}/object/a:b`] }, 400],
    ['scorer in another project', { dataset: dsRef, scorers: [`weave:///${E}/elsewhere/object/a:b`] }, 400],
    ['scorer ref to nothing', { dataset: dsRef, scorers: [`weave:///${P}/object/ghost:${'B'.repeat(43)}`] }, 404],
    ['attribute overriding the dataset', { dataset: dsRef, eval_attributes: { dataset: 'x' } }, 400],
    ['trials 0', { dataset: dsRef, trials: 0 }, 422],
    ['scorers not a list', { dataset: dsRef, scorers: 'x' }, 422],
    ['no dataset', {}, 422],
  ]
  for (const [what, extra, status] of cases) {
    const r = await call('POST', `${V2}/evaluations`, { name: 'refused', ...extra })
    t.equal(r.status, status, what)
    if (status === 422) t.ok(Array.isArray(r.json.detail) && r.json.detail[0].loc, `${what}: FastAPI's detail shape`)
    else t.type(r.json.reason, 'string', `${what}: reason`)
  }
  const after = (await ok('POST', '/objs/query', { project_id: P, metadata_only: true })).objs.length
  t.equal(after, before, 'nothing was written')
})

t.test('models: source file, attributes merged and read back', async (t) => {
  const src = 'class Adder(weave.Model):\n    bias: int\n\n    @weave.op\n    def predict(self, a, b):\n        return a + b + self.bias\n'
  const attributes = { bias: 2, prompt: 'Add «these»', nested: { k: [1, null, true] } }
  const made = await ok('POST', `${V2}/models`, { name: 'Adder Model', description: 'adds', source_code: src, attributes })
  const val = { ...bases('Model'), name: 'Adder Model', description: 'adds', files: { 'obj.py': await fileDigest(src) }, ...attributes }
  const digest = await objDigest(val)
  t.same(made, { digest, object_id: 'adder_model', version_index: 0, model_ref: `weave:///${P}/object/adder_model:${digest}` })
  const read = (await readV('models', 'adder_model', 'latest')).json
  t.same(
    { ...read, created_at: undefined },
    {
      object_id: 'adder_model',
      digest,
      version_index: 0,
      created_at: undefined,
      name: 'Adder Model',
      description: 'adds',
      source_code: src,
      attributes,
    },
  )
  const plain = await ok('POST', `${V2}/models`, { name: 'plain', source_code: '' })
  const plainRead = (await readV('models', 'plain', plain.digest)).json
  t.equal(plainRead.attributes, null, 'no attributes: null')
  t.equal(plainRead.source_code, '')
  t.same(
    (await list('models')).items.map((i) => i.object_id),
    ['adder_model', 'plain'],
  )
  const clash = await call('POST', `${V2}/models`, { name: 'bad', source_code: 'x', attributes: { files: {} } })
  t.equal(clash.status, 400)
  t.equal((await readV('models', 'bad', 'latest')).status, 404, 'refused: nothing stored')
  t.equal((await call('POST', `${V2}/models`, { name: 'bad', source_code: 'x', attributes: [1] })).status, 422)
  t.equal((await call('POST', `${V2}/models`, { name: 'bad' })).status, 422)
  const proto = await ok('POST', `${V2}/models`, {
    name: 'proto',
    source_code: 'x',
    attributes: JSON.parse('{"__proto__": {"polluted": 1}}'),
  })
  t.same((await readV('models', 'proto', proto.digest)).json.attributes, JSON.parse('{"__proto__": {"polluted": 1}}'))
})

t.test('bad bodies and hostile names', async (t) => {
  const bad: [string, unknown][] = [
    ['datasets', { name: 'x', rows: [1] }],
    ['datasets', { name: 'x' }],
    ['datasets', { name: '', rows: [] }],
    ['ops', { name: 5 }],
    ['ops', { source_code: ['x'] }],
    ['scorers', { name: 'x' }],
    ['scorers', { name: 'x', op_source_code: 'y', extra: 1 }],
    ['models', { name: 'x', source_code: 1 }],
  ]
  for (const [kind, body] of bad) {
    const r = await call('POST', `${V2}/${kind}`, body)
    t.equal(r.status, 422, `${kind} ${JSON.stringify(body)}`)
    t.ok(Array.isArray(r.json?.detail), 'detail list')
  }
  const broken = await fetch(`${s.url}${V2}/datasets`, {
    method: 'POST',
    headers: { ...s.basic(), 'content-type': 'application/json' },
    body: '{"rows": [',
  })
  t.equal(broken.status, 422)
  const hostile = await call('POST', `${V2}/datasets`, { name: "x'; DROP TABLE objects; --", rows: [] })
  t.equal(hostile.status, 403, 'a name that makes an invalid object id: 403, as Weave answers')
  t.equal((await call('GET', `${V2}/datasets/${encodeURIComponent("x' OR 1=1 --")}/versions/latest`)).status, 404)
  t.equal((await list('datasets')).items.length > 0, true, 'still there')
})

t.test('entity scope: a key limited to one entity gets 403 on another', async (t) => {
  const made = await postJson(s, '/admin/keys', { user_id: 'alice', entities: ['team-a'] })
  t.equal(made.status, 200)
  const alice = s.basic(made.json.key)
  const mine = await call('POST', '/v2/team-a/p/datasets', { name: 'a', rows: [{ v: 1 }] }, alice)
  t.equal(mine.status, 200)
  t.equal((await call('GET', '/v2/team-a/p/datasets', undefined, alice)).status, 200)
  const theirs = await ok('POST', '/v2/team-b/p/datasets', { name: 'b', rows: [{ v: 2 }] })
  for (const [method, path, body] of [
    ['POST', '/v2/team-b/p/datasets', { name: 'c', rows: [] }],
    ['GET', '/v2/team-b/p/datasets', undefined],
    ['GET', `/v2/team-b/p/datasets/b/versions/${theirs.digest}`, undefined],
    ['DELETE', '/v2/team-b/p/datasets/b', undefined],
    ['POST', '/v2/team-b/p/ops', {}],
    ['GET', '/v2/team-b/p/models', undefined],
  ] as const) {
    const r = await call(method, path, body, alice)
    t.equal(r.status, 403, `${method} ${path}`)
  }
  t.equal((await readV('datasets', 'b', theirs.digest)).status, 404, 'other project: not found here')
  t.equal((await call('GET', `/v2/team-b/p/datasets/b/versions/${theirs.digest}`)).status, 200, 'still there for the admin')
  t.equal((await call('GET', `${V2}/datasets`, undefined, {})).status, 401)
})

// No chat in this file: its servers start without the built-in model (about 1 s of CPU less per start).
process.env.WEFT_MODEL ??= 'none'
