import { randomUUID } from 'node:crypto'
import { checkAnnotationValues } from '../catalog/annotation-spec.js'
import type { FeedbackBackend } from '../catalog/backends.js'
import { checkFeedback } from '../catalog/feedback-rules.js'
import { MAX_CALL_FEEDBACK_ROWS, pick } from '../catalog/feedback.js'
import { purgeIds } from '../catalog/prices.js'
import type { RefResolver } from '../catalog/refs.js'
import { DomainError } from '../core/errors.js'
import type { FeedbackField, FeedbackValues } from '../query/feedback-fields.js'
import type { FeedbackCreateReq, FeedbackCreateRes, FeedbackQueryReq } from '../schemas/feedback.js'
import type { Row } from './executor.js'
import { feedbackQuerySql, liveFeedbackSql, CH_FEEDBACK_COLUMNS } from './feedback-sql.js'
import { insertTarget } from './layout.js'
import { chTime, type ChStore } from './objects-store.js'
import { chJsonField } from './query/fields.js'
import { ChParams } from './query/params.js'

/**
 * Feedback on ClickHouse (`feedback`, ReplacingMergeTree by `updated_at`): a create is one insert of all its
 * rows; a purge writes the purged rows again with `deleted_at`; a replace writes the old row deleted and the
 * new one in one insert, so either both land or neither. Rules are the embedded store's (feedback-rules.ts).
 */
export class ClickHouseFeedback implements FeedbackBackend {
  constructor(
    private readonly s: ChStore,
    private readonly refs: RefResolver,
  ) {}

  /** Live rows of the project with these ids, whole. */
  private async live(project: string, ids: string[]): Promise<Row[]> {
    const p = new ChParams()
    const sql = `SELECT * FROM ${liveFeedbackSql(this.s.layout, p, project)} WHERE has(${p.add(ids, 'Array(String)')}, id)`
    return this.s.exec.query(sql, p.values, this.s.reads)
  }

  async create(reqs: FeedbackCreateReq[], userId: string, replacing?: { project: string; id: string }): Promise<FeedbackCreateRes[]> {
    const checked = reqs.map((req) => ({ req, id: req.id ?? randomUUID(), payload: checkFeedback(req) }))
    await checkAnnotationValues(reqs, (ref) => this.refs.readBatch([ref], () => true).then((v) => v[0] ?? null))
    const old = replacing ? await this.live(replacing.project, [replacing.id]) : []
    if (replacing && old.length === 0) throw new DomainError(404, `Feedback ${replacing.id} not found`)
    for (const project of new Set(reqs.map((r) => r.project_id))) {
      const [dup] = await this.live(
        project,
        checked.filter((c) => c.req.project_id === project).map((c) => c.id),
      )
      if (dup) throw new DomainError(409, `Feedback ${String(dup.id)} already exists`)
    }
    const now = Date.now()
    const at = chTime(BigInt(now) * 1000n)
    const updated_at = chTime(this.s.clock.next())
    const rows: Row[] = checked.map(({ req: r, id, payload }) => ({
      project_id: r.project_id,
      weave_ref: r.weave_ref,
      id,
      wb_user_id: userId,
      creator: r.creator ?? null,
      feedback_type: r.feedback_type,
      payload_dump: JSON.stringify(payload),
      annotation_ref: r.annotation_ref ?? null,
      runnable_ref: r.runnable_ref ?? null,
      call_ref: r.call_ref ?? null,
      trigger_ref: r.trigger_ref ?? null,
      created_at: at,
      deleted_at: null,
      updated_at,
    }))
    const gone = old.map((r) => ({ ...r, deleted_at: updated_at, updated_at }))
    await this.s.exec.insert(insertTarget(this.s.layout, 'feedback'), [...gone, ...rows], this.s.writes)
    const created_at = new Date(now).toISOString()
    return checked.map((c) => ({ id: c.id, created_at, wb_user_id: userId, payload: c.payload }))
  }

  async query(q: FeedbackQueryReq): Promise<{ result: Record<string, unknown>[]; total_count: number }> {
    const fields = q.fields?.length ? q.fields : Object.keys(CH_FEEDBACK_COLUMNS)
    const p = new ChParams()
    const { page, count } = feedbackQuerySql(this.s.layout, p, q, fields)
    const rows = await this.s.exec.query(page, p.values, this.s.reads)
    const [n] = await this.s.exec.query(count, p.values, this.s.reads)
    const result = rows.map((r) =>
      Object.fromEntries(
        fields.map((f, i) => [f, f === 'payload' && typeof r[`f${i}`] === 'string' ? JSON.parse(String(r[`f${i}`])) : r[`f${i}`]]),
      ),
    )
    return { result, total_count: Number(n?.n ?? 0) }
  }

  /** As the embedded store's callValues: one bounded query, oldest rows first, `pick` deciding. */
  async callValues(project: string, fields: FeedbackField[]): Promise<Map<string, FeedbackValues>> {
    const out = new Map<string, FeedbackValues>(fields.map((f) => [f.name, new Map()]))
    if (fields.length === 0) return out
    const p = new ChParams()
    const prefix = `weave:///${project}/call/`
    const cols = fields.map((f, i) => `${f.column === 'payload' ? chJsonField('payload_dump', f.path, p).raw! : f.column} AS v${i}`)
    let where = `startsWith(weave_ref, ${p.add(prefix, 'String')})`
    if (!fields.some((f) => f.type === '*'))
      where += ` AND has(${p.add([...new Set(fields.map((f) => f.type))], 'Array(String)')}, feedback_type)`
    const sql = `SELECT weave_ref, feedback_type, ${cols.join(', ')} FROM ${liveFeedbackSql(this.s.layout, p, project)}
      WHERE ${where} ORDER BY created_at, id LIMIT ${p.add(MAX_CALL_FEEDBACK_ROWS + 1, 'UInt64')}`
    const rows = await this.s.exec.query(sql, p.values, this.s.reads)
    if (rows.length > MAX_CALL_FEEDBACK_ROWS)
      throw new DomainError(400, `More than ${MAX_CALL_FEEDBACK_ROWS} feedback rows to filter or sort calls on: narrow the query`)
    for (const r of rows) {
      const call = String(r.weave_ref).slice(prefix.length)
      const type = String(r.feedback_type)
      fields.forEach((f, i) => pick(out.get(f.name)!, f, call, type, (r[`v${i}`] as string | null | undefined) ?? null))
    }
    return out
  }

  async purge(project: string, query: unknown): Promise<void> {
    const ids = purgeIds(query, 'feedback', 'feedback')
    if (ids.length === 0) return
    const rows = await this.live(project, ids)
    const at = chTime(this.s.clock.next())
    if (rows.length)
      await this.s.exec.insert(
        insertTarget(this.s.layout, 'feedback'),
        rows.map((r) => ({ ...r, deleted_at: at, updated_at: at })),
        this.s.writes,
      )
  }

  async replace(project: string, feedbackId: string, req: FeedbackCreateReq, userId: string): Promise<FeedbackCreateRes> {
    if (req.id === feedbackId) throw new DomainError(400, 'A replacement gets a new id; id must differ from feedback_id')
    const [res] = await this.create([req], userId, { project, id: feedbackId })
    return res!
  }
}
