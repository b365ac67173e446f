import t from 'tap'
import OpenAI from 'openai'
import { startServer, requestJson, type TestServer } from './helpers/server.js'

// --inference-threads starts tfjs-backend-wasm's threaded build inside the inference worker, which the package
// does not support in Node and weft bridges (src/inference/wasm-threads.ts). A tfjs upgrade that moves what the
// bridges rely on makes the threaded start fail (the server then runs one thread and says so): this file notices.
// Two servers side by side: one on 2 threads, one asked for 2 whose threaded start fails (a failpoint leaves out
// the bridge for the thread workers' script, so TF.js's init fails as it would after such an upgrade) and which
// falls back to the single-threaded build: today's path, the reference for the greedy tokens.

/** A prompt long enough that its prefill's products are split over both threads (prompt rows × output columns). */
const PROMPT = Array.from({ length: 300 }, (_, i) => 3 + ((i * 37) % 200))

async function greedy(s: TestServer): Promise<number[]> {
  const client = new OpenAI({ apiKey: s.key, baseURL: s.url + '/v1', maxRetries: 0 })
  const r = await client.completions.create({
    model: 'weft-tiny',
    prompt: PROMPT,
    max_tokens: 24,
    temperature: 0,
    ...{ ignore_eos: true, return_token_ids: true },
  })
  return (r.choices[0] as unknown as { token_ids: number[] }).token_ids
}

async function modelStats(s: TestServer): Promise<{ backend: string; threads: number }> {
  const r = await requestJson(s, 'GET', '/admin/stats')
  return r.json.inference['weft-tiny']
}

t.test('2 wasm threads start in the inference worker and decode what one thread decodes', async (t) => {
  const [two, fallback] = await Promise.all([
    startServer({ args: ['--inference-threads', '2', '--inference-backend', 'wasm'] }),
    startServer({
      args: ['--inference-backend', 'wasm'],
      env: { WEFT_INFERENCE_THREADS: '2', WEFT_FAILPOINTS: 'wasm-threads-init' },
    }),
  ])
  t.teardown(() => Promise.all([two.stop(), fallback.stop()]))
  // The first completion also waits for each worker to load its model.
  const [tokens2, tokens1] = await Promise.all([greedy(two), greedy(fallback)])

  t.match(await modelStats(two), { backend: 'wasm-simd', threads: 2 }, 'the threaded build runs 2 threads')
  t.notMatch(two.output(), /threaded wasm backend did not start/, 'with no fallback logged')

  t.match(await modelStats(fallback), { backend: 'wasm-simd', threads: 1 }, 'a failed threaded start falls back to one thread')
  const lines = fallback.output().match(/.*threaded wasm backend did not start.*/g) ?? []
  t.equal(lines.length, 1, 'and logs it once')
  t.match(lines[0], /did not initialize: Initialization of backend wasm failed.*worker/i, 'with the reason TF.js gave')
  t.notMatch(fallback.output(), /^Initialization of backend/m, 'which is not also printed apart')

  t.equal(tokens2.length, 24)
  t.same(tokens2, tokens1, 'greedy tokens identical on 2 threads and on 1')
})
