import { tableFromIPC } from 'apache-arrow'
import type { CallRecord, QueryOptions } from '../../src/calls/model.js'
import type { CallStore } from '../../src/calls/store.js'
import { ipcStream } from '../../src/calls/arrow/ipc.js'

/** Runs fn with the reader pool on (WEFT_READERS=2) or off (0, the default: the in-process path). */
async function withReaders<T>(pool: boolean, fn: () => Promise<T>): Promise<T> {
  process.env.WEFT_READERS = pool ? '2' : '0'
  try {
    return await fn()
  } finally {
    delete process.env.WEFT_READERS
  }
}

/** An export as calls, through the pool or in-process. */
export function exportCalls(store: CallStore, project: string, opts: QueryOptions, pool: boolean): Promise<CallRecord[]> {
  return withReaders(pool, async () => {
    const out: CallRecord[] = []
    for await (const page of await store.stream(project, opts)) out.push(...page)
    return out
  })
}

/** An export as Arrow IPC, read back with apache-arrow into plain rows, through the pool or in-process. */
export function exportArrowRows(store: CallStore, project: string, opts: QueryOptions, pool: boolean): Promise<Record<string, unknown>[]> {
  return withReaders(pool, async () => {
    const { schema, batches } = await store.streamArrow(project, opts)
    const bytes: Buffer[] = []
    for await (const b of ipcStream(schema, batches)) bytes.push(b)
    return tableFromIPC(Buffer.concat(bytes))
      .toArray()
      .map((r) => ({ ...r.toJSON() }))
  })
}
