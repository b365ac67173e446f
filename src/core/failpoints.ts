/**
 * Fault injection for tests, off unless the environment names them: WEFT_FAILPOINTS is a
 * comma-separated list of `name` or `name:argument` (for example `inference-step:40`). Read once, at
 * load: a server started without the variable has every failpoint off.
 */
const armed = parse(process.env.WEFT_FAILPOINTS ?? '')

function parse(spec: string): Map<string, string> {
  const out = new Map<string, string>()
  for (const item of spec.split(',')) {
    const s = item.trim()
    if (!s) continue
    const colon = s.indexOf(':')
    if (colon < 0) out.set(s, '')
    else out.set(s.slice(0, colon), s.slice(colon + 1))
  }
  return out
}

/** The failpoint's argument ('' when it has none), or null when it is off. */
export function failpoint(name: string): string | null {
  return armed.get(name) ?? null
}

/** A failpoint whose argument is a positive integer (a count), or null when it is off or malformed. */
export function failpointCount(name: string): number | null {
  const arg = failpoint(name)
  if (arg === null || !/^[1-9][0-9]{0,8}$/.test(arg)) return null
  return Number(arg)
}

/**
 * A step that crash and disk-full tests stop at. `name:kill` ends the process there at once (SIGKILL:
 * no cleanup runs, as in a power cut); `name:enospc` throws a disk-full error every time it is reached,
 * `name:enospc*N` only the first N times (then the disk "has room again"). A no-op, one map lookup on
 * an empty map, when WEFT_FAILPOINTS is unset.
 */
export function hit(name: string): void {
  if (armed.size === 0) return
  const action = armed.get(name)
  if (action === undefined) return
  if (action === 'kill') process.kill(process.pid, 'SIGKILL')
  const m = /^enospc(?:\*([0-9]{1,9}))?$/.exec(action)
  if (!m) return
  if (m[1] !== undefined) {
    const left = Number(m[1])
    if (left <= 0) return
    armed.set(name, `enospc*${left - 1}`)
  }
  throw Object.assign(new Error(`ENOSPC: no space left on device (failpoint ${name})`), { code: 'ENOSPC', errno: -28 })
}
