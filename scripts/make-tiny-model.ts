#!/usr/bin/env node
/**
 * Writes weft's built-in tiny model (the one `npm start` serves) into a directory, deterministically.
 *   node dist/scripts/make-tiny-model.js DIR [--arch llama|qwen2] [--hidden 64] [--layers 2] [--heads 4]
 *        [--kv-heads 2] [--intermediate 176] [--seed N] [--untied]
 * Bigger shapes make models for benchmarks (e.g. --hidden 768 --layers 16 --heads 12 --kv-heads 4
 * --intermediate 2048: about 100M parameters). The server makes the default one itself at first start.
 */
import { parseFlags } from '../src/core/config.js'
import { makeTinyModel } from '../src/fixtures/tiny-model.js'

const { flags, positional } = parseFlags(process.argv.slice(2))
const dir = positional[0]
if (!dir) {
  process.stderr.write(
    'usage: make-tiny-model DIR [--arch llama|qwen2] [--hidden N] [--layers N] [--heads N] [--kv-heads N] [--intermediate N] [--seed N] [--untied]\n',
  )
  process.exit(2)
}
const num = (k: string) => (flags[k] === undefined ? undefined : Number(flags[k]))
await makeTinyModel(dir, {
  arch: flags.arch === 'qwen2' ? 'qwen2' : 'llama',
  hidden: num('hidden'),
  layers: num('layers'),
  heads: num('heads'),
  kvHeads: num('kv-heads'),
  intermediate: num('intermediate'),
  seed: num('seed'),
  tieEmbeddings: flags.untied === 'true' ? false : undefined,
})
process.stdout.write(`wrote ${dir}\n`)
