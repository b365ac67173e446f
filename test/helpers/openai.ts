import t from 'tap'
import OpenAI from 'openai'
import { startServer, type TestServer } from './server.js'

export interface ChatServer {
  s: TestServer
  client: OpenAI
}

/**
 * Starts a server for the test file (stopped at its teardown) with the real `openai` SDK pointed at its `/v1`;
 * the returned object's `s` and `client` are set once `t.before` has run.
 */
export function chatServer(opts: Parameters<typeof startServer>[0] = {}): ChatServer {
  const chat = {} as ChatServer
  t.before(async () => {
    chat.s = await startServer(opts)
    chat.client = new OpenAI({ apiKey: chat.s.key, baseURL: chat.s.url + '/v1', maxRetries: 0 })
  })
  t.teardown(() => chat.s?.stop())
  return chat
}
