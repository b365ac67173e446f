import { ConfigError } from '../core/config.js'
import { benchServe } from './serve.js'
import { benchTrace } from './trace.js'

/**
 * `weft bench serve` and `weft bench trace`: a load-test harness that talks to the servers it measures only over
 * HTTP, so it measures weft, vLLM, llama.cpp or a hosted API alike.
 */
export async function benchCommand(positional: string[], flags: Record<string, string>, usage: string): Promise<void> {
  const [sub] = positional
  if (sub === 'serve') return benchServe(flags)
  if (sub === 'trace') return benchTrace(flags)
  throw new ConfigError(`'weft bench' takes serve or trace\n\n${usage}`)
}
