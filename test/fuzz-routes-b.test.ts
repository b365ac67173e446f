import t from 'tap'
import { startServer, type TestServer } from './helpers/server.js'
import { fuzzRoutes, hintsFor, routesOf, seed, serverErrors, type FuzzRoute } from './helpers/fuzz-runner.js'

/**
 * The /v2 routes and the chat/inference family of /openapi.json (the rest is in fuzz-routes-a), fuzzed from their
 * own request schemas. Chat requests sample at most two tokens (the hints cap max_tokens): the answers are checked,
 * not the generation. FUZZ_RUNS raises the number of requests per route.
 */
/** 15 requests per route (each mutation once) when the machine keeps pace; at least 6 when it is loaded. */
const PLAN = {
  runs: Number(process.env.FUZZ_RUNS ?? 15),
  minRuns: Number(process.env.FUZZ_MIN_RUNS ?? 6),
  budgetMs: Number(process.env.FUZZ_BUDGET_MS ?? 60_000),
  seed: Number(process.env.FUZZ_SEED ?? 18),
}

const KNOWN: Record<string, string> = {}
const KNOWN_LOG: RegExp[] = []

const inPartB = (r: FuzzRoute) => r.path.startsWith('/v2/') || r.family === 'openai'

let s: TestServer
t.before(async () => {
  s = await startServer()
})
t.teardown(() => s.stop())

t.test('fuzzing every /v2 and chat-family route', async (t) => {
  const routes = (await routesOf(s)).filter(inPartB)
  t.ok(routes.length >= 40, `${routes.length} routes`)
  const hints = hintsFor(await seed(s))
  const { requests, ms } = await fuzzRoutes(s, routes, hints, PLAN, (r) => {
    t.comment(`${r.route}: ${r.requests} requests in ${r.ms} ms, statuses ${JSON.stringify(r.statuses)}`)
    t.same(r.problems, [], r.route, KNOWN[r.route] && r.problems.length ? { todo: KNOWN[r.route] } : {})
  })
  t.comment(`${routes.length} routes, ${requests} requests in ${ms} ms`)
  const unknown = serverErrors(s).filter((e) => !KNOWN_LOG.some((k) => k.test(e)))
  t.same(unknown, [], 'the server logged no internal error (other than the known ones)')
})
