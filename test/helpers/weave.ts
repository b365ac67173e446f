import type { TestServer } from './server.js'

/**
 * Points the real `weave` npm SDK at a test server, the way its docs say to point it at a self-hosted
 * one: it reads these variables at `weave.init`, so they hold for the rest of the test process.
 */
export function pointWeaveAt(s: TestServer): void {
  process.env.WF_TRACE_SERVER_URL = s.url
  process.env.WANDB_API_KEY = s.key
}
