import * as tf from '@tensorflow/tfjs'
import { setWasmPaths } from '@tensorflow/tfjs-backend-wasm'
import { readModelWeights } from './dist/src/inference/safetensors.js'
import { LlamaModel } from './dist/src/inference/llama.js'
import { ModelTokenizer } from './dist/src/inference/tokenizer.js'
import fs from 'node:fs'
setWasmPaths('/work/main/node_modules/@tensorflow/tfjs-backend-wasm/dist/')
await tf.setBackend('wasm')
const dir = '/tmp/p/tiny'
const cfg = JSON.parse(fs.readFileSync(dir + '/config.json'))
const m = LlamaModel.fromWeights(cfg, await readModelWeights(dir))
const tok = await ModelTokenizer.load(dir, cfg.vocab_size, [cfg.eos_token_id])
const prompt = tok.encode(tok.render([{ role: 'user', content: 'Hello there, who are you?' }], { addGenerationPrompt: true, continueFinalMessage: false }), false)
console.log('prompt', prompt.length, 'tensors before', tf.memory().numTensors)
const cache = m.newCache()
let t = performance.now()
let [logits] = m.forward([{ tokens: prompt, cache }])
let next = (await logits.argMax(-1).data())[0]; logits.dispose()
console.log('prefill', (performance.now() - t).toFixed(1), 'ms next', next)
const out = [next]
t = performance.now()
for (let i = 0; i < 30; i++) { const [l] = m.forward([{ tokens: [next], cache }]); next = (await l.argMax(-1).data())[0]; l.dispose(); out.push(next) }
console.log('30 decode steps', (performance.now() - t).toFixed(1), 'ms', out.join(' '))
console.log(JSON.stringify(tok.decode(out, false)))
// Check: full recompute equals incremental
const c2 = m.newCache()
const [all] = m.forward([{ tokens: [...prompt, ...out.slice(0, 5)], cache: c2, allLogits: true }])
const am = await all.argMax(-1).data()
console.log('consistency', [...am.slice(prompt.length - 1, prompt.length + 4)].join(' '), 'vs', out.slice(0, 5).join(' '))
all.dispose(); cache.dispose(); c2.dispose()
console.log('tensors after', tf.memory().numTensors)
