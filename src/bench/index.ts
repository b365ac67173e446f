import { ConfigError } from '../core/config.js'
import { benchCompare } from './compare.js'
import { benchServe } from './serve.js'
import { benchTrace } from './trace.js'

/**
 * `weft bench serve` and `weft bench trace`, a load-test harness that talks to the servers it measures only over
 * HTTP, so it measures weft, vLLM, llama.cpp or a hosted API alike; `weft bench compare` sets their results side by side.
 */
export async function benchCommand(positional: string[], flags: Record<string, string>, usage: string): Promise<void> {
  const [sub, ...rest] = positional
  if (sub === 'serve') return benchServe(flags)
  if (sub === 'trace') return benchTrace(flags)
  if (sub === 'compare') return benchCompare(rest, flags)
  throw new ConfigError(`'weft bench' takes serve, trace or compare\n\n${usage}`)
}
