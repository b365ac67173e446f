import t from 'tap'
import OpenAI from 'openai'
import { startServer, type TestServer } from './helpers/server.js'

// The real openai SDK against the chat family: its typed errors must come out of our envelopes.
let s: TestServer
t.before(async () => {
  s = await startServer()
})
t.teardown(() => s.stop())

const client = (apiKey: string, baseURL = s.url + '/v1') => new OpenAI({ apiKey, baseURL, maxRetries: 0 })
const req = { model: 'weft-tiny', messages: [{ role: 'user' as const, content: 'hi' }] }

t.test('401 surfaces as AuthenticationError', async (t) => {
  const err = await client('wrong')
    .chat.completions.create(req)
    .catch((e: unknown) => e)
  t.type(err, OpenAI.AuthenticationError)
  t.equal((err as InstanceType<typeof OpenAI.AuthenticationError>).status, 401)
  t.match((err as Error).message, /Invalid API key/)
})

t.test('400 surfaces as BadRequestError with the param', async (t) => {
  const err = await client(s.key)
    .chat.completions.create({ ...req, top_k: -7 } as never)
    .catch((e: unknown) => e)
  t.type(err, OpenAI.BadRequestError)
  const e = err as InstanceType<typeof OpenAI.BadRequestError>
  t.equal(e.status, 400)
  t.equal(e.param, 'top_k')
  t.match(e.message, /greater than or equal to -1/)
})

t.test('a server started without a model answers chat with a typed 501, never a hang or a 404', async (t) => {
  const bare = await startServer({ args: ['--model', 'none'] })
  t.teardown(() => bare.stop())
  const c = (baseURL: string) => new OpenAI({ apiKey: bare.key, baseURL, maxRetries: 0 })
  const err = await c(bare.url + '/v1')
    .chat.completions.create(req)
    .catch((e: unknown) => e)
  t.type(err, OpenAI.InternalServerError)
  t.equal((err as InstanceType<typeof OpenAI.InternalServerError>).status, 501)
  const viaInference = await c(bare.url + '/inference/v1')
    .models.list()
    .catch((e: unknown) => e)
  t.equal((viaInference as InstanceType<typeof OpenAI.APIError>).status, 501)
})

t.test('unknown endpoints under /inference/v1 are a typed 404', async (t) => {
  const err = await client(s.key, s.url + '/inference/v1')
    .embeddings.create({ model: 'x', input: 'y' })
    .catch((e: unknown) => e)
  t.type(err, OpenAI.NotFoundError)
})
