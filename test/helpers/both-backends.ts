import path from 'node:path'
import type { Test } from 'tap'
import { chdbResolvable } from '../../src/clickhouse/chdb-executor.js'
import { ROOT, postJson, startServer, type TestServer } from './server.js'

/** Whether chdb (ClickHouse in-process) can be loaded here: from weft's optional dependencies or the bench's. */
export const chdbAvailable = chdbResolvable([ROOT, path.join(ROOT, 'bench', 'peer-deps')].map((d) => path.join(d, 'package.json')))

/**
 * An embedded server and a chdb one (`--storage chdb`), stopped when the test ends, and `both`: the same
 * request to each, both checked to answer 200, their JSON answers returned (embedded `a`, ClickHouse `b`).
 */
export async function bothBackends(t: Test): Promise<{
  emb: TestServer
  ch: TestServer
  both: (route: string, body: unknown) => Promise<{ a: any; b: any }>
}> {
  const [emb, ch] = await Promise.all([startServer({ env: { WEFT_STORAGE: '' } }), startServer({ args: ['--storage', 'chdb'] })])
  t.teardown(() => Promise.all([emb!.stop(), ch!.stop()]))
  const both = async (route: string, body: unknown) => {
    const [a, b] = await Promise.all([postJson(emb!, route, body), postJson(ch!, route, body)])
    t.same([a.status, b.status], [200, 200], `${route}: ${a.text.slice(0, 120)} | ${b.text.slice(0, 120)}`)
    return { a: a.json, b: b.json }
  }
  return { emb: emb!, ch: ch!, both }
}
