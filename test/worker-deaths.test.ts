import t from 'tap'
import { randomBytes } from 'node:crypto'
import { startServer, postJson, requestJson, streamQuery } from './helpers/server.js'
import { ChatStream, engineState } from './helpers/chat-load.js'

// Workers killed while traffic flows: only the requests on the dying worker fail (503 / 500, in their family's
// shape), the pool or worker comes back, and every acknowledged call is stored once.

const hex = (n: number) => randomBytes(n / 2).toString('hex')
const MARKER = 'weft-failpoint:ingest-worker-exit'

async function within<T>(p: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined
  const late = new Promise<never>((_, reject) => (timer = setTimeout(() => reject(new Error(`timed out waiting for ${what}`)), ms)))
  return Promise.race([p, late]).finally(() => clearTimeout(timer))
}

function batch(project: string, ids: string[], doomed: boolean) {
  const trace = hex(32)
  return ids.flatMap((id, i) => [
    {
      mode: 'start',
      req: {
        start: {
          project_id: project,
          id,
          trace_id: trace,
          op_name: 'load',
          started_at: new Date(Date.now() - 1000).toISOString(),
          attributes: {},
          inputs: { i, note: doomed && i === 2 ? MARKER : '' },
        },
      },
    },
    { mode: 'end', req: { end: { project_id: project, id, ended_at: new Date().toISOString(), output: i, summary: {} } } },
  ])
}

t.test('ingest workers die under concurrent load: only their own requests fail, the pool recovers, nothing is lost', async (t) => {
  const s = await startServer({ env: { WEFT_INGEST_WORKERS: '2', WEFT_FAILPOINTS: 'ingest-worker-exit', WEFT_MODEL: 'none' } })
  t.teardown(() => s.stop())
  const project = 'acme/worker-deaths'
  const acked: string[] = []
  const refused: string[] = []
  const unexpected: string[] = []
  let deaths = 0
  // Four clients, 12 batches each; every fourth batch of each client kills the worker that reads it.
  const client = async (c: number) => {
    for (let b = 0; b < 12; b++) {
      const ids = Array.from({ length: 5 }, () => hex(16))
      const doomed = (b + c) % 4 === 3
      const r = await postJson(s, '/call/upsert_batch', { batch: batch(project, ids, doomed) })
      if (doomed) {
        deaths++
        if (r.status === 503 && /ingest worker failed/.test(r.json?.reason ?? '') && r.headers.get('retry-after')) refused.push(...ids)
        else unexpected.push(`doomed batch answered ${r.status} ${r.text.slice(0, 200)}`)
      } else if (r.status === 200) acked.push(...ids)
      else unexpected.push(`batch ${c}/${b} answered ${r.status} ${r.text.slice(0, 200)}`)
    }
  }
  await Promise.all([0, 1, 2, 3].map(client))
  t.equal(deaths, 12, '12 worker deaths')
  t.same(unexpected, [], 'every batch on a living worker acknowledged; every one on a dying worker refused with 503 and Retry-After')
  t.equal(refused.length, 12 * 5)
  t.equal(acked.length, 36 * 5, `${acked.length} calls acknowledged`)

  const calls = await streamQuery(s, { project_id: project, columns: ['id', 'ended_at'] })
  const seen = new Map<string, number>()
  for (const c of calls) seen.set(c.id, (seen.get(c.id) ?? 0) + 1)
  t.equal(acked.filter((id) => seen.get(id) !== 1).length, 0, 'every acknowledged call stored exactly once')
  t.equal(refused.filter((id) => seen.has(id)).length, 0, 'nothing of a refused batch stored')
  t.equal(calls.length, acked.length, 'and nothing else')
  t.equal(calls.filter((c) => !c.ended_at).length, 0, 'each with its end')
  const stats = await requestJson(s, 'GET', '/admin/stats')
  t.equal(stats.json?.ingest?.threads, 2, 'the pool is back to its two workers')
  t.equal(s.proc.exitCode, null, 'the server kept running')
})

t.test(
  'the inference worker dies under several concurrent streams: they fail, other routes do not, the next streams are served and recorded',
  async (t) => {
    const STEP = 120
    const s = await startServer({ env: { WEFT_FAILPOINTS: `inference-step:${STEP}` } })
    t.teardown(() => s.stop())
    const project = 'acme/worker-deaths-chat'
    const headers = { 'openai-project': project }
    const messages = [{ role: 'user', content: 'Weave me a long tale.' }]
    const open = (id: string, max_tokens: number) => ChatStream.open(s, { messages, max_tokens, ignore_eos: true, request_id: id }, headers)
    const doomed = ['d0', 'd1', 'd2', 'd3'].map((id) => open(id, 2000))
    await Promise.all(doomed.map((d) => d.readTokens(1)))
    // Ingest meanwhile: another pool, unaffected by the inference worker's death.
    const ingest: number[] = []
    const ingestIds: string[] = []
    const ingestLoop = (async () => {
      for (let i = 0; i < 10; i++) {
        const ids = [hex(16)]
        const r = await postJson(s, '/call/upsert_batch', { batch: batch(project, ids, false) })
        ingest.push(r.status)
        if (r.status === 200) ingestIds.push(...ids)
      }
    })()
    // Bounded: a death that leaves its streams open must fail here, not at the file's timeout.
    await within(Promise.all(doomed.map((d) => d.drain())), 60_000, 'the streams on the dead worker to end')
    await ingestLoop
    for (const [i, d] of doomed.entries()) {
      const frames = d.chunks.map((c) => c.data)
      t.match(
        frames.find((f) => f?.error)?.error,
        { code: 500, message: /inference worker stopped/ },
        `stream d${i} ends with an error event`,
      )
      t.equal(frames[frames.length - 1], '[DONE]', `and is closed`)
      t.ok(d.tokenChunks().length < STEP, `after ${d.tokenChunks().length} tokens`)
    }
    t.same(
      ingest.filter((x) => x !== 200),
      [],
      'ingest kept being acknowledged meanwhile',
    )

    const next = ['n0', 'n1', 'n2'].map((id) => open(id, 12))
    await Promise.all(next.map((d) => d.drain()))
    for (const [i, d] of next.entries()) {
      t.equal(d.tokenChunks().length, 12, `stream n${i} after the restart: 12 tokens`)
      t.notOk(
        d.chunks.some((c) => c.data?.error),
        'no error',
      )
    }
    t.match(await engineState(s), { running_requests: 0, waiting_requests: 0 }, 'the restarted worker is idle')
    t.match(s.output(), /inference worker exited; starting it again/, 'the death is logged')

    // Recorded calls: every request once, the dead ones as failures, the later ones as successes.
    const calls = await streamQuery(s, { project_id: project }, s.bearer())
    const chats = calls.filter((c) => c.attributes?.weft?.completion_id)
    const byId = (id: string) => chats.filter((c) => c.attributes.weft.completion_id === `chatcmpl-${id}`)
    for (const id of ['d0', 'd1', 'd2', 'd3']) {
      t.equal(byId(id).length, 1, `${id} recorded once`)
      t.match(byId(id)[0]?.exception, /inference worker stopped/, `${id} recorded as failed`)
    }
    for (const id of ['n0', 'n1', 'n2']) {
      t.equal(byId(id).length, 1, `${id} recorded once`)
      t.equal(byId(id)[0]?.exception ?? null, null, `${id} recorded as a success`)
    }
    t.equal(chats.length, 7, 'no other chat recorded')
    const ingested = new Set(calls.map((c) => c.id))
    t.equal(ingestIds.filter((id) => !ingested.has(id)).length, 0, 'the calls ingested meanwhile are there')
  },
)
