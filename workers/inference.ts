// Inference worker: one model, its scheduler and its generation loop, off the event loop.
import { parentPort, workerData } from 'node:worker_threads'
import { serveModel, type WorkerConfig } from '../src/inference/worker.js'

serveModel(workerData as WorkerConfig, parentPort!).then(
  () => process.exit(0),
  (e: Error) => {
    parentPort!.postMessage({ type: 'fatal', message: e.message })
    process.exit(1)
  },
)
