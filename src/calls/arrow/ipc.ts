import { AsyncByteQueue, RecordBatch, RecordBatchReader, RecordBatchStreamWriter, type Schema } from 'apache-arrow'

export { ARROW_STREAM, acceptsArrow } from './media.js'

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
  /** As take, in memory of its own (never a slice of Node's shared pool), so it can be moved to another thread. */
  takeOwn(): Uint8Array {
    const n = this.chunks.reduce((a, c) => a + c.byteLength, 0)
    const out = new Uint8Array(n)
    let at = 0
    for (const c of this.chunks) {
      out.set(c, at)
      at += c.byteLength
    }
    this.chunks = []
    return out
  }
}

/**
 * Batches decoded from IPC bytes that are kept (see fromIpc): written out again as those bytes, so a
 * batch a reader worker encoded crosses the main thread to the client without being re-encoded.
 */
const encoded = new WeakMap<RecordBatch, Uint8Array>()

/** An encoder of one schema's stream: the schema message, then each batch's message, as separate byte arrays. */
export function ipcEncoder(schema: Schema): { schema: Uint8Array; batch: (b: RecordBatch) => Uint8Array } {
  const sink = new Collect()
  const writer = new RecordBatchStreamWriter()
  writer.reset(sink as unknown as Parameters<typeof writer.reset>[0], schema)
  const head = sink.takeOwn()
  return {
    schema: head,
    batch: (b) => {
      writer.write(b)
      return sink.takeOwn()
    },
  }
}

/** The schema of a schema message (see ipcEncoder). */
export function schemaFromIpc(bytes: Uint8Array): Schema {
  return RecordBatchReader.from(bytes).open().schema as Schema
}

/** The record batch of one batch message, given its stream's schema message; remembers the bytes (see ipcStream). */
export function batchFromIpc(schemaBytes: Uint8Array, bytes: Uint8Array): RecordBatch {
  const both = new Uint8Array(schemaBytes.byteLength + bytes.byteLength)
  both.set(schemaBytes)
  both.set(bytes, schemaBytes.byteLength)
  const batch = RecordBatchReader.from(both).open().next().value as RecordBatch
  encoded.set(batch, bytes)
  return batch
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
    const bytes = encoded.get(batch)
    if (bytes) {
      // Same schema, no dictionaries: a batch message stands alone in the stream.
      yield Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength)
      continue
    }
    // A batch of an equal schema held by another object (decoded, or built on another thread) would make the
    // writer end the stream and start a new one: it is written under the stream's own schema.
    writer.write(batch.schema === schema ? batch : new RecordBatch(schema, batch.data))
    yield sink.take()
  }
  writer.finish()
  yield sink.take()
}
