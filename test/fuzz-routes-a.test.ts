import { fuzzPart } from './helpers/fuzz-runner.js'

/**
 * Every route of /openapi.json outside /v2 and the chat family (those are in fuzz-routes-b), fuzzed from its own
 * request schema: generated bodies and queries, then spoiled. FUZZ_RUNS raises the number of requests per route.
 */
fuzzPart('fuzzing every trace-family route outside /v2', (r) => !r.path.startsWith('/v2/') && r.family !== 'openai', 40)
