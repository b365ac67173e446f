import { execFileSync, spawn, type ExecFileSyncOptions, type SpawnOptions } from 'node:child_process'

/**
 * Processes a test starts (servers, the CLI, tools) run without tap's preload. Tap puts its process-info module in
 * NODE_OPTIONS and wraps child_process so that every child gets it back whatever env it is given; the module
 * registers hooks that send every module a child loads through a hooks thread and record each file's line lengths
 * for coverage, which is off here. Measured on a server start at load ~10: 3.0–3.5 s of CPU to listen with it,
 * 1.9–2.1 s without. So children are started through env(1), which takes NODE_OPTIONS out and puts back whatever
 * else it held, then execs the command (same pid: signals reach it).
 */
export function cleanArgs(cmd: string, args: readonly string[]): string[] {
  const kept = stripTap(process.env.NODE_OPTIONS ?? '')
  return ['-u', 'NODE_OPTIONS', ...(kept ? [`NODE_OPTIONS=${kept}`] : []), cmd, ...args]
}

/** spawn without tap's preload (see cleanArgs). */
export const spawnClean = (cmd: string, args: readonly string[], opts: SpawnOptions) => spawn('env', cleanArgs(cmd, args), opts)

/** execFileSync without tap's preload (see cleanArgs). */
export const execFileSyncClean = (cmd: string, args: readonly string[], opts: ExecFileSyncOptions) =>
  execFileSync('env', cleanArgs(cmd, args), opts)

/** NODE_OPTIONS without tap's own preloads and loaders (an option naming a file under @tapjs/, quoted or not). */
export function stripTap(options: string): string {
  return options
    .replace(/"?--(?:import|loader|require|experimental-loader)[= ]\S*@tapjs\/[^"\s]*"?/g, '')
    .replace(/\s+/g, ' ')
    .trim()
}
