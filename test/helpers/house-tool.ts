import { execFileSync } from 'node:child_process'
import path from 'node:path'
import { ROOT } from './server.js'

/** A tool installed in node_modules/.bin. */
export const bin = (name: string) => path.join(ROOT, 'node_modules', '.bin', name)

/** What a tool printed when it failed ('' when it passed). */
export function toolFailure(name: string, args: string[]): string {
  try {
    execFileSync(bin(name), args, { cwd: ROOT, stdio: 'pipe' })
    return ''
  } catch (e) {
    return String((e as { stdout?: Buffer }).stdout ?? e)
  }
}
