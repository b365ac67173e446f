// Piscina worker: writes compacted segments' block files off the event loop (see block-file-writer.ts).
import { writeBlockFileTask, type BlockFileTask } from '../src/calls/storage/block-file-writer.js'

export default function blocks(task: BlockFileTask) {
  return writeBlockFileTask(task)
}
