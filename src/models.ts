import fs from 'node:fs/promises'
import path from 'node:path'
import type { Logger } from 'pino'
import type { Config } from './core/config.js'
import { ModelPool } from './inference/client.js'
import { makeTinyModel } from './fixtures/tiny-model.js'

/**
 * The models a server serves, each in worker threads of its own. This file imports little (not the server's
 * stack), so that `weft serve` can start the workers first: they load TF.js and the weights (~0.5–1 s) while
 * the main thread loads the server's modules and opens its stores (~1 s), instead of after.
 */

/** The built-in model's name and where it is made on first start. */
export const TINY_MODEL = 'weft-tiny'

/**
 * Makes the built-in model in `dir` unless it is there. The model may be made before the catalog's lock is
 * held (see above): two starts on one fresh data dir each make their own copy and the first rename wins.
 */
async function ensureTinyModel(dir: string, log: Logger): Promise<void> {
  const made = () =>
    fs.stat(path.join(dir, 'config.json')).then(
      () => true,
      () => false,
    )
  if (await made()) return
  const tmp = `${dir}.tmp-${process.pid}`
  await makeTinyModel(tmp)
  try {
    await fs.rename(tmp, dir)
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code
    if (code !== 'ENOTEMPTY' && code !== 'EEXIST') throw e
    // A whole copy made meanwhile by another start is kept; a leftover without config.json is replaced.
    if (await made()) return
    await fs.rm(dir, { recursive: true, force: true })
    await fs.rename(tmp, dir)
  } finally {
    await fs.rm(tmp, { recursive: true, force: true })
  }
  log.info({ dir }, 'made the built-in tiny model')
}

/**
 * One inference worker per model directory. With none configured, the built-in tiny model (made in
 * DATA_DIR/models on first start, deterministically: nothing is downloaded); `none` serves no model.
 */
export async function startModels(config: Config, log: Logger): Promise<ModelPool[]> {
  if (config.models.includes('none')) return []
  let dirs = config.models
  let names = config.servedModelNames
  if (!dirs.length) {
    const dir = path.join(config.dataDir, 'models', TINY_MODEL)
    await ensureTinyModel(dir, log)
    dirs = [dir]
    names = names.length ? names : [TINY_MODEL]
  }
  if (names.length && names.length !== dirs.length)
    throw new Error(`--served-model-name names ${names.length} models, --model gives ${dirs.length}`)
  const engine = {
    maxNumSeqs: config.maxNumSeqs,
    maxWaiting: config.maxWaitingRequests,
    kvTokens: config.kvCacheTokens,
    prefixCaching: config.enablePrefixCaching,
    prefillChunk: config.prefillChunk,
    priority: config.schedulingPolicy === 'priority',
    maxLogprobs: 20,
  }
  const started: ModelPool[] = []
  try {
    for (const [i, dir] of dirs.entries()) {
      started.push(
        await ModelPool.start(
          {
            modelDir: dir,
            servedName: names[i] ?? path.basename(dir),
            engine,
            backend: config.inferenceBackend,
            threads: config.inferenceThreads,
          },
          log,
          config.modelReplicas,
        ),
      )
    }
  } catch (e) {
    await Promise.all(started.map((m) => m.close().catch(() => {})))
    throw e
  }
  return started
}

/** Closes what a start of models started, once it has; a start that failed closed its own. */
export async function closeModels(starting: Promise<ModelPool[]>): Promise<void> {
  const models = await starting.catch(() => [])
  await Promise.all(models.map((m) => m.close().catch(() => {})))
}
