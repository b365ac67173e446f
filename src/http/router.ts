/**
 * Path router. Patterns use the spec's brace syntax: `/v2/{entity}/{project}/datasets`, and a
 * trailing catch-all such as `/inference/v1{path}` (the rest of the path, leading slash included).
 * A trailing slash on the request path is ignored, so `/v1/chat/completions/` and
 * `/v1/chat/completions` are the same route.
 */
import type { Method } from '../api/route.js'

export type { Method }

export type RouteMatch<R> =
  | { kind: 'found'; route: R; params: Record<string, string> }
  | { kind: 'method_not_allowed'; allow: Method[] }
  | { kind: 'not_found' }
  | { kind: 'bad_path'; message: string }

type Segment = { literal: string } | { param: string }

interface DynamicEntry<R> {
  pattern: string
  segments: Segment[]
  /** Set when the last segment is a catch-all: literal prefix of that segment and the param name. */
  catchAll?: { prefix: string; param: string }
  methods: Map<Method, R>
}

const PARAM_SEGMENT = /^\{([A-Za-z_][A-Za-z0-9_]*)\}$/
const CATCH_ALL_SEGMENT = /^([^{}]*)\{([A-Za-z_][A-Za-z0-9_]*)\}$/

export function normalizePath(p: string): string {
  let end = p.length
  while (end > 1 && p.charCodeAt(end - 1) === 47 /* / */) end--
  return end === p.length ? p : p.slice(0, end)
}

export class Router<R> {
  private readonly statics = new Map<string, Map<Method, R>>()
  private readonly dynamics: DynamicEntry<R>[] = []

  add(method: Method, pattern: string, route: R, opts: { catchAll?: boolean } = {}): void {
    const norm = normalizePath(pattern)
    if (!norm.includes('{')) {
      const m = this.statics.get(norm) ?? new Map<Method, R>()
      if (m.has(method)) throw new Error(`duplicate route ${method} ${pattern}`)
      m.set(method, route)
      this.statics.set(norm, m)
      return
    }
    let entry = this.dynamics.find((d) => d.pattern === norm)
    if (!entry) {
      entry = this.compile(norm, opts.catchAll === true)
      this.dynamics.push(entry)
      // More literal segments first, so `/x/{a}/versions` beats `/x/{a}/{b}`; catch-alls last.
      this.dynamics.sort((a, b) => specificity(b) - specificity(a))
    }
    if (entry.methods.has(method)) throw new Error(`duplicate route ${method} ${pattern}`)
    entry.methods.set(method, route)
  }

  private compile(pattern: string, catchAll: boolean): DynamicEntry<R> {
    const parts = pattern.split('/').slice(1)
    const segments: Segment[] = []
    let tail: DynamicEntry<R>['catchAll']
    parts.forEach((part, i) => {
      const p = PARAM_SEGMENT.exec(part)
      if (catchAll && i === parts.length - 1) {
        const c = CATCH_ALL_SEGMENT.exec(part)
        if (!c) throw new Error(`bad catch-all pattern ${pattern}`)
        tail = { prefix: c[1]!, param: c[2]! }
      } else if (p) segments.push({ param: p[1]! })
      else if (part.includes('{') || part.includes('}')) throw new Error(`bad pattern ${pattern}`)
      else segments.push({ literal: part })
    })
    return { pattern, segments, catchAll: tail, methods: new Map() }
  }

  match(method: string, rawPath: string): RouteMatch<R> {
    const path = normalizePath(rawPath)
    const stat = this.statics.get(path)
    if (stat) return pick(stat, method, {})
    const parts = path.split('/')
    for (const d of this.dynamics) {
      const params = matchEntry(d, parts)
      if (params === undefined) continue
      if (params === null) return { kind: 'bad_path', message: `Path ${JSON.stringify(rawPath)} is not valid percent-encoding` }
      return pick(d.methods, method, params)
    }
    return { kind: 'not_found' }
  }

  /** Every (method, pattern) pair, in registration-independent order, for the OpenAPI document. */
  routes(): { method: Method; pattern: string; route: R }[] {
    const out: { method: Method; pattern: string; route: R }[] = []
    for (const [pattern, m] of this.statics) for (const [method, route] of m) out.push({ method, pattern, route })
    for (const d of this.dynamics) for (const [method, route] of d.methods) out.push({ method, pattern: d.pattern, route })
    return out.sort((a, b) => a.pattern.localeCompare(b.pattern) || a.method.localeCompare(b.method))
  }
}

function specificity(d: DynamicEntry<unknown>): number {
  const literals = d.segments.filter((s) => 'literal' in s).length
  return (d.catchAll ? 0 : 1000) + d.segments.length * 10 + literals
}

function pick<R>(methods: Map<Method, R>, method: string, params: Record<string, string>): RouteMatch<R> {
  const route = methods.get(method as Method)
  if (route !== undefined) return { kind: 'found', route, params }
  return { kind: 'method_not_allowed', allow: [...methods.keys()].sort() }
}

/** undefined: no match; null: matched but a segment is not valid percent-encoding. */
function matchEntry(d: DynamicEntry<unknown>, parts: string[]): Record<string, string> | undefined | null {
  // parts[0] is the empty string before the leading slash.
  const n = d.segments.length
  if (d.catchAll ? parts.length < n + 2 : parts.length !== n + 1) return undefined
  const params: Record<string, string> = {}
  for (let i = 0; i < n; i++) {
    const seg = d.segments[i]!
    const part = parts[i + 1]!
    if ('literal' in seg) {
      if (part !== seg.literal) return undefined
    } else {
      if (part.length === 0) return undefined
      const v = decode(part)
      if (v === null) return null
      params[seg.param] = v
    }
  }
  if (d.catchAll) {
    const rest = parts.slice(n + 1)
    if (!rest[0]!.startsWith(d.catchAll.prefix)) return undefined
    const tail = rest[0]!.slice(d.catchAll.prefix.length)
    // `/inference/v1{path}` must not match `/inference/v1x`: the tail starts at a segment boundary.
    if (tail.length > 0) return undefined
    const v = decode('/' + rest.slice(1).join('/'))
    if (v === null) return null
    params[d.catchAll.param] = v
  }
  return params
}

function decode(s: string): string | null {
  if (!s.includes('%')) return s
  try {
    return decodeURIComponent(s)
  } catch {
    return null
  }
}
