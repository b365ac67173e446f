import { ConfigError } from '../core/config.js'

/** Reads a command's flags, refusing ones it does not know, with typed getters that say what was wrong. */
export class Flags {
  constructor(
    private readonly flags: Record<string, string>,
    known: readonly string[],
    command: string,
  ) {
    const ok = new Set(known)
    for (const f of Object.keys(flags)) if (!ok.has(f)) throw new ConfigError(`unknown flag --${f} for 'weft ${command}'`)
  }

  str(name: string, fallback: string): string
  str(name: string): string | undefined
  str(name: string, fallback?: string): string | undefined {
    return this.flags[name] ?? fallback
  }

  num(name: string, fallback: number, opts: { min?: number; int?: boolean; inf?: boolean } = {}): number {
    const raw = this.flags[name]
    if (raw === undefined) return fallback
    const v = opts.inf && raw === 'inf' ? Infinity : Number(raw)
    const bad =
      Number.isNaN(v) ||
      (opts.int && !Number.isInteger(v)) ||
      (opts.min !== undefined && v < opts.min) ||
      (!opts.inf && !Number.isFinite(v))
    if (bad)
      throw new ConfigError(
        `--${name} takes ${opts.int ? 'an integer' : 'a number'}${opts.min !== undefined ? ` ≥ ${opts.min}` : ''}${opts.inf ? " or 'inf'" : ''}, not ${JSON.stringify(raw)}`,
      )
    return v
  }

  bool(name: string): boolean {
    const raw = this.flags[name]
    if (raw === undefined || raw === 'false') return false
    if (raw === 'true') return true
    throw new ConfigError(`--${name} is a switch (true or false), not ${JSON.stringify(raw)}`)
  }
}

/** `Name=value,Name2=value2` (vLLM's --header) as headers. */
export function parseHeaders(spec: string | undefined): Record<string, string> {
  const out: Record<string, string> = {}
  for (const part of (spec ?? '').split(',').filter(Boolean)) {
    const eq = part.indexOf('=')
    if (eq <= 0) throw new ConfigError(`--header takes Name=value, not ${JSON.stringify(part)}`)
    out[part.slice(0, eq).trim()] = part.slice(eq + 1).trim()
  }
  return out
}

/** A base URL without its trailing slash and without a trailing /v1 (the endpoint paths carry it). */
export function baseUrl(raw: string): string {
  let u: URL
  try {
    u = new URL(raw)
  } catch {
    throw new ConfigError(`not a URL: ${JSON.stringify(raw)}`)
  }
  return u.toString().replace(/\/+$/, '').replace(/\/v1$/, '')
}
