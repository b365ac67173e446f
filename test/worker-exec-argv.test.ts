import t from 'tap'
import path from 'node:path'
import { Worker } from 'node:worker_threads'
import { ROOT } from './helpers/server.js'
import { pooledWorkerExecArgv } from '../src/core/worker-pool-options.js'

// Piscina loads a task file with require() first. Where require() loads ES modules, a pool closed while its workers
// were still loading aborted the whole process (V8 "Module::IsGraphAsync …"; once in CI at a server stopped right
// after start, 2 of 100 pool closes in a loop here). The pools' workers run with require() of ES modules off, so
// Piscina loads their files with import(). This checks that the option reaches a worker and does what it says.
const requireModule = (process.features as { require_module?: boolean }).require_module === true

t.test(
  'pooled workers load ES modules with import(), not require()',
  { skip: !requireModule && 'this Node has no require() of ES modules' },
  async (t) => {
    t.ok(pooledWorkerExecArgv().includes('--no-experimental-require-module'), 'the flag is passed')
    const esm = path.join(ROOT, 'dist', 'workers', 'tables.js')
    const probe = (execArgv: string[]) =>
      new Promise<string>((resolve, reject) => {
        const w = new Worker(
          `const { parentPort, workerData } = require('node:worker_threads')
        try { require(workerData); parentPort.postMessage('loaded') } catch (e) { parentPort.postMessage(e.code) }`,
          { eval: true, workerData: esm, execArgv },
        )
        w.once('message', (m: string) => void w.terminate().then(() => resolve(m)))
        w.once('error', reject)
      })
    t.equal(await probe(pooledWorkerExecArgv()), 'ERR_REQUIRE_ESM', "a pool's worker cannot require() an ES module")
    t.equal(await probe(process.execArgv), 'loaded', 'without the flag it can (the path that aborted)')
  },
)
