import t from 'tap'
import { chatServer } from './helpers/openai.js'
import { streamQuery } from './helpers/server.js'
import { ChatStream, chatOnce, engineState, waitFor } from './helpers/chat-load.js'

// Scheduling through the real server on the built-in tiny model, with a batch of one sequence
// (--max-num-seqs 1): whatever runs holds the batch, and everything else waits in the queue, so the
// order requests start in is the order they finish in.
const chat = chatServer({ args: ['--scheduling-policy', 'priority', '--max-num-seqs', '1'] })

const messages = [{ role: 'user', content: 'Tell me a long story about a loom.' }]
/** A request that holds the batch for thousands of decode steps, unless it is cancelled. */
const LONG = 4000

t.test('priority scheduling: a saturated batch takes waiting requests by priority, ties by arrival', async (t) => {
  const s = chat.s
  const blocker = ChatStream.open(s, { messages, max_tokens: LONG, ignore_eos: true })
  await blocker.readTokens(1)
  // Sent one at a time, each seen waiting before the next goes, so their arrival order is known.
  const queued = [5, 1, 3, 1, 0].map((priority, arrival) => ({ priority, arrival, name: `p${priority}#${arrival}` }))
  const finished: string[] = []
  const replies: Promise<unknown>[] = []
  for (const q of queued) {
    replies.push(
      chatOnce(s, { messages, max_tokens: 8, ignore_eos: true, priority: q.priority }).then((r) => {
        t.equal(r.status, 200, `${q.name} answered`)
        finished.push(q.name)
      }),
    )
    t.ok(await waitFor(async () => (await engineState(s)).waiting_requests === q.arrival + 1, 10_000), `${q.name} waits`)
  }
  t.match(await engineState(s), { running_requests: 1, waiting_requests: queued.length }, 'the batch was full while they queued')
  blocker.abort()
  await Promise.all(replies)
  // vLLM's rule, computed here: lower priority value first, equal values in the order they came.
  const expected = [...queued].sort((a, b) => a.priority - b.priority || a.arrival - b.arrival).map((q) => q.name)
  t.same(finished, expected, 'completed in priority order')
})

t.test('a client that aborts a long stream stops its generation: recorded short, the batch freed at once', async (t) => {
  const s = chat.s
  const project = 'acme/sched-cancel-' + Math.random().toString(36).slice(2, 8)
  const headers = { 'openai-project': project }
  // How fast this machine decodes now: a warm-up request's own timings, as the server recorded them.
  const warm = await chatOnce(s, { messages, max_tokens: 200, ignore_eos: true, request_id: 'warm' }, headers)
  t.equal(warm.status, 200)
  const aborted = ChatStream.open(s, { messages, max_tokens: LONG, ignore_eos: true, request_id: 'aborted' }, headers)
  await aborted.readTokens(5)
  const abortedAt = performance.now()
  aborted.abort()
  // The batch holds one sequence: this request can start only once the aborted one is gone.
  const next = await chatOnce(s, { messages, max_tokens: 4, ignore_eos: true, request_id: 'next' }, headers)
  t.equal(next.status, 200)
  t.equal(next.json.usage.completion_tokens, 4)
  t.ok(await waitFor(async () => (await engineState(s)).running_sequences === 0, 10_000), 'no sequence left running after the abort')
  const stoppedMs = performance.now() - abortedAt
  t.match(await engineState(s), { running_requests: 0, waiting_requests: 0, kv_positions_used: 0 }, 'its cache freed')

  let calls: any[] = []
  await waitFor(async () => (calls = await streamQuery(s, { project_id: project }, s.bearer())).length === 3, 10_000, 50)
  const byId = (id: string) => calls.find((c) => c.attributes.weft.completion_id === `chatcmpl-${id}`)
  const [w, a, n] = [byId('warm'), byId('aborted'), byId('next')]
  t.ok(w && a && n, 'the three completions were recorded')
  const perToken = w.attributes.weft.timings.total_ms / 200
  // Left running, the aborted request would hold the batch for its remaining ~4000 steps (each slower
  // than the warm-up's, over a longer cache). Stopped, the next one waits a step or two.
  const wouldRun = (LONG - 200) * perToken
  t.ok(
    n.attributes.weft.timings.queued_ms < wouldRun / 8,
    `the next request waited ${n.attributes.weft.timings.queued_ms.toFixed(1)} ms (the rest of the aborted one: ~${wouldRun.toFixed(0)} ms)`,
  )
  t.ok(stoppedMs < wouldRun / 4, `generation stopped ${stoppedMs.toFixed(0)} ms after the abort`)
  t.match(a.exception, /disconnected/i, 'the aborted completion is recorded as failed')
  const generated = a.summary.usage['weft-tiny'].completion_tokens
  t.ok(generated >= 5 && generated < 200, `recorded with the ${generated} tokens generated before the abort, not ${LONG}`)
  t.equal(a.output.usage.completion_tokens, generated)
})
