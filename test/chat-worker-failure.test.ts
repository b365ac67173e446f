import t from 'tap'
import { chatServer } from './helpers/openai.js'
import { startServer, streamQuery } from './helpers/server.js'
import { ChatStream, chatOnce, engineState } from './helpers/chat-load.js'

// An inference worker that dies mid-batch. The failpoint (WEFT_FAILPOINTS=inference-step:N, honoured
// only when set) ends the model's worker thread at its Nth forward pass, as a crash would; the count
// starts again in the restarted worker, so short requests after it are served.
const STEP = 150
const chat = chatServer({ env: { WEFT_FAILPOINTS: `inference-step:${STEP}` } })
const messages = [{ role: 'user', content: 'Weave me a long tale.' }]

/** Resolves with the promise's value, or rejects once `ms` pass: a request that hangs fails the test, not the run. */
function within<T>(p: Promise<T>, ms: number, what: string): Promise<T> {
  return Promise.race([p, new Promise<T>((_, reject) => setTimeout(() => reject(new Error(`${what}: no answer in ${ms} ms`)), ms).unref())])
}

t.test('the requests of a worker that dies mid-batch fail with a 500; the restarted worker serves the next', async (t) => {
  const s = chat.s
  const project = 'acme/worker-crash-' + Math.random().toString(36).slice(2, 8)
  const headers = { 'openai-project': project }
  // Both far longer than the failpoint's step: the worker dies while they run together.
  const streamed = ChatStream.open(s, { messages, max_tokens: 2000, ignore_eos: true, request_id: 'streamed' }, headers)
  await streamed.readTokens(1)
  const whole = chatOnce(s, { messages, max_tokens: 2000, ignore_eos: true, request_id: 'whole' }, headers, 30_000)

  await within(streamed.drain(), 30_000, 'the stream')
  const tokens = streamed.tokenChunks().length
  t.ok(tokens > 0 && tokens < STEP, `the stream had ${tokens} tokens when the worker died`)
  const frames = streamed.chunks.map((c) => c.data)
  const error = frames.find((d) => d?.error)?.error
  t.match(error, { code: 500, message: /inference worker stopped/ }, 'the stream ends with an error event')
  t.equal(frames[frames.length - 1], '[DONE]', 'and is closed')
  t.notOk(
    frames.some((d) => d?.choices?.[0]?.finish_reason),
    'no choice claims to have finished',
  )

  const w = await whole
  t.equal(w.status, 500, 'the non-streamed request in the same batch fails too')
  t.match(w.json?.error?.message ?? w.json?.message, /inference worker stopped/)

  const next = await chatOnce(s, { messages, max_tokens: 8, ignore_eos: true, request_id: 'next' }, headers, 30_000)
  t.equal(next.status, 200, 'the next request is served by the restarted worker')
  t.equal(next.json?.usage?.completion_tokens, 8)
  t.match(await engineState(s), { running_requests: 0, waiting_requests: 0, kv_positions_used: 0 }, 'the new worker answers')
  t.equal(s.proc.exitCode, null, 'the server itself kept running')
  t.match(s.output(), /inference worker exited; starting it again/, 'the crash is logged')

  const calls = await streamQuery(s, { project_id: project }, s.bearer())
  const byId = (id: string) => calls.find((c) => c.attributes.weft.completion_id === `chatcmpl-${id}`)
  t.match(byId('streamed')?.exception, /inference worker stopped/, 'the failed stream is recorded as failed')
  t.equal(byId('next')?.exception, null, 'the next one as a success')
})

t.test('a worker that fails to restart is tried again later; meanwhile requests get a quick 503, then 200', async (t) => {
  // Dies at its 40th step; its first three restarts then fail to load (inference-restart-load:3), the fourth
  // succeeds: down 1 s, 2 s and 4 s between attempts (with one failed restart the only 503 window was 1 s, which
  // a loaded machine's round trips could miss).
  const s = await startServer({ env: { WEFT_FAILPOINTS: 'inference-step:40,inference-restart-load:3' } })
  t.teardown(() => s.stop())
  const crashed = ChatStream.open(s, { messages, max_tokens: 2000, ignore_eos: true })
  await within(crashed.drain(), 30_000, 'the stream')
  t.match(crashed.chunks.find((c) => c.data?.error)?.data.error, { code: 500 }, 'the running stream fails')
  const seen = new Map<number, string>()
  let slowest503 = 0
  let served = false
  const until = performance.now() + 45_000
  while (!served && performance.now() < until) {
    const started = performance.now()
    const r = await chatOnce(s, { messages, max_tokens: 4, ignore_eos: true }, {}, 30_000)
    if (r.status === 200) served = true
    else if (!seen.has(r.status)) seen.set(r.status, r.json?.error?.message ?? r.json?.message ?? '')
    if (r.status === 503) slowest503 = Math.max(slowest503, performance.now() - started)
    await new Promise((r) => setTimeout(r, 50))
  }
  t.ok(served, 'a request is served once the worker has restarted')
  t.match(seen.get(503), /restarting/, 'between attempts: 503, the model is restarting')
  t.ok(slowest503 < 2000, `each 503 at once (slowest ${slowest503.toFixed(0)} ms)`)
  t.same(
    [...seen.keys()].filter((k) => k !== 500 && k !== 503),
    [],
    'no other failure',
  )
  t.match(s.output(), /did not restart; trying again/)
})
