import { DomainError } from '../core/errors.js'
import type { CallRecord } from '../calls/model.js'
import type { CallBackend } from '../calls/backend.js'
import type { FeedbackBackend } from '../catalog/backends.js'
import { parseRef, type RefResolver } from '../catalog/refs.js'
import {
  bindExpand,
  expandedFieldsOf,
  parseExpandColumns,
  type ExpandBinding,
  type ExpandedField,
  type ExpandRoute,
} from '../query/expand-fields.js'
import type { CallsQueryReq } from '../schemas/calls-write.js'
import { attachFeedback } from './calls-feedback.js'

/**
 * `expand_columns` (docs/calls-and-storage.md): refs at the given dotted paths of returned calls are
 * replaced by the values they point to, and fields under those paths in queries and sorts read the
 * values. Only object and op refs of the request's own project are followed (Weave never crosses
 * projects); a ref to another project, to a deleted or unknown version, or a table or call ref stays
 * the string it is.
 */

/** Distinct refs (nested ones included) one request may resolve to filter or sort on: 400 past it. */
export const MAX_FILTER_REFS = 2000
/** Resolved values a result expansion keeps between pages or stream batches (as Weave's cache). */
const CACHE_SIZE = 1000
/** Refs per read batch (the resolver takes at most 1000). */
const BATCH = 500

export interface ExpandDeps {
  /** Reads the refs a query on expanded fields needs (the call backend's, calls/backend.ts). */
  distinctRefs?: CallBackend['distinctRefs']
  refs?: RefResolver
  feedback?: FeedbackBackend
}

/** Reads refs of one project, each once per request (an LRU of CACHE_SIZE), null when it reads as nothing. */
class ProjectRefs {
  private readonly cache = new Map<string, unknown>()
  private count = 0

  constructor(
    private readonly resolver: RefResolver,
    private readonly project: string,
    private readonly max = Infinity,
    private readonly cacheSize = CACHE_SIZE,
  ) {}

  /** A string this request would expand: an object or op ref of the project, with a version digest. */
  expandable(v: unknown): v is string {
    if (typeof v !== 'string' || !v.startsWith('weave:///')) return false
    try {
      const r = parseRef(v)
      return (r.kind === 'object' || r.kind === 'op') && `${r.entity}/${r.project}` === this.project && r.digest !== 'latest'
    } catch {
      return false
    }
  }

  async many(refs: string[]): Promise<Map<string, unknown>> {
    const out = new Map<string, unknown>()
    for (const r of refs) if (this.cache.has(r)) out.set(r, this.cache.get(r))
    const todo = [...new Set(refs)].filter((r) => !out.has(r))
    this.count += todo.length
    if (this.count > this.max)
      throw new DomainError(400, `More than ${this.max} distinct refs to expand for filtering or sorting: narrow the filter`)
    for (let i = 0; i < todo.length; i += BATCH) {
      const part = todo.slice(i, i + BATCH)
      const vals = await this.read(part)
      part.forEach((r, j) => {
        out.set(r, vals[j] ?? null)
        this.remember(r, vals[j] ?? null)
      })
    }
    return out
  }

  /** One batch; when a ref in it is unknown (404) or refused (400), each is read alone so only that one stays unresolved. */
  private async read(refs: string[]): Promise<unknown[]> {
    try {
      return await this.resolver.readBatch(refs, () => true)
    } catch (e) {
      const unresolvable = e instanceof DomainError && (e.status === 404 || e.status === 400)
      if (!unresolvable) throw e
      if (refs.length === 1) return [null]
    }
    const out: unknown[] = []
    for (const r of refs) out.push(...(await this.read([r])))
    return out
  }

  private remember(ref: string, val: unknown): void {
    if (this.cache.size >= this.cacheSize) this.cache.delete(this.cache.keys().next().value!)
    this.cache.set(ref, val)
  }
}

type Tree = Record<string, unknown>
const isObject = (v: unknown): v is Tree => v !== null && typeof v === 'object' && !Array.isArray(v)

/** The value at a dotted path through objects only (Weave's nested-key walk); undefined when absent. */
function getNested(root: unknown, segs: string[]): unknown {
  let cur = root
  for (const s of segs) cur = isObject(cur) && Object.hasOwn(cur, s) ? cur[s] : undefined
  return cur
}

function setNested(root: Tree, segs: string[], val: unknown): void {
  let cur = root
  for (const s of segs.slice(0, -1)) {
    if (!isObject(cur[s])) cur[s] = {}
    cur = cur[s] as Tree
  }
  cur[segs[segs.length - 1]!] = val
}

/**
 * Replaces refs at the paths, shallowest paths first so that a deeper path expands inside the value
 * a shallower one brought in. With `mark`, an object value gains `_ref` (its ref), as Weave's results do.
 */
async function expandPaths(roots: Tree[], paths: string[][], refs: ProjectRefs, mark: boolean): Promise<void> {
  const depths = [...new Set(paths.map((p) => p.length))].sort((a, b) => a - b)
  for (const depth of depths) {
    const hits: { root: Tree; segs: string[]; ref: string }[] = []
    for (const root of roots)
      for (const segs of paths.filter((p) => p.length === depth)) {
        const v = getNested(root, segs)
        if (refs.expandable(v)) hits.push({ root, segs, ref: v })
      }
    if (hits.length === 0) continue
    const vals = await refs.many(hits.map((h) => h.ref))
    for (const { root, segs, ref } of hits) {
      const v = vals.get(ref)
      if (v === null || v === undefined) continue
      // A copy: the cached value is shared between calls, and deeper paths write into it.
      const copy = structuredClone(v)
      if (mark && isObject(copy) && !Object.hasOwn(copy, '_ref')) copy._ref = ref
      setNested(root, segs, copy)
    }
  }
}

/** The value at the rest of a field's path as a JSON path reads it: digit keys index arrays, others key objects. */
function leafOf(val: unknown, segs: string[]): unknown {
  let cur = val
  for (const s of segs) {
    if (/^(0|[1-9]\d{0,8})$/.test(s)) cur = Array.isArray(cur) ? cur[Number(s)] : undefined
    else cur = isObject(cur) && Object.hasOwn(cur, s) ? cur[s] : undefined
  }
  return cur
}

/** For one prefix of a field: each ref's value (nested expand columns applied), at the rest of the field's path. */
async function route(field: ExpandedField, prefix: string[], found: Map<string, unknown>, refs: ProjectRefs): Promise<ExpandRoute> {
  const resolved = [...found].filter(([, v]) => v !== null && v !== undefined)
  const roots = resolved.map(([, v]) => ({ v: structuredClone(v) }))
  const deeper = field.prefixes.filter((p) => p.length > prefix.length && prefix.every((s, i) => s === p[i]))
  await expandPaths(
    roots,
    deeper.map((p) => ['v', ...p.slice(prefix.length)]),
    refs,
    false,
  )
  const values = new Map<string, string | null>()
  resolved.forEach(([ref], i) => {
    const leaf = leafOf(roots[i]!.v, field.segs.slice(prefix.length))
    values.set(ref, leaf === undefined || leaf === null ? null : JSON.stringify(leaf))
  })
  return { prefix, values }
}

type Queried = Pick<CallsQueryReq, 'project_id' | 'filter' | 'query' | 'sort_by' | 'expand_columns'>

/**
 * Fields under expand columns named in the query or sort: the distinct refs at those columns of the
 * calls the filter matches are read (at most MAX_FILTER_REFS, 400 past it), resolved, and each
 * field's values bound to the query and sort list the call store compiles (query/expand-fields.ts).
 */
export async function withExpand<T extends Queried>(d: ExpandDeps, body: T): Promise<T> {
  const fields = expandedFieldsOf(body.query, body.sort_by, parseExpandColumns(body.expand_columns))
  if (fields.length === 0) return body
  if (!d.refs || !d.distinctRefs) throw new DomainError(400, 'expand_columns cannot be used in queries on this server')
  const prefixes = [...new Map(fields.flatMap((f) => f.prefixes).map((p) => [p.join('\u0000'), p])).values()]
  const found = await d.distinctRefs(body.project_id, body.filter, prefixes, MAX_FILTER_REFS + 1)
  if (found.length > MAX_FILTER_REFS)
    throw new DomainError(400, `More than ${MAX_FILTER_REFS} distinct refs to expand for filtering or sorting: narrow the filter`)
  const refs = new ProjectRefs(d.refs, body.project_id, MAX_FILTER_REFS, MAX_FILTER_REFS)
  const top = await refs.many(found.filter((r) => refs.expandable(r)))
  const binding: ExpandBinding = new Map()
  for (const f of fields) {
    const routes: ExpandRoute[] = []
    for (const p of f.prefixes) routes.push(await route(f, p, top, refs))
    binding.set(f.name, routes)
  }
  bindExpand([body.query, body.sort_by], binding)
  return body
}

type Finished = Pick<CallsQueryReq, 'project_id' | 'expand_columns' | 'return_expanded_column_values' | 'include_feedback'>

/**
 * What happens to each page (or stream batch) of returned calls: refs under expand_columns replaced
 * by their values (unless return_expanded_column_values is false), then, with include_feedback, the
 * feedback rows attached. Null when there is nothing to do. Paths are checked before any call is read.
 */
export function finisher(d: ExpandDeps, body: Finished): ((calls: CallRecord[]) => Promise<CallRecord[]>) | null {
  const paths = parseExpandColumns(body.expand_columns)
  const expand = paths.length > 0 && body.return_expanded_column_values !== false && d.refs
  const feedback = body.include_feedback === true
  if (!expand && !feedback) return null
  if (feedback && !d.feedback) throw new DomainError(400, 'include_feedback is not available on this server')
  const refs = expand ? new ProjectRefs(d.refs!, body.project_id) : null
  return async (calls) => {
    if (refs) await expandPaths(calls, paths, refs, true)
    if (feedback) await attachFeedback(d.feedback!, body.project_id, calls)
    return calls
  }
}
