/**
 * The relations over calls that statistics read (source.ts CallSource): the only SQL outside read/
 * that names the parts' view, its `seq` or the merge rule is here, behind typed specs.
 */
import type { Params } from '../../query/params.js'
import type { CallFilter } from '../../schemas/common.js'
import type { QueryOptions } from '../model.js'
import { latest } from '../model.js'
import type { CallColumn, CallRelation, IdSpan, MatchView, SeqBound, SinceMerge, SinceSpec, TouchedSpec } from '../source.js'
import { matching, merged } from './merged.js'

const relation = (sql: string) => sql as CallRelation
/** A time in epoch ms as a DuckDB timestamp literal (a number the caller computed, never a string it was sent). */
const ts = (ms: number) => `make_timestamp(${Math.round(ms) * 1000})`
const bound = (b: SeqBound) => (typeof b === 'number' ? String(Math.trunc(b)) : `(${b.sql})`)

export function matchingView(
  project: string,
  opts: { filter?: CallFilter | null; query?: QueryOptions['query'] },
  params: Params,
  view: MatchView,
): CallRelation {
  const where: string[] = []
  if (view.started) where.push(`m.started_at >= ${ts(view.started[0])} AND m.started_at < ${ts(view.started[1])}`)
  if (view.open) where.push('m.ended_at IS NULL')
  const parts = view.ids ? [`id >= ${params.add(view.ids[0])} AND id <= ${params.add(view.ids[1])}`] : []
  return relation(matching(project, opts, params, true, '', { where, parts, only: [...view.columns] }))
}

export function touchedCalls(spec: TouchedSpec, params: Params): CallRelation {
  return relation(`SELECT DISTINCT project_id, id FROM all_parts${touchedWhere(spec, params)}`)
}

/** The least (`lo`) and greatest (`hi`) id of touchedCalls(spec), as one row (nulls for none). */
export function touchedSpanSql(spec: TouchedSpec, params: Params): string {
  return `SELECT min(id) AS lo, max(id) AS hi FROM all_parts${touchedWhere(spec, params)}`
}

function touchedWhere(spec: TouchedSpec, params: Params): string {
  const conds: string[] = []
  if (spec.project !== undefined) conds.push(`project_id = ${params.add(spec.project)}`)
  if (spec.after !== undefined) conds.push(`seq > ${bound(spec.after)}`)
  if (spec.upTo !== undefined) conds.push(`seq <= ${bound(spec.upTo)}`)
  const [from, before] = spec.ids ?? [null, null]
  if (from !== null) conds.push(`id >= ${params.add(from)}`)
  if (before !== null) conds.push(`id < ${params.add(before)}`)
  return conds.length ? ` WHERE ${conds.join(' AND ')}` : ''
}

export function mergedCalls(ids: CallRelation, columns: readonly CallColumn[], upTo: SeqBound | null): CallRelation {
  const where = upTo === null ? '' : `WHERE seq <= ${bound(upTo)}`
  return relation(`(${merged(columns, false)} SEMI JOIN (${ids}) f USING (project_id, id) ${where} GROUP BY project_id, id)`)
}

/**
 * The touched calls merged now and at the mark in one pass over their parts. A call with one part (most: the ingest
 * worker folds an SDK's start and end sent in one batch) is that part as it is, and had no state at the mark (its one
 * part is past it); only calls with several parts go through the merge's aggregate, which copied every value into its
 * states. With 60,000 one-part calls in the tail, `/calls/stats` of the last hour took 125 / 155 ms (medians of two
 * rounds) merging them twice (now and at the mark, each joining all their parts to them again), 75 / 87 so
 * (docs/statistics.md). `prefix` names the WITH items: a constant of the caller's.
 */
export function mergedSinceSql(spec: SinceSpec, columns: readonly CallColumn[], params: Params, prefix: string): SinceMerge {
  const name = (x: string) => `${prefix}_${x}`
  const [ids, parts, several, now, mark] = [name('ids'), name('parts'), name('several'), name('now'), name('mark')]
  const conds = [
    ...(spec.project !== undefined ? [`project_id = ${params.add(spec.project)}`] : []),
    ...(spec.upTo !== undefined ? [`seq <= ${bound(spec.upTo)}`] : []),
    ...(spec.span ? [spanSql(spec.span, params)] : []),
  ]
  const where = (...more: string[]) => ([...conds, ...more].length ? ` WHERE ${[...conds, ...more].join(' AND ')}` : '')
  const cols = columns.join(', ')
  // The calls of several parts merged (latest non-null value per field, as merged()), from their parts meeting `cond`.
  const fold = (cond: string) =>
    `SELECT project_id, id, ${columns.map(latest).join(', ')}, max(deleted_at) AS deleted_at
      FROM ${parts} SEMI JOIN ${several} USING (project_id, id) WHERE ${cond} GROUP BY project_id, id`
  return {
    withs: [
      `${ids} AS MATERIALIZED (SELECT DISTINCT project_id, id FROM all_parts${where(`seq > ${bound(spec.after)}`)})`,
      `${parts} AS MATERIALIZED (SELECT seq, project_id, id, ${cols}, deleted_at FROM all_parts SEMI JOIN ${ids} USING (project_id, id)${where()})`,
      `${several} AS MATERIALIZED (SELECT project_id, id FROM ${parts} GROUP BY project_id, id HAVING count(*) > 1)`,
      `${now} AS MATERIALIZED (SELECT project_id, id, ${cols}, deleted_at FROM ${parts} ANTI JOIN ${several} USING (project_id, id)
        UNION ALL ${fold('true')})`,
      `${mark} AS MATERIALIZED (${fold(`seq <= ${bound(spec.after)}`)})`,
    ],
    now: relation(now),
    atMark: relation(mark),
  }
}

/** Ids in the span, its ends bound: a condition the Parquet scans prune row groups by (see IdSpan). */
const spanSql = (span: IdSpan, params: Params) => `id >= ${params.add(span[0])} AND id <= ${params.add(span[1])}`

/** One row per window: its number `w` and the least and greatest id started in it. */
export function windowIdsSql(windows: readonly (readonly [number, number])[], params: Params, project: string): string {
  const p = params.add(project)
  return windows
    .map(
      ([lo, hi], i) =>
        `SELECT ${i} AS w, min(id) AS lo, max(id) AS hi FROM all_parts WHERE project_id = ${p} AND started_at >= ${ts(lo)} AND started_at < ${ts(hi)}`,
    )
    .join(' UNION ALL ')
}
