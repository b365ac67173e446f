import t from 'tap'
import { postJson, startServer, type TestServer } from './helpers/server.js'

// Row refs and table pages read through the fast paths (rows found by the project's digest key, then checked
// against the table; pages read by seq): a row stored in the project but not listed by the table must stay out.
process.env.WEFT_MODEL ??= 'none'

let s: TestServer
t.before(async () => {
  s = await startServer()
})
t.teardown(() => s.stop())

const P = 'acme/speed'
const post = async (path: string, body: unknown) => {
  const { status, json } = await postJson(s, path, body, s.basic())
  if (status !== 200) throw new Error(`${path}: ${status} ${JSON.stringify(json)}`)
  return json
}
const rowsOf = (tag: string, n: number) => Array.from({ length: n }, (_, i) => ({ tag, i, text: `${tag}-${i}-${'x'.repeat(i % 7)}` }))
const table = async (rows: unknown[], project = P): Promise<{ digest: string; row_digests: string[] }> =>
  post('/table/create', { table: { project_id: project, rows } })

t.test('a batch of row refs by id: members answered, rows of other tables and projects null', async (t) => {
  const mine = rowsOf('mine', 300)
  const theirs = rowsOf('theirs', 50)
  const a = await table(mine)
  const b = await table(theirs)
  // The same rows stored in another project: a seq from there must never answer here.
  const elsewhere = await table(theirs, 'acme/elsewhere')
  t.same(elsewhere.row_digests, b.row_digests)
  const ds = await post('/obj/create', {
    obj: { project_id: P, object_id: 'ds', val: { _type: 'Dataset', rows: `weave:///${P}/table/${a.digest}` } },
  })
  const ref = `weave:///${P}/object/ds:${ds.digest}/attr/rows/id/`
  const want: unknown[] = []
  const refs: string[] = []
  for (let k = 0; k < 600; k++) {
    if (k % 3 === 2) {
      refs.push(ref + b.row_digests[k % 50])
      want.push(null)
    } else {
      const i = (k * 7) % 300
      refs.push(ref + a.row_digests[i])
      want.push(mine[i])
    }
  }
  refs.push(ref + 'nosuchrow')
  want.push(null)
  const res = await post('/refs/read_batch', { refs })
  t.same(res.vals, want)
})

t.test('pages by position read the right rows and digests across chunk bounds', async (t) => {
  const rows = rowsOf('page', 9000)
  const tab = await table(rows)
  for (const [offset, limit] of [
    [0, 5],
    [8190, 5],
    [8995, 100],
  ] as const) {
    const res = await post('/table/query', { project_id: P, digest: tab.digest, offset, limit })
    const end = Math.min(offset + limit, rows.length)
    t.same(
      res.rows,
      rows.slice(offset, end).map((val, k) => ({ digest: tab.row_digests[offset + k], val, original_index: offset + k })),
      `offset ${offset}`,
    )
  }
})
