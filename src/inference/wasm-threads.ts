/**
 * tfjs-backend-wasm's threaded SIMD build, started in Node.
 *
 * The package turns threads off in Node (upstream tfjs issue 3830) and its threaded build assumes a browser in
 * three places; each is bridged here, only while the backend initializes, only in the thread that calls this
 * (the inference worker):
 *  1. Emscripten's pthread workers are started from a `blob:` URL, which Node's `Worker` refuses: the script
 *     is written to a file and `URL.createObjectURL` hands out its path.
 *  2. Each pthread worker loads the main script from a Blob (the factory's source text, which names the rollup
 *     bundle's `require$$N` aliases and `commonjsGlobal`): it is written to a file with those names defined
 *     (read off the bundle's own header), and the worker script is told to load that file.
 *  3. The native side caps XNNPACK's pool at half the logical cores Emscripten reports (`os.cpus()`):
 *     during init `os.cpus()` reports enough cores for the count asked for, then is restored.
 * The files go to a directory named by a hash of the bundle, so restarts and replicas reuse them. A threaded start
 * that fails anyway (after a tfjs upgrade, say) is contained (`guard`) so that the caller can fall back.
 * At most 8 threads: Emscripten starts 8 thread workers up front, and later ones would need the bridges again.
 */
import crypto from 'node:crypto'
import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { createRequire } from 'node:module'
import wt, { type Worker } from 'node:worker_threads'
import * as tf from '@tensorflow/tfjs-core'
import { setThreadsCount, getThreadsCount } from '@tensorflow/tfjs-backend-wasm'
import { failpoint } from '../core/failpoints.js'

const require = createRequire(import.meta.url)
/** A threaded init that has not finished by then is taken as failed (it hangs if the pthread workers never load). */
const INIT_TIMEOUT_MS = 30_000
const MAIN_MARK = 'var WasmBackendModuleThreadedSimd'

/** The bundle's `var require$$N = require('x');` lines: the names the factory's source text uses unbound. */
function bundlePrelude(bundle: string): string {
  const lines = [...bundle.slice(0, 20_000).matchAll(/^var (require\$\$\d+) = require\((['"][\w:/-]+['"])\);$/gm)]
  return lines.map(([, name, mod]) => `var ${name} = require(${mod});`).join('\n') + '\nvar commonjsGlobal = globalThis;\n'
}

interface Files {
  main: string
  worker: string
  prelude: string
}

function filesFor(): Files {
  const bundle = fs.readFileSync(require.resolve('@tensorflow/tfjs-backend-wasm'), 'utf8')
  const hash = crypto.createHash('sha256').update(bundle).digest('hex').slice(0, 16)
  const dir = path.join(os.tmpdir(), `weft-wasm-threads-${hash}`)
  fs.mkdirSync(dir, { recursive: true })
  return { main: path.join(dir, 'main.cjs'), worker: path.join(dir, 'worker.cjs'), prelude: bundlePrelude(bundle) }
}

/** Written whole under a temporary name then renamed, so a replica starting beside never reads half a file. */
function writeAtomic(file: string, text: string): void {
  const tmp = `${file}.${process.pid}.${crypto.randomUUID()}`
  fs.writeFileSync(tmp, text)
  fs.renameSync(tmp, file)
}

/** Installs the three bridges; the returned function takes them all out again. */
function bridge(files: Files, threads: number): () => void {
  const texts = new WeakMap<Blob, string>()
  const OrigBlob = globalThis.Blob
  const origUrl = URL.createObjectURL
  const origCpus = os.cpus
  globalThis.Blob = class extends OrigBlob {
    constructor(...args: ConstructorParameters<typeof Blob>) {
      super(...args)
      const parts = args[0]
      if (!parts?.every((p) => typeof p === 'string')) return
      const text = (parts as string[]).join('')
      texts.set(this, text)
      if (text.startsWith(MAIN_MARK)) writeAtomic(files.main, files.prelude + text)
    }
  }
  // On the main thread the only object URL the package makes is the pthread worker's script; inside each
  // pthread worker, the one it makes is for the main script, which now lives in a file. Tests leave this
  // bridge out (WEFT_FAILPOINTS=wasm-threads-init), as a tfjs upgrade could, to see the threaded start fail.
  if (failpoint('wasm-threads-init') === null)
    URL.createObjectURL = (b: Blob): string => {
      const text = texts.get(b)
      if (text === undefined) return origUrl(b)
      const shim = `URL.createObjectURL = () => ${JSON.stringify(files.main)}; URL.revokeObjectURL = () => {};\n`
      writeAtomic(files.worker, shim + text)
      return files.worker
    }
  os.cpus = () => {
    const cpus = origCpus()
    return Array.from({ length: Math.max(cpus.length, 2 * threads) }, (_, i) => cpus[i % cpus.length]!)
  }
  return () => {
    globalThis.Blob = OrigBlob
    URL.createObjectURL = origUrl
    os.cpus = origCpus
  }
}

/**
 * What a failed threaded init leaves behind, contained: TF.js reports the failure as console warnings (kept for
 * the server's one log line), and a thread worker that fails to load makes Emscripten throw from an event
 * handler, which would end the inference worker (caught here, and the thread workers stopped).
 */
function guard(): { failed: Promise<never>; warned: string[]; release(ok: boolean): Promise<void> } {
  const warned: string[] = []
  let capturing = true
  const warn = console.warn
  // Emscripten binds console.warn when its module is made: later warnings pass through.
  console.warn = (...m: unknown[]) => {
    if (!capturing) return warn(...m)
    if (warned.length < 20) warned.push(m.map((x) => String(x).split('\n')[0]).join(' '))
  }
  const workers: Worker[] = []
  const OrigWorker = wt.Worker
  wt.Worker = class extends OrigWorker {
    constructor(...args: ConstructorParameters<typeof Worker>) {
      super(...args)
      workers.push(this)
    }
  }
  let fail!: (e: unknown) => void
  const failed = new Promise<never>((_, reject) => (fail = reject))
  failed.catch(() => {})
  const onError = (e: Error) => fail(new Error(`a thread worker failed: ${e.message}`))
  process.on('uncaughtException', onError)
  // Emscripten's module adds process handlers that rethrow (fatal, as Node's defaults are): left out here.
  const on = process.on
  process.on = function (this: NodeJS.Process, event: string | symbol, listener: (...a: unknown[]) => void) {
    return event === 'uncaughtException' || event === 'unhandledRejection' ? this : on.call(this, event, listener)
  } as typeof process.on
  const timer = setTimeout(() => fail(new Error(`the threaded wasm init took over ${INIT_TIMEOUT_MS} ms`)), INIT_TIMEOUT_MS)
  return {
    failed,
    warned,
    async release(ok) {
      clearTimeout(timer)
      capturing = false
      console.warn = warn
      wt.Worker = OrigWorker
      process.on = on
      if (!ok) await Promise.all(workers.map((w) => w.terminate().catch(() => 0)))
      process.off('uncaughtException', onError)
    },
  }
}

/**
 * Starts the wasm backend's threaded build asking for `threads` XNNPACK threads (the wasm paths already set) and
 * returns the count it runs. Throws when the threaded build does not start; the caller then falls back to one thread.
 */
export async function startThreadedWasm(threads: number): Promise<number> {
  if (!(await tf.env().getAsync('WASM_HAS_SIMD_SUPPORT'))) throw new Error('the runtime has no wasm SIMD (the threaded build needs it)')
  const restore = bridge(filesFor(), threads)
  const g = guard()
  let ok = false
  tf.env().set('WASM_HAS_MULTITHREAD_SUPPORT', true)
  setThreadsCount(threads)
  try {
    ok = await Promise.race([tf.setBackend('wasm'), g.failed])
    if (!ok) throw new Error(`the threaded wasm build did not initialize: ${g.warned.join('; ').slice(0, 1000)}`)
  } finally {
    restore()
    await g.release(ok)
  }
  return getThreadsCount()
}

/**
 * The single-threaded build after a failed threaded start: the failed init left no backend instance, so
 * setting the backend again runs the package's factory afresh (and outdates a threaded init still pending).
 */
export async function startSingleThreadedWasm(): Promise<boolean> {
  tf.env().set('WASM_HAS_MULTITHREAD_SUPPORT', false)
  setThreadsCount(1)
  return tf.setBackend('wasm')
}
