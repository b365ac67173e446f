import type { DuckDBValue } from '@duckdb/node-api'
import { randomUUID } from 'node:crypto'
import type { FeedbackBackend } from './backends.js'
import type { Catalog, Tx } from './db.js'
import { checkAnnotationValues } from './annotation-spec.js'
import { checkFeedback } from './feedback-rules.js'
import { compileExpr, fieldSql, FEEDBACK_COLUMNS, Params } from './feedback-query.js'
import { purgeIds } from './prices.js'
import type { RefResolver } from './refs.js'
import { DomainError } from '../core/errors.js'
import { jsonPath } from '../query/compiled.js'
import type { FeedbackField, FeedbackValues } from '../query/feedback-fields.js'
import type { FeedbackCreateReq, FeedbackCreateRes, FeedbackQueryReq } from '../schemas/feedback.js'

interface Checked {
  req: FeedbackCreateReq
  id: string
  payload: Record<string, unknown>
}

async function insert(tx: Tx, c: Checked, userId: string, now: number): Promise<void> {
  const r = c.req
  const [dup] = await tx.all('SELECT 1 FROM feedback WHERE project_id = $1 AND id = $2', [r.project_id, c.id])
  if (dup) throw new DomainError(409, `Feedback ${c.id} already exists`)
  await tx.run(`INSERT INTO feedback VALUES ($1, $2, $3, $4, $5, make_timestamp($6::BIGINT * 1000), $7, $8, $9, $10, $11, $12)`, [
    r.project_id,
    c.id,
    r.weave_ref,
    userId,
    r.creator ?? null,
    now,
    r.feedback_type,
    JSON.stringify(c.payload),
    r.annotation_ref ?? null,
    r.runnable_ref ?? null,
    r.call_ref ?? null,
    r.trigger_ref ?? null,
  ])
}

/** Every value the query names, in select order; the payload column parsed back to JSON. */
function toRow(r: Record<string, unknown>): Record<string, unknown> {
  return 'payload' in r && typeof r.payload === 'string' ? { ...r, payload: JSON.parse(r.payload) } : r
}

export const MAX_CALL_FEEDBACK_ROWS = 200_000

/** One row's value for a call, unless an earlier row already decided it (rows come oldest first). */
export function pick(values: FeedbackValues, f: FeedbackField, call: string, type: string, v: string | null): void {
  if (call.includes('/') || values.has(call)) return
  if (f.type === '*' || f.column !== 'payload') {
    if ((f.type === '*' || f.type === type) && v !== null && v !== '') values.set(call, v)
  } else if (f.type === type) values.set(call, v)
}

/** Feedback (docs/feedback.md): rows about a call or object, checked by Weave's type rules before they are stored. */
export class FeedbackStore implements FeedbackBackend {
  /** `refs` reads annotation specs and runnables; the server passes its one resolver, so the stores' caches are not duplicated. */
  constructor(
    private readonly catalog: Catalog,
    private readonly refs: RefResolver,
  ) {}

  /** Checks every row first, then stores them all in one transaction: one bad row stores none. */
  async create(reqs: FeedbackCreateReq[], userId: string, replacing?: { project: string; id: string }): Promise<FeedbackCreateRes[]> {
    const checked: Checked[] = reqs.map((req) => ({ req, id: req.id ?? randomUUID(), payload: checkFeedback(req) }))
    await checkAnnotationValues(reqs, (ref) => this.refs.readBatch([ref], () => true).then((v) => v[0] ?? null))
    const now = Date.now()
    await this.catalog.transaction(async (tx) => {
      if (replacing) await this.remove(tx, replacing.project, [replacing.id], true)
      for (const c of checked) await insert(tx, c, userId, now)
    })
    const created_at = new Date(now).toISOString()
    return checked.map((c) => ({ id: c.id, created_at, wb_user_id: userId, payload: c.payload }))
  }

  /** The rows the query matches (sorted, paged, with the fields asked for) and how many match in all. */
  async query(q: FeedbackQueryReq): Promise<{ result: Record<string, unknown>[]; total_count: number }> {
    const params = new Params()
    params.add(q.project_id)
    // The condition's parameters come first, so the count reuses them alone.
    const where = `project_id = $1` + (q.query ? ` AND coalesce(${compileExpr(q.query.$expr, params)}, false)` : '')
    const countParams = [...params.values]
    const fields = q.fields?.length ? q.fields : Object.keys(FEEDBACK_COLUMNS)
    const select = fields.map((f) => `${fieldSql(f, params)} AS "${f}"`).join(', ')
    const order = (q.sort_by ?? []).map((s) => `${fieldSql(s.field, params)} ${s.direction === 'desc' ? 'DESC' : 'ASC'} NULLS LAST`)
    let sql = `SELECT ${select} FROM feedback WHERE ${where} ORDER BY ${[...order, 'created_at ASC', 'id ASC'].join(', ')}`
    if (q.limit !== undefined && q.limit !== null) sql += ` LIMIT ${params.add(q.limit)}`
    if (q.offset) sql += ` OFFSET ${params.add(q.offset)}`
    const rows = await this.catalog.all<Record<string, unknown>>(sql, params.values)
    const [n] = await this.catalog.all<{ n: bigint }>(`SELECT count(*) AS n FROM feedback WHERE ${where}`, countParams)
    return { result: rows.map(toRow), total_count: Number(n?.n ?? 0) }
  }

  /**
   * Each call's value of each feedback field, for call queries that filter or sort on them: one query.
   * Several rows of a type about one call: the earliest created decides (Weave's ClickHouse takes
   * `any` row, which is not defined); for `[*]`, the earliest whose value is not empty.
   */
  async callValues(project: string, fields: FeedbackField[]): Promise<Map<string, FeedbackValues>> {
    const out = new Map<string, FeedbackValues>(fields.map((f) => [f.name, new Map()]))
    if (fields.length === 0) return out
    const params: DuckDBValue[] = [project, `weave:///${project}/call/`]
    const cols = fields.map((f, i) => {
      if (f.column !== 'payload') return `${f.column} AS v${i}`
      params.push(jsonPath(f.path))
      return `json_extract_string(payload_dump, $${params.length}) AS v${i}`
    })
    const types = fields.some((f) => f.type === '*')
      ? ''
      : ` AND list_contains(from_json($${params.push(JSON.stringify(fields.map((f) => f.type)))}::JSON, '["VARCHAR"]'), feedback_type)`
    params.push(MAX_CALL_FEEDBACK_ROWS + 1)
    const rows = await this.catalog.all<Record<string, string | null>>(
      `SELECT weave_ref, feedback_type, ${cols.join(', ')} FROM feedback WHERE project_id = $1 AND starts_with(weave_ref, $2)${types}
        ORDER BY created_at, id LIMIT $${params.length}`,
      params,
    )
    if (rows.length > MAX_CALL_FEEDBACK_ROWS)
      throw new DomainError(400, `More than ${MAX_CALL_FEEDBACK_ROWS} feedback rows to filter or sort calls on: narrow the query`)
    const prefix = params[1] as string
    for (const r of rows) {
      const call = r.weave_ref!.slice(prefix.length)
      fields.forEach((f, i) => pick(out.get(f.name)!, f, call, r.feedback_type!, r[`v${i}`] ?? null))
    }
    return out
  }

  /** Deletes the rows a purge query names by id (Weave accepts no other purge). */
  async purge(project: string, query: unknown): Promise<void> {
    const ids = purgeIds(query, 'feedback', 'feedback')
    if (ids.length) await this.catalog.transaction((tx) => this.remove(tx, project, ids, false))
  }

  /** Replaces a row: deletes it and creates a new one (a new id) in one transaction. */
  async replace(project: string, feedbackId: string, req: FeedbackCreateReq, userId: string): Promise<FeedbackCreateRes> {
    if (req.id === feedbackId) throw new DomainError(400, 'A replacement gets a new id; id must differ from feedback_id')
    const [res] = await this.create([req], userId, { project, id: feedbackId })
    return res!
  }

  private async remove(tx: Tx, project: string, ids: string[], mustExist: boolean): Promise<void> {
    const list = `from_json($2::JSON, '["VARCHAR"]')`
    if (mustExist) {
      const [found] = await tx.all('SELECT 1 FROM feedback WHERE project_id = $1 AND list_contains(' + list + ', id)', [
        project,
        JSON.stringify(ids),
      ])
      if (!found) throw new DomainError(404, `Feedback ${ids[0]} not found`)
    }
    await tx.run(`DELETE FROM feedback WHERE project_id = $1 AND list_contains(${list}, id)`, [project, JSON.stringify(ids)])
  }
}
