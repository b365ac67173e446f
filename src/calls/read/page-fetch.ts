import type { Params } from '../../query/expr.js'
import type { CallRecord } from '../model.js'
import { pageBlocksRead, readBlockRows } from '../storage/page-blocks.js'
import { fetchSql } from './order.js'
import type { PageIds } from './page-index.js'
import { toCall } from './to-call.js'

type ReadAll = (sql: string, params: Params) => Promise<Record<string, unknown>[]>

/**
 * The calls of a page whose ids are known: those the page index located (read from the index alone,
 * no part newer than it) from the block files, a pread and an inflate a block; the rest (calls with
 * newer parts, from flushed segments or the tail, or in a block file found damaged) merged by id as
 * before. `onDamage` is told when a block file failed to read, so that it is rebuilt.
 */
export async function pageCalls(
  dir: string,
  project: string,
  plan: PageIds,
  readAll: ReadAll,
  onDamage: () => void,
): Promise<CallRecord[]> {
  const rows = new Map<string, Record<string, unknown>>()
  if (plan.located.length && pageBlocksRead()) {
    const read = await readBlockRows(dir, plan.located)
    if (read.damaged) onDamage()
    for (const [id, r] of read.rows) rows.set(id, r)
  }
  const rest = plan.ids.filter((id) => !rows.has(id))
  if (rest.length) {
    const q = fetchSql(project, rest)
    for (const r of await readAll(q.sql, q.params)) rows.set(String(r.id), r)
  }
  // A call fetched by id may have been deleted since its id was read: it is left out, as before.
  return plan.ids.flatMap((id) => {
    const r = rows.get(id)
    return r ? [toCall(r)] : []
  })
}
