/**
 * The Piscina options every pool of the server shares (ingest, table bodies, readers), so that what each must have
 * is set in one place:
 *
 * - `atomics: 'disabled'`: workers wait on messages, not spin: the event loop and DuckDB need the cores.
 * - `idleTimeout`: an idle worker stays a minute, so bursts do not pay for thread starts.
 * - `execArgv`: Piscina loads its task file with `require()` first. Where `require()` loads ES modules (Node 20.19+,
 *   22.12+), a worker terminated while that synchronous load is under way aborts the whole process: V8's
 *   "Module::IsGraphAsync must be used on an instantiated module", from a pool closed right after it started its
 *   workers (a server stopped just after start: 1 stop in 120 here, and once in CI). With `require()` of ES modules
 *   off in the workers, Piscina's `require()` throws ERR_REQUIRE_ESM and it loads the file with `import()`, which a
 *   termination interrupts cleanly. The flag is given only where the feature (and so the flag) exists.
 */
export function pooledWorkerOptions(): { atomics: 'disabled'; idleTimeout: number; execArgv: string[] } {
  return { atomics: 'disabled', idleTimeout: 60_000, execArgv: pooledWorkerExecArgv() }
}

export function pooledWorkerExecArgv(): string[] {
  const requireModule = (process.features as { require_module?: boolean }).require_module === true
  return requireModule ? [...workerExecArgv(), '--no-experimental-require-module'] : workerExecArgv()
}

/**
 * The process's node flags a worker thread may be given: V8's heap flags (the server starts with one, see weft.cts)
 * apply to the whole process and make `new Worker` throw ERR_WORKER_INVALID_EXEC_ARGV when passed again.
 */
export function workerExecArgv(): string[] {
  return process.execArgv.filter((a) => !/^--(initial|max|min)-(old|semi)-space-size\b|^--(initial|max)-heap-size\b/.test(a))
}
