// Piscina worker: parses, validates and encodes ingest bodies off the event loop.
import { Piscina } from 'piscina'
import { prepareIngest, type IngestTask } from '../src/calls/ingest/prepare.js'

/** The result's buffers (each the only view of its memory) move to the main thread rather than being copied. */
export default async function ingest(task: IngestTask) {
  const r = await prepareIngest(task)
  if (!r.ok) return r
  const moving = [r.record.buffer, ...(r.replyJson ? [r.replyJson.buffer] : [])]
  return Piscina.move({ [Piscina.transferableSymbol]: moving, [Piscina.valueSymbol]: r } as unknown as Parameters<typeof Piscina.move>[0])
}
