import { DERIVED } from '../../query/expr.js'

/** Columns every returned call keeps, whatever `columns` asks for (docs/calls-and-storage.md). */
export const REQUIRED_COLUMNS = ['id', 'trace_id', 'project_id', 'op_name', 'started_at']

/** The top-level call fields a `columns` list keeps (null: every one). */
export function keptColumns(columns: readonly string[] | null | undefined): Set<string> | null {
  if (!columns || columns.length === 0) return null
  const keep = new Set([...REQUIRED_COLUMNS, ...columns.map((c) => c.split('.')[0]!)])
  // The derived summary needs these (docs/calls-and-storage.md).
  if (keep.has('summary')) for (const c of ['ended_at', 'exception', 'display_name']) keep.add(c)
  return keep
}

const objectOrEmpty = (c: string) => `coalesce(nullif(m.${c}, 'null'), '{}')`

/**
 * The derived `summary.weave` fields as JSON text, leaving out a latency and display name that are
 * null (as toCall does). Built as text: json_object would write the nulls, and a merge patch per row
 * cost half the time of a 100k-call export.
 */
const WEAVE = `'{"status":' || to_json(${DERIVED['summary.weave.status']!.sql})::VARCHAR
    || ',"trace_name":' || to_json(${DERIVED['summary.weave.trace_name']!.sql})::VARCHAR
    || coalesce(',"latency_ms":' || (${DERIVED['summary.weave.latency_ms']!.sql})::VARCHAR, '')
    || coalesce(',"display_name":' || to_json(nullif(m.display_name, ''))::VARCHAR, '') || '}'`

/**
 * The summary as the JSON answer has it: the stored one with `weave` gaining the derived fields (see
 * toCall). The usual stored summary, an object without `weave`, gets the key spliced in before its
 * closing brace, found first by plain text tests that suffice for the JSON ones (a text that starts `{"` and
 * ends `}` is an object with keys; without `"weave"` or a `\\u` escape it has no `weave` key): the JSON tests parse
 * the text three times, and 1M calls' summaries took 0.97 s of DuckDB's time with them alone, 0.74 s with these
 * first. One that has `weave` is merged (a JSON merge patch, which drops keys whose patch value is null);
 * anything else is replaced, as toCall replaces it.
 */
const SUMMARY = `CASE
    WHEN starts_with(m.summary, '{"') AND ends_with(m.summary, '}') AND NOT contains(m.summary, '"weave"')
      AND NOT contains(m.summary, '\\u') THEN left(m.summary, -1) || ',"weave":' || ${WEAVE} || '}'
    WHEN m.summary IS NULL OR json_type(m.summary) <> 'OBJECT' THEN '{"weave":' || ${WEAVE} || '}'
    WHEN NOT json_exists(m.summary, '$.weave') THEN
      CASE WHEN json_keys(m.summary) = [] THEN '{"weave":' || ${WEAVE} || '}'
      ELSE regexp_replace(m.summary, '}\\s*$', ',"weave":' || ${WEAVE} || '}') END
    ELSE json_merge_patch(m.summary, json_object('weave', json_merge_patch(
      CASE WHEN json_type(m.summary, '$.weave') = 'OBJECT' THEN json_extract(m.summary, '$.weave') ELSE '{}' END,
      ${WEAVE})))::VARCHAR END`

/** How a returned call's field is typed in Arrow: JSON fields are their text; ids and names plain text. */
export type CallArrowKind = 'utf8' | 'json' | 'int64' | 'timestamp'

/**
 * A returned call's fields as SQL over a merged call `m`, in the JSON answer's order, with their Arrow type
 * (docs/calls-and-storage.md#arrow-answers): timestamps stay timestamps, JSON fields are their text. The embedded
 * store's SQL yields these types; the ClickHouse backend (clickhouse/arrow.ts) builds its columns from the kinds.
 */
export const ARROW_CALL_COLUMNS: [name: string, sql: string, kind: CallArrowKind][] = [
  ['id', 'm.id', 'utf8'],
  ['project_id', 'm.project_id', 'utf8'],
  ['op_name', 'm.op_name', 'utf8'],
  ['display_name', "nullif(m.display_name, '')", 'utf8'],
  ['trace_id', 'm.trace_id', 'utf8'],
  ['parent_id', 'm.parent_id', 'utf8'],
  ['thread_id', 'm.thread_id', 'utf8'],
  ['turn_id', 'm.turn_id', 'utf8'],
  ['started_at', 'm.started_at', 'timestamp'],
  ['ended_at', 'm.ended_at', 'timestamp'],
  ['attributes', objectOrEmpty('attributes'), 'json'],
  ['inputs', objectOrEmpty('inputs'), 'json'],
  ['output', "nullif(m.output, 'null')", 'json'],
  ['exception', 'm.exception', 'utf8'],
  ['summary', SUMMARY, 'json'],
  ['svc_user_id', 'm.user_id', 'utf8'],
  ['svc_run_id', 'm.run_id', 'utf8'],
  ['svc_run_step', 'm.run_step', 'int64'],
  ['svc_run_step_end', 'm.run_step_end', 'int64'],
  ['deleted_at', 'NULL::TIMESTAMP', 'timestamp'],
]

/** The select list of an Arrow answer, of the columns kept (all when null). */
export function arrowSelect(keep: Set<string> | null): string {
  return ARROW_CALL_COLUMNS.filter(([name]) => !keep || keep.has(name))
    .map(([name, sql]) => `${sql} AS ${name}`)
    .join(', ')
}
