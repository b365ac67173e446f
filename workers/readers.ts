// Piscina worker: runs reads over Parquet segments in its own DuckDB, streaming Arrow batches back.
import { runRead } from '../src/calls/readers/worker-read.js'
import type { ReadTask } from '../src/calls/readers/protocol.js'

export default function read(task: ReadTask) {
  return runRead(task)
}
