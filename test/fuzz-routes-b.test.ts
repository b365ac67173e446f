import { fuzzPart } from './helpers/fuzz-runner.js'

/**
 * The /v2 routes and the chat/inference family of /openapi.json (the rest is in fuzz-routes-a), fuzzed from their
 * own request schemas. Chat requests sample at most two tokens (the hints cap max_tokens): the answers are checked,
 * not the generation. FUZZ_RUNS raises the number of requests per route.
 */
fuzzPart('fuzzing every /v2 and chat-family route', (r) => r.path.startsWith('/v2/') || r.family === 'openai', 40)
