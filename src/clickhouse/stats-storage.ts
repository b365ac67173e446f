import type { QueryOptions } from '../calls/model.js'
import { chMatching } from './calls-sql.js'
import { ChParams } from './query/params.js'
import type { ChReader } from './stats.js'

/**
 * `total_storage_size_bytes` of /calls/query_stats on ClickHouse, as the embedded store counts it
 * (calls/read/statements.ts traceBytesSql): the JSON bytes (attributes, inputs, output, summary) of
 * every live call of the traces whose root matches (up to `limit` roots).
 */
export async function chTraceStorageBytes(reader: ChReader, project: string, opts: QueryOptions): Promise<number> {
  const params = new ChParams()
  const l = reader.opts
  const limit = opts.limit ? ` LIMIT ${params.add(opts.limit, 'UInt64')}` : ''
  const roots = `SELECT m.trace_id FROM ${chMatching(l, project, opts, params)} AND m.parent_id IS NULL${limit}`
  const bytes = ['attributes', 'inputs', 'output', 'summary'].map((c) => `coalesce(length(m.${c}), 0)`).join(' + ')
  const [r] = await reader.rows(
    `SELECT coalesce(sum(${bytes}), 0) AS n FROM ${chMatching(l, project, {}, params)} AND m.trace_id IN (${roots})`,
    params,
  )
  return Number(r?.n ?? 0)
}
