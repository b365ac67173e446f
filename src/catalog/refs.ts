import { DomainError } from '../core/errors.js'
import type { ObjectsBackend, TablesBackend } from './backends.js'

/** Refs one /refs/read_batch may carry (Weave's limit; more is 400). */
export const MAX_REFS = 1000
/** Path segments (edges and their values) one ref may carry: bounds the work a single string can ask for. */
export const MAX_REF_SEGMENTS = 100
/** Nested refs one read may follow: a ref through a `v<N>` alias can point back at itself. */
export const MAX_REF_DEPTH = 32

const SCHEME = 'weave:///'
const INTERNAL_SCHEME = 'weave-trace-internal:///'
const EDGES = ['key', 'attr', 'index', 'id'] as const
type Edge = (typeof EDGES)[number]
export interface Step {
  edge: Edge
  arg: string
}

/** A parsed `weave:///entity/project/<kind>/...` ref (docs/refs.md). */
export interface Ref {
  entity: string
  project: string
  kind: string
  /** Object or op name; empty for tables and calls. */
  name: string
  /** Content digest (or alias) of an object or op; the table digest; the call id. */
  digest: string
  path: Step[]
}

const bad = (msg: string) => new DomainError(400, msg)

function decode(s: string, ref: string): string {
  try {
    return decodeURIComponent(s)
  } catch {
    throw bad(`Invalid ref ${ref.slice(0, 200)}: a path value is not URL-quoted correctly`)
  }
}

function parsePath(parts: string[], ref: string): Step[] {
  if (parts.length % 2) throw bad(`Invalid ref ${ref.slice(0, 200)}: path segments come in edge/value pairs`)
  const path: Step[] = []
  for (let i = 0; i < parts.length; i += 2) {
    const edge = parts[i] as Edge
    if (!EDGES.includes(edge)) throw bad(`Invalid ref ${ref.slice(0, 200)}: unknown edge ${JSON.stringify(parts[i]!.slice(0, 50))}`)
    const arg = decode(parts[i + 1]!, ref)
    if (edge === 'index' && !/^\d{1,9}$/.test(arg)) throw bad(`Invalid ref ${ref.slice(0, 200)}: index must be a non-negative integer`)
    path.push({ edge, arg })
  }
  return path
}

/** Parses a ref URI; the segment count is checked before the string is split, so a huge ref costs little. */
export function parseRef(ref: string): Ref {
  if (ref.startsWith(INTERNAL_SCHEME)) throw bad(`Invalid ref ${ref.slice(0, 200)}: internal refs are not accepted`)
  if (!ref.startsWith(SCHEME)) throw bad(`Invalid ref ${ref.slice(0, 200)}: a ref starts with ${SCHEME}`)
  let slashes = 0
  for (let i = SCHEME.length; i < ref.length; i++) if (ref.charCodeAt(i) === 47 && ++slashes > MAX_REF_SEGMENTS + 3) break
  if (slashes > MAX_REF_SEGMENTS + 3) throw bad(`Ref has more than ${MAX_REF_SEGMENTS} path segments`)
  const [entity, project, kind, head, ...rest] = ref.slice(SCHEME.length).split('/')
  if (!entity || !project || !kind || !head) throw bad(`Invalid ref ${ref.slice(0, 200)}: expected ${SCHEME}entity/project/kind/name`)
  let name = ''
  let digest = head
  if (kind === 'object' || kind === 'op') {
    const parts = head.split(':')
    if (parts.length !== 2 || !parts[0] || !parts[1]) throw bad(`Invalid ref ${ref.slice(0, 200)}: expected name:digest`)
    ;[name, digest] = [decode(parts[0], ref), parts[1]]
  }
  return { entity, project, kind, name, digest, path: parsePath(rest, ref) }
}

/** A string inside a value that is itself a ref; anything that does not parse is plain text. */
function asRef(v: unknown): Ref | null {
  if (typeof v !== 'string' || !v.startsWith(SCHEME)) return null
  try {
    return parseRef(v)
  } catch {
    return null
  }
}

/**
 * One step into a plain value. Weave stores an object's attributes as dict keys, so `attr` reads a key
 * as `key` does. A missing key, an index past the end, or a step into a scalar is null, as in Weave.
 */
function stepInto(val: unknown, s: Step): unknown {
  if (s.edge === 'index') return Array.isArray(val) ? (val[Number(s.arg)] ?? null) : null
  if (s.edge === 'id' || val === null || typeof val !== 'object' || Array.isArray(val)) return null
  return Object.hasOwn(val, s.arg) ? (val as Record<string, unknown>)[s.arg] : null
}

const projectOf = (r: Ref) => `${r.entity}/${r.project}`
const DELETED = Symbol('deleted')

/** Row steps of one batch waiting for one table, answered together by one read of that table. */
interface RowWait {
  ids: Map<string, ((v: unknown) => void)[]>
  positions: Map<number, ((v: unknown) => void)[]>
  fail: ((e: unknown) => void)[]
}

/**
 * One `/refs/read_batch`: each object version is read once, and the row steps that reach a table while the
 * refs are walked together are answered by one read of that table (by digest and by position).
 */
class Batch {
  private readonly versions = new Map<string, Promise<unknown>>()
  private readonly waits = new Map<string, RowWait>()
  private flushing = false

  constructor(
    private readonly objects: ObjectsBackend,
    private readonly tables: TablesBackend,
  ) {}

  /** A deleted version reads as null; an unknown one is 404. */
  version(r: Ref): Promise<unknown> {
    const key = JSON.stringify([projectOf(r), r.name, r.digest])
    let v = this.versions.get(key)
    if (!v) {
      v = this.objects.read(projectOf(r), r.name, r.digest).then((o) => {
        if (!o) throw new DomainError(404, `Obj ${r.name}:${r.digest} not found`)
        return o.deleted_at ? DELETED : o.val
      })
      this.versions.set(key, v)
    }
    return v
  }

  /** A row of a table, by position (`index`) or digest (`id`); a missing row is null, a missing table 404. */
  row(project: string, digest: string, s: Step): Promise<unknown> {
    if (s.edge !== 'index' && s.edge !== 'id') return Promise.resolve(null)
    const key = JSON.stringify([project, digest])
    let w = this.waits.get(key)
    if (!w) this.waits.set(key, (w = { ids: new Map(), positions: new Map(), fail: [] }))
    const wait = w
    return new Promise((resolve, reject) => {
      const k = s.edge === 'index' ? Number(s.arg) : s.arg
      const m = (s.edge === 'index' ? wait.positions : wait.ids) as Map<string | number, ((v: unknown) => void)[]>
      m.set(k, [...(m.get(k) ?? []), resolve])
      wait.fail.push(reject)
      if (!this.flushing) {
        this.flushing = true
        // Every ref waiting on the same object continues in this turn: their row steps are all queued by then.
        setImmediate(() => void this.flush())
      }
    })
  }

  private async flush(): Promise<void> {
    this.flushing = false
    const waits = [...this.waits]
    this.waits.clear()
    await Promise.all(waits.map(([key, w]) => this.answer(JSON.parse(key) as [string, string], w)))
  }

  private async answer([project, digest]: [string, string], w: RowWait): Promise<void> {
    try {
      const [byId, byPos] = await Promise.all([
        w.ids.size ? this.tables.rowsById(project, digest, [...w.ids.keys()]) : new Map(),
        w.positions.size ? this.tables.rowsAt(project, digest, [...w.positions.keys()]) : new Map(),
      ])
      if (!byId || !byPos) throw new DomainError(404, `Table ${digest} not found`)
      for (const [id, fns] of w.ids) for (const f of fns) f(byId.get(id) ?? null)
      for (const [p, fns] of w.positions) for (const f of fns) f(byPos.get(p) ?? null)
    } catch (e) {
      for (const f of w.fail) f(e)
    }
  }

  /**
   * Walks the ref's path. A value that is itself a ref is followed when the path goes on into it; one
   * into another project than the ref's own reads as null (Weave never crosses projects).
   */
  async resolve(ref: Ref): Promise<unknown> {
    let cur = await this.version(ref)
    const pending = [...ref.path]
    let hops = 0
    while (cur !== DELETED && pending.length) {
      const inner = asRef(cur)
      if (!inner) {
        cur = stepInto(cur, pending.shift()!)
        continue
      }
      if (++hops > MAX_REF_DEPTH) throw bad(`Refs nest deeper than ${MAX_REF_DEPTH} (a cycle?)`)
      if (projectOf(inner) !== projectOf(ref)) return null
      if (inner.kind === 'table') {
        // A table ref may carry its own row step (a TS SDK TableRowRef): that step comes first.
        pending.unshift(...inner.path)
        cur = await this.row(projectOf(inner), inner.digest, pending.shift()!)
      } else if (inner.kind === 'object' || inner.kind === 'op') {
        cur = await this.version(inner)
        pending.unshift(...inner.path)
      } else return null
    }
    return cur === DELETED ? null : cur
  }
}

/** Reads values by ref: object versions, paths into them, and table rows reached through them. */
export class RefResolver {
  constructor(
    private readonly objects: ObjectsBackend,
    private readonly tables: TablesBackend,
  ) {}

  /**
   * Every ref is parsed and checked (entity scope, no `latest`, no bare table) before any is read,
   * so a bad ref fails the batch whatever its position. `mayRead` says whether the key covers an entity.
   * The refs are walked together; when several fail, the first in the batch's order is the answer.
   */
  async readBatch(refs: string[], mayRead: (entity: string) => boolean): Promise<unknown[]> {
    if (refs.length > MAX_REFS) throw bad(`Refs read batch contains ${refs.length} refs; at most ${MAX_REFS}`)
    const parsed = refs.map(parseRef)
    for (const r of parsed) {
      if (!mayRead(r.entity)) throw new DomainError(403, `This API key may not access entity ${JSON.stringify(r.entity)}`)
      if (r.kind === 'table') throw bad('Table refs not supported: read a table through the object that holds it')
      if (r.kind !== 'object' && r.kind !== 'op') throw bad(`Refs of kind ${JSON.stringify(r.kind.slice(0, 50))} cannot be read`)
      if (r.digest === 'latest') throw bad('Reading refs with `latest` is not supported: name a version digest')
    }
    const batch = new Batch(this.objects, this.tables)
    const settled = await Promise.allSettled(parsed.map((r) => batch.resolve(r)))
    const failed = settled.find((s) => s.status === 'rejected')
    if (failed) throw failed.reason
    return settled.map((s) => (s as PromiseFulfilledResult<unknown>).value)
  }
}
