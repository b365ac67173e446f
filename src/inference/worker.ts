import fs from 'node:fs/promises'
import { toolParserForTemplate } from './parsers/tool-parsers.js'
import path from 'node:path'
import { createRequire } from 'node:module'
import type { MessagePort } from 'node:worker_threads'
import * as tf from '@tensorflow/tfjs-core'
import { setWasmPaths } from '@tensorflow/tfjs-backend-wasm'
import { startSingleThreadedWasm, startThreadedWasm } from './wasm-threads.js'
import { LlamaModel, type LlamaConfig } from './llama.js'
import { readModelWeights } from './safetensors.js'
import { ModelTokenizer } from './tokenizer.js'
import { Engine } from './engine.js'
import type { EngineOptions, GenerationDefaults } from './request.js'
import type { ModelInfo, WorkerCommand, WorkerEvent } from './protocol.js'
import { GrammarLanes } from './structured/lanes.js'
import { readGrammarVocab } from './structured/vocab.js'
import { failpointCount } from '../core/failpoints.js'

export interface WorkerConfig {
  modelDir: string
  servedName: string
  engine: EngineOptions
  /** `auto` (the best present), or one of tensorflow, wasm, cpu. */
  backend: string
  /** XNNPACK threads of the wasm backend (1: its single-threaded build). */
  threads?: number
  /** How many times this model's worker was started again before this one (0: the first start). */
  restart?: number
}

/** The backend a worker computes on, and with how many threads. */
export interface BackendChoice {
  name: string
  threads: number
  /** Why the threaded wasm build asked for did not start (the single-threaded one runs instead). */
  threadsError?: string
}

/**
 * The best TF.js backend present: tfjs-node-gpu (when its optional install succeeded), else wasm
 * (SIMD when the runtime has it; the threaded build when `threads` > 1), else the plain JavaScript one.
 */
export async function startBackend(wanted = 'auto', threads = 1): Promise<BackendChoice> {
  if (wanted === 'auto' || wanted === 'tensorflow') {
    try {
      // An optional dependency: its name is not spelled out, so the compiler does not require it.
      const gpu = '@tensorflow/tfjs-node-gpu'
      await import(gpu)
      if (await tf.setBackend('tensorflow')) return { name: 'tensorflow', threads: 0 }
    } catch {
      if (wanted === 'tensorflow') throw new Error('the tensorflow backend (@tensorflow/tfjs-node-gpu) is not installed or does not load')
    }
  }
  if (wanted === 'auto' || wanted === 'wasm') {
    try {
      const require = createRequire(import.meta.url)
      setWasmPaths(path.join(path.dirname(require.resolve('@tensorflow/tfjs-backend-wasm/package.json')), 'dist') + path.sep)
      const wasm = await startWasm(threads)
      if (wasm) return wasm
    } catch {
      if (wanted === 'wasm') throw new Error('the wasm backend does not load')
    }
  }
  // The plain JavaScript backend is a fallback: it loads only when needed (the worker imports tfjs-core and the wasm
  // backend rather than all of @tensorflow/tfjs, whose layers, converter, data and WebGL parts took ~1 s to load).
  await import('@tensorflow/tfjs-backend-cpu')
  await tf.setBackend('cpu')
  return { name: 'cpu', threads: 1 }
}

/** The backend's name, single-threaded (what tests that run the model in-process use). */
export async function chooseBackend(wanted = 'auto'): Promise<string> {
  return (await startBackend(wanted, 1)).name
}

/** The wasm backend, threaded when asked and it starts, else single-threaded; null when neither loads. */
async function startWasm(threads: number): Promise<BackendChoice | null> {
  let threadsError: string | undefined
  if (threads > 1) {
    try {
      return { name: 'wasm-simd', threads: await startThreadedWasm(threads) }
    } catch (e) {
      threadsError = e instanceof Error ? e.message : String(e)
    }
  }
  if (!(await startSingleThreadedWasm())) return null
  return { name: tf.env().getBool('WASM_HAS_SIMD_SUPPORT') ? 'wasm-simd' : 'wasm', threads: 1, threadsError }
}

async function readJson<T>(file: string, fallback: T): Promise<T> {
  try {
    return JSON.parse(await fs.readFile(file, 'utf8')) as T
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'ENOENT') return fallback
    throw e
  }
}

/** A model directory loaded: the model, its tokenizer, its sampling defaults, and what /v1/models tells of it. */
export interface Loaded {
  cfg: LlamaConfig
  model: LlamaModel
  tok: ModelTokenizer
  gen: GenerationDefaults
  arch: string
  parameters: number
}

export async function loadModel(dir: string): Promise<Loaded> {
  const cfg = await readJson<LlamaConfig | null>(path.join(dir, 'config.json'), null)
  if (!cfg) throw new Error(`${dir}: no config.json`)
  const arch = cfg.architectures?.[0] ?? cfg.model_type ?? 'unknown'
  if (!/^(Llama|Mistral|Qwen2)ForCausalLM$/.test(arch))
    throw new Error(`${dir}: architecture ${arch} is not supported (Llama, Mistral and Qwen2 are)`)
  const gen = await readJson<GenerationDefaults & { eos_token_id?: number | number[] }>(path.join(dir, 'generation_config.json'), {})
  const eos = [gen.eos_token_id ?? [], (cfg as { eos_token_id?: number | number[] }).eos_token_id ?? []].flat()
  const weights = await readModelWeights(dir)
  let parameters = 0
  for (const t of weights.values()) parameters += t.data.length
  const model = LlamaModel.fromWeights(cfg, weights)
  weights.clear()
  const tok = await ModelTokenizer.load(dir, cfg.vocab_size, eos)
  return { cfg, model, tok, gen, arch, parameters }
}

/** Loads the model of a Hugging Face directory and answers commands on `port` until told to stop. */
export async function serveModel(config: WorkerConfig, port: MessagePort): Promise<void> {
  const emit = (e: WorkerEvent) => port.postMessage(e)
  // Fault injection (WEFT_FAILPOINTS=inference-restart-load:K): the first K restarts fail to load.
  if ((config.restart ?? 0) > 0 && (config.restart ?? 0) <= (failpointCount('inference-restart-load') ?? 0))
    throw new Error(`failpoint inference-restart-load (restart ${config.restart})`)
  const backend = await startBackend(config.backend, config.threads ?? 1)
  const dir = config.modelDir
  const m = await loadModel(dir)
  armStepFailpoint(m.model)
  const grammars = new GrammarLanes({ vocab: await readGrammarVocab(dir, m.cfg.vocab_size, m.tok.eosIds) })
  const engine = new Engine(m.model, m.tok, m.gen, config.engine, emit, grammars)
  const info: ModelInfo = {
    name: config.servedName,
    root: dir,
    maxModelLen: m.model.maxPositions,
    vocabSize: m.cfg.vocab_size,
    backend: backend.name,
    threads: backend.threads,
    threadsError: backend.threadsError,
    architecture: m.arch,
    parameters: m.parameters,
    toolCallParser: toolParserForTemplate(m.tok.chatTemplate),
  }
  port.on('message', (c: WorkerCommand) => {
    // A command that throws fails alone: uncaught, it would end the worker and every request running in it.
    try {
      answer(c, engine, m, emit)
    } catch (e) {
      if ('id' in c) emit({ type: 'reply', id: c.id, error: { status: 400, message: e instanceof Error ? e.message : String(e) } })
    }
  })
  emit({ type: 'ready', model: info })
  await engine.run()
  engine.dispose()
  await grammars.close()
  m.model.dispose()
}

/**
 * Fault injection (WEFT_FAILPOINTS=inference-step:N): the thread ends at its Nth forward pass, mid-batch,
 * as a crash would, so tests can see its requests fail and the restarted worker serve the next one. The
 * count restarts with each worker.
 */
function armStepFailpoint(model: LlamaModel): void {
  const n = failpointCount('inference-step')
  if (n === null) return
  const forward = model.forward.bind(model)
  let steps = 0
  model.forward = (batch) => {
    if (++steps === n) process.exit(70)
    return forward(batch)
  }
}

/** One command from the main thread. */
function answer(m: WorkerCommand, engine: Engine, { cfg, tok }: Loaded, emit: (e: WorkerEvent) => void): void {
  switch (m.type) {
    case 'generate':
      engine.submit(m.req)
      break
    case 'cancel':
      engine.cancel(m.id)
      break
    case 'tokenize':
      emit(tokenize(m, engine, tok))
      break
    case 'detokenize':
      if (m.tokens.some((t) => t >= cfg.vocab_size))
        emit({
          type: 'reply',
          id: m.id,
          error: { status: 400, message: `token id out of range: the vocabulary has ${cfg.vocab_size} tokens` },
        })
      else emit({ type: 'reply', id: m.id, result: tok.decode(m.tokens, false) })
      break
    case 'stats':
      emit({ type: 'reply', id: m.id, result: engine.stats })
      break
    case 'stop':
      engine.stop()
      break
  }
}

/** /tokenize: a chat rendered through the template, or a plain prompt. */
function tokenize(m: Extract<WorkerCommand, { type: 'tokenize' }>, engine: Engine, tok: ModelTokenizer): WorkerEvent {
  try {
    const ids = m.messages
      ? engine.promptIds({
          messages: m.messages,
          addGenerationPrompt: m.addGenerationPrompt ?? true,
          continueFinalMessage: m.continueFinalMessage ?? false,
          addSpecialTokens: m.addSpecialTokens,
          tools: m.tools ?? null,
          documents: null,
          chatTemplate: m.chatTemplate ?? null,
          chatTemplateKwargs: m.chatTemplateKwargs ?? null,
        })
      : tok.encode(m.prompt ?? '', m.addSpecialTokens)
    return { type: 'reply', id: m.id, result: { ids, strs: m.returnTokenStrs ? ids.map((i) => tok.tokenString(i) ?? '') : null } }
  } catch (e) {
    return { type: 'reply', id: m.id, error: { status: 400, message: (e as Error).message } }
  }
}
