import { AsyncByteQueue, RecordBatchStreamWriter, type RecordBatch, type Schema } from 'apache-arrow'

/** The media type of the Arrow IPC streaming format. */
export const ARROW_STREAM = 'application/vnd.apache.arrow.stream'

/** Whether an Accept header asks for Arrow IPC streams (listed with a non-zero quality). */
export function acceptsArrow(accept: string | undefined): boolean {
  if (!accept) return false
  return accept.split(',').some((range) => {
    const [type, ...params] = range.split(';').map((x) => x.trim().toLowerCase())
    if (type !== ARROW_STREAM) return false
    const q = params.find((p) => p.startsWith('q='))
    return q === undefined || Number(q.slice(2)) > 0
  })
}

/** Keeps what the writer writes, for the caller to take after each batch (the writer's own queue is read-only). */
class Collect extends AsyncByteQueue {
  chunks: Uint8Array[] = []
  override write(value: Uint8Array): void {
    this.chunks.push(value)
  }
  take(): Buffer {
    const out = Buffer.concat(this.chunks)
    this.chunks = []
    return out
  }
}

/**
 * Record batches as an Arrow IPC stream (schema, batches, end-of-stream), one buffer per batch.
 * Batches are pulled only as the consumer asks for the next buffer, so a slow client holds back the
 * query rather than filling memory.
 */
export async function* ipcStream(schema: Schema, batches: AsyncIterable<RecordBatch>): AsyncGenerator<Buffer> {
  const sink = new Collect()
  const writer = new RecordBatchStreamWriter()
  writer.reset(sink as unknown as Parameters<typeof writer.reset>[0], schema)
  yield sink.take()
  for await (const batch of batches) {
    writer.write(batch)
    yield sink.take()
  }
  writer.finish()
  yield sink.take()
}
